#!/usr/bin/env bash
# The GPU checks, the one entry point on a CUDA machine (run from the repository root): each step chosen by STEPS
# (space-separated) runs under its own time limit, so that one slow step costs only the steps after it. Sets up its
# environment itself (scripts/gpu/env.sh: the carried wheels, the machine's facts into $OUT/summary.txt).
#   build       `opgen build --n N` (streaming, adaptive, survival planning), resumable under BUILD_S; then the
#               independent agreement script over its first 100 tasks, `opgen publish --dry-run`, `opgen retime`
#               of RETIME_N tasks of the published folder (loaded back as its config), the family figures
#   agree       the agreement script alone, over AGREE_FROM (a run folder left by an earlier call on this machine,
#               default .devdata/agree.parquet: timed tasks of an earlier, unfinished build)
#   oldnew      the same seed and N_OLD in the new mode, then the old mode (--no-stream --trial-mode fixed
#               --planning rounds), one after the other; scripts/analysis/compare_builds.py on the two
#   new, oldstart, oldwait   the same over several calls: `new` builds the new mode; `oldstart` starts the old
#               mode in its own process session, so it runs on between calls while the machine is held; `oldwait`
#               (in this call or a later one) waits for it until the deadline, then compares the two. OLD_TREE: a
#               carried copy of older code whose own build command runs instead (8 workers, shards of 32), e.g. the
#               code before the streaming build (`git archive c9fe9ea`). An old build longer than one call's limit:
#               carry data/device/old$N_OLD (unpacked from the last `old_partial.tar.gz`) and data/device/new$N_OLD,
#               and start it with OLD_RESUME=1 (its wall_s adds up every invocation)
#   kb          KernelBench level 2 timed with adaptive trials (runs KB_RUNS, default "1 2": a later call can take run 2
#               on a warm machine; KB_ARGS: more `opgen time` options), and KB_FIXED problems with 100 fixed
#               trials (0: none); then the runs compared (scripts/analysis/compare_timings.py) and the first run's
#               method agreement and ranks against KernelBench's published H100 times (scripts/bench/timing.py report)
#   kbvalidate  `opgen validate --device cuda` of the KernelBench level-2 problems at their real sizes, workers spread
#               over the visible GPUs: which reference tasks the execute checks reject, and why
#   calibrate   eager time of the 200 gpu-profile candidates of .devdata/gpu200.jsonl against the sampler's roofline
#               estimate, one process per GPU (scripts/gpu/calibrate.py), and its summary
#   resume      the build of `build`, killed (SIGKILL) every RESUME_SLICE seconds (default 120) and started again
#               until done: per invocation, the stage markers before and after, and those written twice
#   mixuniform  `opgen validate --device cuda` (default window) of .devdata/mixuniform.jsonl: gpu candidates of
#               --composition mix and uniform, interleaved, deduped here (scripts/gpu/prepare.sh); then
#               scripts/analysis/survival_by_rule.py: survival and window share per rule
# Inputs (git-ignored, carried): .whl/ and .devdata/ (made here by scripts/gpu/prepare.sh); a carried data/device/
# resumes. Every step also stops at DEADLINE seconds after the script started (the call's limit, less a margin).
# Usage there: OUT=$OUT STEPS="build" bash scripts/gpu/checks.sh
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/opgen-device}; STEPS=${STEPS:-build}; N=${N:-300}; N_OLD=${N_OLD:-30}; KB_FIXED=${KB_FIXED:-30}
BUILD_S=${BUILD_S:-400}; OLD_S=${OLD_S:-200}; NEW_S=${NEW_S:-100}; KB_S=${KB_S:-110}; KB_FIXED_S=${KB_FIXED_S:-70}
AGREE_S=${AGREE_S:-70}; RETIME_N=${RETIME_N:-6}; RETIME_S=${RETIME_S:-80}; MIXUNIFORM_S=${MIXUNIFORM_S:-280}; WORK=data/device
DEADLINE=${DEADLINE:-575}
left() {  # left SECONDS: the smaller of SECONDS and the time to the deadline (at least 1)
  local rest=$((DEADLINE - SECONDS)); [ "$rest" -lt "$1" ] && echo $((rest > 1 ? rest : 1)) || echo "$1"
}
mkdir -p "$OUT" "$WORK"
LOGS=$(mktemp -d)
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/opgen-inductor}
trap 'for f in "$LOGS"/*; do echo "### $f"; tail -c 30000 "$f"; done > "$OUT/logs.txt"' EXIT
source scripts/gpu/env.sh
machine_facts "$OUT/summary.txt"
KB=.devdata/problems.jsonl
BUILD_ARGS=(--device cuda --profile gpu --workers "${WORKERS:-12}" --timing-workers "${TIMING_WORKERS:-4}"
            --shard-size "${SHARD_SIZE:-16}" --memory-mb 14000 --timeout 300 --no-progress --reference "$KB")
