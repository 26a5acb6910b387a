#!/usr/bin/env bash
# Fine-tunes a GPT-2 data-parallel on the machines of a hostfile (deploy/mpi/README.md). Start it
# on the hostfile's first machine: rank 0 runs there and alone writes OUT.
#   deploy/mpi/train.sh                                  # the settings below
#   RANKS=4 HOSTFILE=~/hosts deploy/mpi/train.sh --warmup 100 --schedule cosine
# Each setting can be given in the environment; extra arguments go to `kael finetune` (not the
# options this script sets: kael refuses an option given twice). Started again, it continues the
# run in OUT (--resume), e.g. after a rank died.
set -euo pipefail

# One line a machine, slots=<ranks there> (hostfile.example); RANKS, the slots added up.
HOSTFILE="${HOSTFILE:-$(dirname "$0")/hostfile}"
RANKS="${RANKS:-2}"
# kael's threads in each rank; 0: the machine's physical cores divided by the ranks on it.
THREADS_PER_RANK="${THREADS_PER_RANK:-0}"
# The same kael build, checkpoint and text at these paths on every machine; absolute, since a
# remote rank may start in another directory.
KAEL="${KAEL:-/usr/local/bin/kael}"
MODEL="${MODEL:-/var/lib/kael/gpt2}"
DATA="${DATA:-/var/lib/kael/text}"
OUT="${OUT:-/var/lib/kael/runs/gpt2-finetuned}"   # on this machine only
# --batch is per rank: the run's batch is BATCH x RANKS, and a resumed run must keep that product.
BATCH="${BATCH:-4}"
SEQ="${SEQ:-256}"
STEPS="${STEPS:-1000}"
LR="${LR:-1e-4}"
SAVE_EVERY="${SAVE_EVERY:-100}"   # a rank that dies costs at most this many steps
# Ctrl-C on mpirun reaches every rank as SIGTERM, and Open MPI sends SIGKILL this many seconds
# later (1 by default): long enough for the step in flight and rank 0's save.
STOP_GRACE_S="${STOP_GRACE_S:-120}"
# Machines with different CPUs need one kernel set (avx2, avx512, amx), so that every rank's
# AdamW step rounds alike; empty: each machine's best.
export KAEL_ISA="${KAEL_ISA:-}"
# More mpirun options, e.g. "--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0" to
# choose the network, or "--allow-run-as-root".
read -r -a mpirun_options <<< "${MPIRUN_OPTIONS:-}"

resume=()
if [[ -f "$OUT/training_state.json" ]]; then
  resume=(--resume)
fi

# --bind-to none: Open MPI would otherwise bind each rank to one core (two ranks or fewer) or one
# socket, and all of a rank's threads would share it.
exec mpirun --hostfile "$HOSTFILE" -np "$RANKS" --bind-to none \
  --mca odls_base_sigkill_timeout "$STOP_GRACE_S" -x KAEL_ISA "${mpirun_options[@]}" \
  "$KAEL" finetune --model "$MODEL" --data "$DATA" --out "$OUT" \
  --batch "$BATCH" --seq "$SEQ" --steps "$STEPS" --lr "$LR" --save-every "$SAVE_EVERY" \
  --threads "$THREADS_PER_RANK" "${resume[@]}" "$@"
