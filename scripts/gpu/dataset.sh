#!/usr/bin/env bash
# One call of a long dataset build on a lent GPU machine that may be fresh and may be stopped at any moment. Run
# from the repository root, carrying .devdata .whl; the build's state travels committed, in builds/$NAME/. After
# every call, before the next (a machine the lender did not keep resumes what the working tree carries), on the
# machine that holds the repository: python scripts/gpu/keep_state.py FILES_AT --name $NAME (it copies the state,
# one file with FILE.*.N parts past 16 MiB, unless it is older than the one there), then commit it. The build
# command is the README's, with no tuning flags.
#
#   MODE=once (default): restore the carried state, build in the foreground until BUILD_S seconds, leave the state in
#     $OUT. For machines that keep nothing between calls.
#       OUT=$OUT N=6000 NAME=opgen-ops-6k BUILD_S=540 bash scripts/gpu/dataset.sh
#   MODE=hold: one build runs in the background across calls on a machine held warm (the next call made within its
#     idle time): start it if none runs here (restoring the carried state), wait up to WAIT_S seconds, copy its latest
#     whole state into $OUT. No machine start-up or first task paid again per call.
#       OUT=$OUT MODE=hold WAIT_S=560 bash scripts/gpu/dataset.sh
#     Beside it, scripts/gpu/memory_sampler.py samples the sandbox workers' host and GPU memory every 5 s: each
#     call brings the samples back as $OUT/memory.jsonl.gz.
#   MODE=stop: end the background build (SIGTERM: it saves its state on the way out) and copy the state. A later
#     MODE=hold only copies that state again; MODE=restart starts the build again.
#   MODE=restart: end it the same way and start it again here (with this call's BUILD_FLAGS), resuming from its run
#     folder; then as MODE=hold. Two splits of the cores compared on one machine, one after the other; or, with
#     OPGEN_GPU_CACHE_RELEASE_SHARE=0 in this call's environment (the build and its workers inherit it), the check
#     workers keeping their GPU cache through a check's holds, against the default (opgen/sandbox/gpu_memory.py).
#     Or OPGEN_GPU_SHARED_SLOTS=K: at most K shared holders of the GPU's lock at once (opgen/sandbox/gpus.py).
#   MODE=agree: end it the same way, time AGREE_N of its timed tasks drawn at random with the independent one-process
#     timer (scripts/analysis/agreement.py, nothing else on the GPU) into $OUT/agreement.json, then start it again
#     here and wait as MODE=hold (WAIT_S counts from the restart).
#
# Whichever call finds the build complete publishes it and leaves the folder as $OUT/$NAME.tar.gz. DTYPE=bf16 or fp16
# builds in that precision (give it its own NAME). BUILD_FLAGS adds options to the build (for example
# BUILD_FLAGS="--workers 10 --timing-workers 6" to compare a split of the cores with the defaults; a build started
# in the background keeps the flags it started with until MODE=stop).
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
# the quiet pass (opgen/pipeline/quiet_pass.py): launch-bound rows timed again with nothing else running
export OPGEN_QUIET_PASS=${OPGEN_QUIET_PASS:-1}
OUT=${OUT:-/tmp/opgen-device}; N=${N:-6000}; SEED=${SEED:-0}; NAME=${NAME:-opgen-ops-6k}; BUILD_S=${BUILD_S:-540}
MODE=${MODE:-once}; WAIT_S=${WAIT_S:-560}; DEVICE=${DEVICE:-cuda}; PROFILE=${PROFILE:-gpu}; DTYPE=${DTYPE:-fp32}
RUN=${RUN:-data/$NAME-run}; STATE=${STATE:-builds/$NAME/$NAME.state}   # the committed state a fresh machine resumes
HOLD=/tmp/opgen-hold-$NAME          # the background build's state file, log, pid and exit status
mkdir -p "$OUT" "$HOLD"
source scripts/gpu/env.sh
[ "$DEVICE" = cuda ] && machine_facts "$OUT/machine.txt" > /dev/null

build_args() {  # the README's command; $1: the state file it saves
  local resume=()
  [ -f "$STATE" ] && resume=(--resume-from "$STATE")
  echo --n "$N" --seed "$SEED" --out "$RUN" --device "$DEVICE" --profile "$PROFILE" \
    --reference .devdata/problems.jsonl --dtype "$DTYPE" --no-progress --save-state "$1" "${resume[@]}" ${BUILD_FLAGS:-}
}

copy_state() {  # $1: the state file; its latest whole save into $OUT (a save under way: copy again)
  for _ in 1 2 3 4 5 6; do
    rm -f "$OUT/$NAME".state*
    cp "$1" "$OUT/$NAME.state" 2>/dev/null && cp "$1".*.* "$OUT/" 2>/dev/null
    python3 -c "import sys; from opgen.pipeline.state import read_state; read_state(sys.argv[1])" \
      "$OUT/$NAME.state" 2>/dev/null && return 0
    sleep 2
  done
  echo "no whole state could be copied from $1"
  return 1
}

