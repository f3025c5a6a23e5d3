#!/usr/bin/env bash
# Why CUDA cannot start inside a confined worker, in one call of about two minutes: the confinement probe's variants
# (scripts/gpu/confinement_probe.py) into $OUT/confinement.txt, and beside them the self-confining variants named in
# TRACED run under strace, their failed system calls that could matter (refused, or about the GPU's files) into
# $OUT/trace_<variant>.txt. strace travels as Debian packages in .strace/ (carry it):
#   mkdir -p .strace && cd .strace && apt-get download strace libunwind8
#   OUT=$OUT [TRACED="writes network"] [LIMIT_S=120] bash scripts/gpu/confinement_trace.sh
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore
OUT=${OUT:-/tmp/opgen-confinement}; TRACED=${TRACED:-writes network}; LIMIT_S=${LIMIT_S:-120}
mkdir -p "$OUT" /tmp/strace-root
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r; nproc; } > "$OUT/machine.txt" 2>&1
timeout "$LIMIT_S" python3 -m scripts.gpu.confinement_probe --device cuda --out "$OUT/confinement.json" \
  > "$OUT/confinement.txt" 2>&1 &
for deb in .strace/*.deb; do dpkg -x "$deb" /tmp/strace-root; done
libs=/tmp/strace-root/usr/lib/x86_64-linux-gnu; own=${LD_LIBRARY_PATH:-}
for variant in $TRACED; do
  name=${variant//[^a-z]/_}
  ( LD_LIBRARY_PATH="$libs${own:+:$own}" timeout "$LIMIT_S" /tmp/strace-root/usr/bin/strace -f -Z -qq \
      -E "LD_LIBRARY_PATH=$own" -o "/tmp/trace_$name" \
      python3 -m scripts.gpu.confinement_probe --device cuda --inline "$variant" > "$OUT/inline_$name.txt" 2>&1
    echo "rc=$?" >> "$OUT/inline_$name.txt"
    grep -vE 'ENOENT|EAGAIN|ETIMEDOUT|EINPROGRESS|ECHILD|ENOTTY|ESRCH|EINTR' "/tmp/trace_$name" | tail -n 250 \
      > "$OUT/trace_$name.txt"
    grep -E 'ENOENT' "/tmp/trace_$name" | grep -E 'nvidia|mps|shm|/dev/|/proc/driver|/sys/' | tail -n 80 \
      >> "$OUT/trace_$name.txt" ) &
done
wait
tail -n 1 "$OUT/confinement.txt"