say() { echo "$@" | tee -a "$OUT/summary.txt"; }
progress() {  # progress RUN_DIR: the rounds and the last timed shards from the build's own log
  grep -E "round [0-9]+:|tasks/min|GPU busy|done:" "$1/logs/build.log" 2>/dev/null | tail -n 8 | cut -c1-400 \
    | tee -a "$OUT/summary.txt"
}
build() {  # build NAME N SECONDS EXTRA...: one build, its figures into the summary
  local name=$1 n=$2 seconds=$3; shift 3
  local start=$SECONDS
  # each build compiles into a cache of its own: a later build must not find an earlier one's kernels
  TORCHINDUCTOR_CACHE_DIR="/tmp/opgen-inductor-$name" timeout "$(left "$seconds")" python3 -m opgen build \
    --n "$n" --seed 0 --out "$WORK/$name" "${BUILD_ARGS[@]}" "$@" > "$LOGS/$name.out" 2> "$LOGS/$name.err"
  say "build $name rc=$? wall $((SECONDS - start)) s"; tail -n 4 "$LOGS/$name.out" | tee -a "$OUT/summary.txt"
  progress "$WORK/$name"
  cp "$WORK/$name/logs/build.log" "$OUT/build_$name.log" 2>/dev/null
  [ -f "$WORK/$name/stats.json" ] && cp "$WORK/$name/stats.json" "$OUT/stats_$name.json"
}
kb_inputs() {
  [ -f .devdata/kb_level2.jsonl ] || python3 -c "
import json
with open('.devdata/kb_level2.jsonl', 'w') as out:
    for r in map(json.loads, open('.devdata/problems.jsonl')):
        if r['level'] == 2:
            out.write(json.dumps({'id': f\"kb-2-{r['problem_id']}\", 'source': r['name'], 'code': r['code']}) + '\n')
"
}
kb_fixed() {  # KB_FIXED problems with 100 fixed trials (0: none)
  [ "$KB_FIXED" -gt 0 ] || return 0
  local start=$SECONDS
  timeout "$(left "$KB_FIXED_S")" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda \
    --out "$WORK/kb_fixed.jsonl" --trial-mode fixed --limit "$KB_FIXED" --no-progress 2> "$LOGS/kbfixed.log"
  say "kb fixed rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/kbfixed.log" | tee -a "$OUT/summary.txt"
}

for step in $STEPS; do
  say "== $step (t=${SECONDS}s)"
  case $step in
    build)  # the agreement runs over the build's tasks, or (cut short) over its timed survivors so far
      build "gpu$N" "$N" "$BUILD_S"
      tar czf "$OUT/run$N.tar.gz" -C "$WORK" "gpu$N" 2>/dev/null
      timeout "$(left $((AGREE_S + 20)))" python3 scripts/analysis/agreement.py "$WORK/gpu$N" "$OUT/agreement.json" \
        --limit 100 --budget-s "$(left "$AGREE_S")" > "$LOGS/agreement.log" 2>&1; tail -n 30 "$LOGS/agreement.log" >> "$OUT/summary.txt"
      if [ -f "$WORK/gpu$N/tasks.parquet" ]; then
        python3 -m opgen publish "$WORK/gpu$N" --repo-id opgen/cuda-ops-h200 --dry-run --out "$WORK/dataset$N" \
          >> "$OUT/summary.txt" 2>&1
        timeout "$(left "$RETIME_S")" python3 -m opgen retime "$WORK/dataset$N" --device cuda --limit "$RETIME_N" --no-progress \
          > "$LOGS/retime.log" 2>&1; say "retime rc=$?"; tail -n 3 "$LOGS/retime.log" >> "$OUT/summary.txt"
        python3 -c "
import datasets, sys
folder = sys.argv[1]
names = datasets.get_dataset_config_names(folder)
print('configs', names)
for name in names:
    print(name, datasets.load_dataset(folder, name, split='train').num_rows)
" "$WORK/dataset$N" >> "$OUT/summary.txt" 2>&1
        python3 scripts/analysis/family_mix.py "$WORK/gpu$N" --reference "$KB" > "$OUT/family_mix.txt" 2>&1
        head -n 8 "$OUT/family_mix.txt" >> "$OUT/summary.txt"
        tar czf "$OUT/dataset$N.tar.gz" -C "$WORK" "dataset$N" 2>/dev/null
      fi ;;
    agree)  # the independent agreement script over AGREE_FROM (timed tasks of an earlier build)
      timeout "$(left $((AGREE_S + 20)))" python3 scripts/analysis/agreement.py "${AGREE_FROM:-.devdata/agree.parquet}" "$OUT/agreement_h200.json" \
        --limit 100 --budget-s "$AGREE_S" > "$LOGS/agreement.log" 2>&1; tail -n 30 "$LOGS/agreement.log" >> "$OUT/summary.txt" ;;
    oldnew)
      build "new$N_OLD" "$N_OLD" "$NEW_S"
      build "old$N_OLD" "$N_OLD" "$OLD_S" --no-stream --trial-mode fixed --planning rounds
      python3 scripts/analysis/compare_builds.py "$WORK/new$N_OLD" "$WORK/old$N_OLD" > "$OUT/compare_builds.txt" 2>&1
      say "compare_builds rc=$?"; head -n 40 "$OUT/compare_builds.txt" >> "$OUT/summary.txt"
      tar czf "$OUT/oldnew.tar.gz" -C "$WORK" "new$N_OLD" "old$N_OLD" 2>/dev/null ;;
    new) build "new$N_OLD" "$N_OLD" "$NEW_S"; tar czf "$OUT/new$N_OLD.tar.gz" -C "$WORK" "new$N_OLD" 2>/dev/null
      python3 -m opgen profile "$WORK/new$N_OLD" 2>&1 | python3 -c "