publish_if_complete() {  # $1: the build's exit status
  # The published folder comes back as $NAME.tar.gz (split into $NAME.tar.gz.part-NN of 15 MiB past that size:
  # cat $NAME.tar.gz.part-* | tar -xz), the run log, publish log, stats, memory samples and machine facts as
  # $NAME-build.tar.gz:
  # a call returns at most 8 files of at most 16 MiB.
  if [ "$1" -eq 0 ] && [ -f "$RUN/tasks.parquet" ]; then
    local logs="/tmp/$NAME-build"
    rm -rf "/tmp/$NAME" "$logs" && mkdir -p "$logs"
    python3 -m opgen publish "$RUN" --repo-id "opgen/$NAME" --dry-run --out "/tmp/$NAME" > "$logs/publish.log" 2>&1
    local published=$?
    tail -n 5 "$logs/publish.log"
    cp "$RUN/stats.json" "$logs/"; mv "$OUT/run.log" "$OUT/machine.txt" "$OUT/memory.jsonl.gz" "$logs/" 2>/dev/null
    tar -czf "$OUT/$NAME-build.tar.gz" -C /tmp "$NAME-build"
    [ "$published" -eq 0 ] || { echo "publish failed: see publish.log in $NAME-build.tar.gz"; return 1; }
    tar -czf "$OUT/$NAME.tar.gz" -C /tmp "$NAME"
    if [ "$(stat -c %s "$OUT/$NAME.tar.gz")" -gt $((15 << 20)) ]; then
      split -b 15M -d "$OUT/$NAME.tar.gz" "$OUT/$NAME.tar.gz.part-" && rm "$OUT/$NAME.tar.gz"
    fi
    ls -l "$OUT"
  fi
}

running() { [ -f "$HOLD/pid" ] && kill -0 "$(cat "$HOLD/pid")" 2>/dev/null; }

case "$MODE" in
  once)
    # shellcheck disable=SC2046
    timeout -s TERM "$BUILD_S" python3 -m opgen build $(build_args "$OUT/$NAME.state") > "$OUT/build.log" 2>&1
    status=$?
    tail -n 30 "$OUT/build.log"
    cp "$RUN/logs/build.log" "$OUT/run.log" 2>/dev/null
    publish_if_complete "$status"
    ;;
  hold|stop|restart|agree)
    if [ "$MODE" != hold ] && running; then   # SIGTERM: the build saves its state on the way out
      pkill -TERM -f "^python3 -m opgen build .*--save-state $HOLD/$NAME.state"
      deadline=$((SECONDS + 120))
      while running && [ "$SECONDS" -lt "$deadline" ]; do sleep 2; done
    fi
    if [ "$MODE" = agree ]; then
      running && { echo "the build did not stop in 120 s"; exit 2; }
      python3 scripts/analysis/agreement.py "$RUN" "$OUT/agreement.json" --sample "${AGREE_N:-150}" --seed 0 \
        > "$OUT/agreement.txt" 2>&1
      echo "agreement rc=$?"; tail -n 40 "$OUT/agreement.txt"
    fi
    if [ "$MODE" = restart ] || [ "$MODE" = agree ]; then
      running && { echo "the build did not stop in 120 s"; exit 2; }
      rm -f "$HOLD/exit" "$HOLD/pid"; MODE=hold
    fi
    if [ "$MODE" = hold ] && ! running && [ ! -f "$HOLD/exit" ]; then
      if other=$(pgrep -af "^python3 -m opgen build"); then   # two builds would time on one GPU at once
        echo "another build runs here, not starting $NAME: $other"; exit 2
      fi
      echo "starting the build in the background"
      # shellcheck disable=SC2046
      setsid nohup bash -c "python3 -m opgen build $(build_args "$HOLD/$NAME.state") > '$HOLD/build.log' 2>&1;
                            echo \$? > '$HOLD/exit'" > /dev/null 2>&1 &
      echo $! > "$HOLD/pid"
      pkill -f "scripts/gpu/memory_sampler.py $HOLD/" ; rm -f "$HOLD/memory.jsonl"
      setsid nohup python3 scripts/gpu/memory_sampler.py "$HOLD/memory.jsonl" > /dev/null 2>&1 &
    fi
    [ "$MODE" = stop ] && WAIT_S=0
    deadline=$((SECONDS + WAIT_S))
    while running && [ ! -f "$HOLD/exit" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 5; done
    tail -n 12 "$HOLD/build.log"
    cp "$HOLD/build.log" "$OUT/build.log"; cp "$RUN/logs/build.log" "$OUT/run.log" 2>/dev/null
    copy_state "$HOLD/$NAME.state"
    status=$(cat "$HOLD/exit" 2>/dev/null || echo running)
    [ "$status" != running ] && pkill -f "scripts/gpu/memory_sampler.py $HOLD/"
    [ -f "$HOLD/memory.jsonl" ] && gzip -c "$HOLD/memory.jsonl" > "$OUT/memory.jsonl.gz"
    echo "build: $status"
    [ "$status" != running ] && publish_if_complete "$status"
    ;;
  *) echo "MODE must be once, hold, stop, restart or agree, not $MODE"; exit 2 ;;
esac
[ "$MODE" = once ] && echo "build exit $status"
echo "state: $(ls -l "$OUT/$NAME".state* 2>/dev/null | awk '{s += $5} END {print s}') bytes"
cache=/tmp/opgen-inductor-cache   # what a fresh machine lacks: the compiles of the checks done here (not carried)
[ -d "$cache" ] && echo "inductor cache: $(du -sm "$cache" | cut -f1) MB, $(find "$cache" -path '*fxgraph*' -type f | wc -l) FX graph files"
