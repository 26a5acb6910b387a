#!/usr/bin/env bash
# Downloads the GPT-2 (small) checkpoint and tokenizer files into DIR and checks their SHA-256
# (docs/behaviour.md, "The GPT-2 checkpoint"). A file that already verifies is kept and nothing is
# fetched for it; a partial download (DIR/<file>.part) is resumed; a file only takes its final name
# after it verifies, and a download that fails verification is deleted.
set -euo pipefail

FILES=(model.safetensors vocab.json merges.txt)
declare -A SHA256=(
  [model.safetensors]=248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707
  [vocab.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [merges.txt]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
)
BASE_URL="${KAEL_GPT2_BASE_URL:-https://huggingface.co/gpt2/resolve/main}"

usage() {
  cat <<EOF
usage: $0 [--help] [DIR]

Downloads model.safetensors, vocab.json and merges.txt of GPT-2 into DIR (default data/gpt2)
from \$KAEL_GPT2_BASE_URL/<file> (default $BASE_URL) and verifies each
against its SHA-256. Files that already verify are kept; partial downloads (DIR/<file>.part)
are resumed.

Environment (mainly for tests):
  KAEL_GPT2_BASE_URL                   where to fetch the files from
  KAEL_GPT2_SHA256_MODEL_SAFETENSORS   expected SHA-256 of model.safetensors
  KAEL_GPT2_SHA256_VOCAB_JSON          expected SHA-256 of vocab.json
  KAEL_GPT2_SHA256_MERGES_TXT          expected SHA-256 of merges.txt
EOF
}

die() {
  echo "error: $*" >&2
  exit 1
}

DIR=""
for arg in "$@"; do
  case "$arg" in
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option $arg" ;;
    *) [ -z "$DIR" ] || die "more than one directory given ($DIR, $arg)"; DIR="$arg" ;;
  esac
done
DIR="${DIR:-data/gpt2}"

command -v curl >/dev/null || die "curl is needed to download (apt-get install curl)"
command -v sha256sum >/dev/null || die "sha256sum is needed to verify the files (coreutils)"
mkdir -p "$DIR" || die "cannot create directory $DIR"
# A progress bar on a terminal (the model is 548 MB); only errors otherwise.
CURL_OUTPUT=(-sS)
[ -t 2 ] && CURL_OUTPUT=(--progress-bar)

# The expected checksum of a file: KAEL_GPT2_SHA256_<NAME> (upper case, . -> _) overrides.
expected_sha() {
  local var
  var="KAEL_GPT2_SHA256_$(echo "$1" | tr '[:lower:].' '[:upper:]_')"
  echo "${!var:-${SHA256[$1]}}"
}

verifies() {
  local actual
  actual=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$actual" = "$2" ]
}

# Fetches URL into PART, resuming from PART's size. It starts over when the server cannot
# resume (curl exit 33) or refuses the range (HTTP 416: the .part is longer than the file).
fetch() {
  local url="$1" part="$2" code status=0
  code=$(curl -fL --retry 3 --connect-timeout 20 "${CURL_OUTPUT[@]}" -C - -o "$part" -w '%{http_code}' "$url") || status=$?
  if [ "$status" -eq 33 ] || [ "$code" = 416 ]; then
    echo "  cannot resume (curl exit $status, HTTP $code); downloading $url from the start" >&2
    rm -f "$part"
    status=0
    curl -fL --retry 3 --connect-timeout 20 "${CURL_OUTPUT[@]}" -o "$part" "$url" || status=$?
  fi
  return "$status"
}

download() {
  local name="$1" sha target part url resumed=0 status=0
  sha=$(expected_sha "$name")
  target="$DIR/$name"
  part="$target.part"
  url="$BASE_URL/$name"

  if [ -f "$target" ]; then
    if verifies "$target" "$sha"; then
      echo "$target: present, checksum verified"
      return 0
    fi
    echo "$target: checksum does not match; downloading it again" >&2
  fi

  # A .part may be complete already (interrupted before the rename).
  if [ -s "$part" ]; then
    if verifies "$part" "$sha"; then
      mv -f "$part" "$target"
      echo "$target: completed from $part, checksum verified"
      return 0
    fi
    resumed=1
    echo "$target: resuming $part ($(stat -c %s "$part") bytes)"
  else
    echo "$target: downloading $url"
  fi

  fetch "$url" "$part" || status=$?
  if [ "$status" -ne 0 ]; then
    if [ -s "$part" ]; then
      die "downloading $url failed (curl exit $status); run again to resume from $part"
    fi
    rm -f "$part"  # nothing was received (an HTTP error, no connection)
    die "downloading $url failed (curl exit $status)"
  fi
  if ! verifies "$part" "$sha"; then
    rm -f "$part"
    if [ "$resumed" -eq 1 ]; then
      # The kept prefix may itself have been corrupt: one fresh attempt.
      echo "$target: resumed download does not verify; downloading from the start" >&2
      fetch "$url" "$part" || die "downloading $url failed (curl exit $?); run again to resume from $part"
      if ! verifies "$part" "$sha"; then
        rm -f "$part"
        die "$url does not match SHA-256 $sha; the download was deleted"
      fi
    else
      die "$url does not match SHA-256 $sha; the download was deleted"
    fi
  fi
  mv -f "$part" "$target"
  echo "$target: downloaded, checksum verified"
}

for name in "${FILES[@]}"; do
  download "$name"
done
echo "GPT-2 files are in $DIR"