import json, sys
figures = json.load(sys.stdin)['execute']
print('execute: worker processes', figures.get('worker_processes'), '| memory_retry', figures.get('memory_retry'),
      '| gpu_peak_mb', figures.get('gpu_peak_mb'), '| out_of_memory', figures.get('out_of_memory'))
" 2>&1 | tee -a "$OUT/summary.txt" ;;
    oldstart)  # setsid: the device tool leaves a new process session running when the call returns;
      # OLD_RESUME=1 keeps a carried run folder (an earlier call's old_partial.tar.gz), so the build resumes
      [ "${OLD_RESUME:-0}" = 1 ] || rm -rf "$WORK/old$N_OLD"
      rm -f /tmp/opgen-old.done; touch /tmp/opgen-old.started
      if [ -n "${OLD_TREE:-}" ]; then  # older code and its own build command (a carried tree)
        # run from a copy: the next call's carry replaces the carried tree under the running build
        rm -rf /tmp/opgen-old-tree && cp -r "$OLD_TREE" /tmp/opgen-old-tree && OLD_TREE=/tmp/opgen-old-tree
        OLD_CMD=(python3 -m opgen build --n "$N_OLD" --seed 0 --out "$PWD/$WORK/old$N_OLD" --device cuda --profile gpu
                 --workers 8 --shard-size 32 --memory-mb 14000 --timeout 300 --no-progress --reference "$PWD/$KB")
      else
        OLD_CMD=(python3 -m opgen build --n "$N_OLD" --seed 0 --out "$WORK/old$N_OLD" "${BUILD_ARGS[@]}" --no-stream
                 --trial-mode fixed --planning rounds)
      fi
      say "old build started in the background in ${OLD_TREE:-.}: ${OLD_CMD[*]}"
      TORCHINDUCTOR_CACHE_DIR="/tmp/opgen-inductor-old$N_OLD" setsid bash -c 'cd "$0" && start=$SECONDS && "$@" \
        > /tmp/opgen-old.out 2> /tmp/opgen-old.err; echo "build old rc=$? wall $((SECONDS - start)) s" > /tmp/opgen-old.done' \
        "${OLD_TREE:-.}" "${OLD_CMD[@]}" < /dev/null > /dev/null 2>&1 & ;;
    oldwait)
      if [ ! -f /tmp/opgen-old.started ]; then  # not waited for: nothing would come
        say "no old build on this machine: a fresh one (the machine that ran it was released)"; continue
      fi
      while [ ! -f /tmp/opgen-old.done ] && [ $((DEADLINE - SECONDS)) -gt 15 ]; do sleep 5; done
      cp /tmp/opgen-old.err "$LOGS/old$N_OLD.err" 2>/dev/null
      if [ -f /tmp/opgen-old.done ]; then
        say "$(cat /tmp/opgen-old.done)"; tail -n 4 /tmp/opgen-old.out | tee -a "$OUT/summary.txt"
        progress "$WORK/old$N_OLD"
        cp "$WORK/old$N_OLD/stats.json" "$OUT/stats_old$N_OLD.json" 2>/dev/null
        python3 scripts/analysis/compare_builds.py "$WORK/new$N_OLD" "$WORK/old$N_OLD" > "$OUT/compare_builds.txt" 2>&1
        say "compare_builds rc=$?"; head -n 40 "$OUT/compare_builds.txt" >> "$OUT/summary.txt"
        tar czf "$OUT/oldnew.tar.gz" -C "$WORK" "new$N_OLD" "old$N_OLD" 2>/dev/null
      else  # what it has done so far comes back, in case the machine does not
        say "old build still running after $(( $(date +%s) - $(stat -c %Y /tmp/opgen-old.started) )) s"
        progress "$WORK/old$N_OLD"
        tar czf "$OUT/old_partial.tar.gz" -C "$WORK" "old$N_OLD" 2>/dev/null
      fi
      cp "$WORK/old$N_OLD/logs/build.log" "$OUT/build_old$N_OLD.log" 2>/dev/null ;;
    kb)  # KB_FIXED_FIRST=1: the fixed-trials run first (it then fills the inductor cache for the adaptive runs)
      kb_inputs
      [ "${KB_FIXED_FIRST:-0}" = 1 ] && kb_fixed
      for run in ${KB_RUNS:-1 2}; do
        start=$SECONDS
        timeout "$(left "$KB_S")" python3 -m opgen time --input .devdata/kb_level2.jsonl --device cuda \
          --out "$WORK/kb_adaptive$run.jsonl" --no-progress ${KB_ARGS:-} 2> "$LOGS/kb$run.log"
        say "kb adaptive run $run rc=$? wall $((SECONDS - start)) s"; grep '^{"time"' "$LOGS/kb$run.log" | tee -a "$OUT/summary.txt"
      done
      [ "${KB_FIXED_FIRST:-0}" = 1 ] || kb_fixed
      [ -f "$WORK/kb_adaptive2.jsonl" ] && python3 scripts/analysis/compare_timings.py "$WORK"/kb_adaptive1.jsonl \
        "$WORK"/kb_adaptive2.jsonl $(ls "$WORK"/kb_fixed.jsonl 2>/dev/null) | tee -a "$OUT/summary.txt"
      [ -f "$WORK/kb_adaptive1.jsonl" ] && python3 scripts/bench/timing.py report --kb-timing .devdata/kb_timing \
        "$WORK"/kb_adaptive1.jsonl > "$OUT/kb_report.json" 2>&1
      tar czf "$OUT/kb.tar.gz" -C "$WORK" kb_adaptive1.jsonl kb_adaptive2.jsonl kb_fixed.jsonl \
        $(cd "$WORK" && ls kb_*.partial 2>/dev/null) 2>/dev/null ;;
    kbvalidate)  # the reference problems through the execute checks, at their real sizes
      kb_inputs; start=$SECONDS; gpus=$(nvidia-smi -L | wc -l)
      timeout "$(left "${KBVALIDATE_S:-180}")" python3 -m opgen validate --input .devdata/kb_level2.jsonl --device cuda \
        --out "$WORK/kb_level2_verdicts.jsonl" --workers "${KBVALIDATE_WORKERS:-$((8 * gpus))}" --timeout 180 \
        --memory-mb 16000 --funnel "$OUT/kb_level2_funnel.json" --no-progress > "$LOGS/kbvalidate.log" 2>&1
      say "kbvalidate rc=$? wall $((SECONDS - start)) s"; tail -n 25 "$LOGS/kbvalidate.log" >> "$OUT/summary.txt"
      cp "$WORK/kb_level2_verdicts.jsonl" "$OUT/" 2>/dev/null ;;
    calibrate)  # measured eager time against the sampler's estimate; worker slot g on GPU g
      start=$SECONDS; gpus=$(nvidia-smi -L | wc -l)
      for ((g = 0; g < gpus; g++)); do
        CUDA_VISIBLE_DEVICES=$g timeout "$(left "${CALIBRATE_S:-100}")" python3 scripts/gpu/calibrate.py \
          .devdata/gpu200.jsonl "$LOGS/calibration$g.jsonl" "$g/$gpus" 2> "$LOGS/calibration$g.err" &
      done
      wait
      cat "$LOGS"/calibration*.jsonl > "$OUT/calibration.jsonl"
      say "calibrate wall $((SECONDS - start)) s"
      python3 scripts/gpu/calibrate.py --summary "$OUT/calibration.jsonl" | head -n 40 | tee -a "$OUT/summary.txt" ;;
    resume)  # the build killed (SIGKILL) every RESUME_SLICE seconds and started again until it is done; a stage
      # marker written before a kill and rewritten after it would be work done twice
      name="res$N"; rm -rf "${WORK:?}/$name"; run=0
      while [ ! -f "$WORK/$name/tasks.parquet" ] && [ $((DEADLINE - SECONDS)) -gt 20 ]; do
        run=$((run + 1)); start=$SECONDS
        find "$WORK/$name" -name '*.done' -printf '%p %T@\n' 2>/dev/null | sort > "$LOGS/markers.before"
        TORCHINDUCTOR_CACHE_DIR="/tmp/opgen-inductor-$name" timeout -s KILL "$(left "${RESUME_SLICE:-120}")" \
          python3 -m opgen build --n "$N" --seed 0 --out "$WORK/$name" "${BUILD_ARGS[@]}" > "$LOGS/$name.$run.out" 2>&1
        rc=$?
        find "$WORK/$name" -name '*.done' -printf '%p %T@\n' 2>/dev/null | sort > "$LOGS/markers.after"
        say "invocation $run rc=$rc wall $((SECONDS - start)) s: stage markers $(wc -l < "$LOGS/markers.before") ->" \
          "$(wc -l < "$LOGS/markers.after"), written before and again since: $(join "$LOGS/markers.before" \
          "$LOGS/markers.after" | awk '$2 != $3' | wc -l)"
      done
      grep -E "(starting|resuming) build|round [0-9]+:|done:" "$WORK/$name/logs/build.log" | cut -c1-300 | tee -a "$OUT/summary.txt"
      cp "$WORK/$name/logs/build.log" "$OUT/build_$name.log" 2>/dev/null
      cp "$WORK/$name/logs/clock.json" "$OUT/clock_$name.json" 2>/dev/null
      [ -f "$WORK/$name/stats.json" ] && cp "$WORK/$name/stats.json" "$OUT/stats_$name.json"
      tar czf "$OUT/run_$name.tar.gz" -C "$WORK" "$name" 2>/dev/null ;;
    mixuniform)  # the default 1-100 ms window: survival as a build sees it, and the window share of what ran
      start=$SECONDS
      timeout "$(left "$MIXUNIFORM_S")" python3 -m opgen validate --input .devdata/mixuniform.jsonl --device cuda \
        --workers "${WORKERS:-8}" --timeout 180 --memory-mb 14000 --chunk-size 48 --no-progress \
        --out "$WORK/mixuniform_verdicts.jsonl" > "$LOGS/mixuniform.log" 2>&1
      say "mixuniform rc=$? wall $((SECONDS - start)) s"
      verdicts="$WORK/mixuniform_verdicts.jsonl"; [ -f "$verdicts" ] || verdicts="$verdicts.partial"
      python3 scripts/analysis/survival_by_rule.py "$verdicts" --sampled mix=200 uniform=200 2>&1 | tee -a "$OUT/summary.txt"
      cp "$WORK"/mixuniform_verdicts.jsonl* "$OUT/" 2>/dev/null ;;
  esac
done
say "done (t=${SECONDS}s)"
