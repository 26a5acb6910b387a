#!/usr/bin/env bash
# Usage: fuzz/run.sh FUZZER_BINARY SECONDS
# Runs a libFuzzer binary fuzz_NAME for SECONDS on a copy of its checked-in seed corpus,
# fuzz/corpus/NAME (the corpus in the tree never changes), with the dictionary fuzz/NAME.dict. Exits non-zero when the fuzzer finds a crash, a sanitizer report,
# a leak, a timeout or runaway memory; the reproducer is kept and its path printed. Reproduce
# with: FUZZER_BINARY path/to/crash-file
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 FUZZER_BINARY SECONDS" >&2
  exit 2
fi
binary=$1
seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kael-fuzz.XXXXXX")
artifacts=${KAEL_FUZZ_ARTIFACTS:-$work/artifacts}
name=$(basename "$binary")
name=${name#fuzz_}
mkdir -p "$work/corpus" "$artifacts"
cp "$here/corpus/$name"/* "$work/corpus/"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$binary" "$work/corpus" -dict="$here/$name.dict" -seed=1 -max_total_time="$seconds" \
  -rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=10 -max_len=16384 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED with exit status $status; reproducer(s) in $artifacts:" >&2
  ls -l "$artifacts" >&2
  exit "$status"
fi
rm -rf "$work"
echo "fuzz: $binary ran ${seconds}s with no crash"
