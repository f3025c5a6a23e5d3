#!/usr/bin/env bash
# The grader on a CUDA machine, run from the repository root, in under 8 minutes:
#   1. the GPU cases of the hack corpus, `pytest -m gpu tests/test_grade_gpu.py` (PYTEST_FILES: others beside it, the
#      agent's CUDA extension in tests/test_agent_gpu.py): work left on a side stream (before
#      and after the timed calls), a patched CUDA event timer (static scan, and the run-time guard alone), and the
#      CPU corpus again on the device; and, by default beside them, tests/test_gpu_memory.py's check that a worker
#      gives its cached GPU blocks back when the device runs short;
#   2. the reference solution (the task's own code as ModelNew) of N tasks of DATASET, drawn at random, graded as a
#      folder of solutions (`opgen grade --solutions`): the median speed-up against eager (about 1: the grader times
#      solution and baseline alike), the median of the row's recorded eager time over the solution's (rows timed on
#      this GPU model), and seconds per graded task.
# DATASET: a published folder or a JSONL file of records (id, code); default data/opgen-ops-6k when present, else
# KernelBench levels 1-2 from .devdata/problems.jsonl (scripts/gpu/prepare.sh), else N+20 sampled gpu-profile tasks.
# Packages the image lacks travel as wheels in .whl/ (scripts/gpu/env.sh): pytest's for step 1, datasets' for a folder.
#   3. (STEPS=throughput) solutions graded per minute per GPU (scripts/bench/grading_throughput.py): 8 solutions for
#      each of 25 tasks of DATASET with the reference's timing reused, then 4 tasks x 2 without.
#   confine: CUDA in a confined worker, for the whole confinement and for each of its pieces alone, and each door
#      tried from there (scripts/gpu/confinement_probe.py), into confinement.txt and .json.
# Figures into $OUT: grade_summary.txt and .json, grades.jsonl, pytest_gpu.txt (and figures.jsonl: what the GPU tests
# measured, tests/conftest.py), throughput.jsonl, machine.txt.
#   OUT=$OUT [DATASET=...] [N=100] [WORKERS=12] [STEPS="pytest reference throughput"] bash scripts/gpu/grade.sh
# Each step stops at its own limit (PYTEST_S, then the rest of DEADLINE seconds); a reference run cut short is
# summarised over the tasks it graded.
set -u
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/opgen-grade}; N=${N:-100}; WORKERS=${WORKERS:-12}; STEPS=${STEPS:-pytest reference}; PYTEST_S=${PYTEST_S:-200}
PYTEST_FILES=${PYTEST_FILES:-tests/test_grade_gpu.py tests/test_gpu_memory.py}
DEADLINE=${DEADLINE:-460}; WORK=${WORK:-/tmp/opgen-grade-work}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/opgen-inductor-grade}
mkdir -p "$OUT" "$WORK"
source scripts/gpu/env.sh
machine_facts "$OUT/machine.txt" > /dev/null
say() { echo "$@" | tee -a "$OUT/grade_summary.txt"; }
left() { local rest=$((DEADLINE - SECONDS)); echo $((rest > 10 ? rest : 10)); }

tasks() {  # the dataset to grade: DATASET, the committed one, KernelBench levels 1-2, or sampled candidates
  if [ -n "${DATASET:-}" ]; then echo "$DATASET"; return; fi
  if [ -f data/opgen-ops-6k/README.md ]; then echo data/opgen-ops-6k; return; fi
  if [ -f .devdata/problems.jsonl ]; then
    python3 -c "
import json, sys
with open(sys.argv[2], 'w') as out:
    for r in map(json.loads, open(sys.argv[1])):
        if r['level'] in (1, 2):
            out.write(json.dumps({'id': f\"kb-{r['level']}-{r['problem_id']}\", 'code': r['code']}) + '\n')
" .devdata/problems.jsonl "$WORK/kernelbench.jsonl" && echo "$WORK/kernelbench.jsonl"; return
  fi
  python3 -m opgen sample --n $((N + 20)) --seed 0 --profile gpu --out "$WORK/sampled.jsonl" > /dev/null 2>&1
  echo "$WORK/sampled.jsonl"
}

for step in $STEPS; do
  say "== $step (t=${SECONDS}s)"
  case $step in
    confine)  # CUDA in a confined worker, piece by piece, and each door tried from there (one JSON line a variant)
      timeout "$(left)" python3 -m scripts.gpu.confinement_probe --device cuda --out "$OUT/confinement.json" \
        > "$OUT/confinement.txt" 2>&1
      say "confinement probe rc=$?: $(tail -n 1 "$OUT/confinement.txt")" ;;
    pytest)
      if python3 -c "import pytest" 2> /dev/null; then
        # shellcheck disable=SC2086
        OPGEN_TEST_FIGURES="$OUT/figures.jsonl" timeout "$(( $(left) < PYTEST_S ? $(left) : PYTEST_S ))" \
          python3 -m pytest -q -m gpu $PYTEST_FILES \
          -p no:cacheprovider -ra \
          > "$OUT/pytest_gpu.txt" 2>&1
        say "pytest rc=$? ($(tail -n 1 "$OUT/pytest_gpu.txt"))"
      else
        say "pytest is not installed here: put its wheels in .whl/ (scripts/gpu/prepare.sh)"
      fi ;;
    reference)
      data=$(tasks); say "dataset: $data, $N reference solutions"
      rm -rf "$WORK/solutions" "$OUT/grades.jsonl"
      python3 scripts/gpu/reference_solutions.py "$data" "$WORK/solutions" --n "$N" | tee -a "$OUT/grade_summary.txt"
      start=$SECONDS
      timeout "$(left)" python3 -m opgen grade --dataset "$data" --solutions "$WORK/solutions" --device cuda \
        --workers "$WORKERS" --out "$OUT/grades.jsonl" --no-progress > "$WORK/grade.out" 2> "$WORK/grade.err"
      rc=$?; wall=$((SECONDS - start))
      say "grade rc=$rc wall ${wall} s"; tail -n 3 "$WORK/grade.err" >> "$OUT/grade_summary.txt"
      python3 - "$OUT/grades.jsonl" "$(ls "$WORK/solutions" | wc -l)" "$wall" "$OUT/grade_summary.json" <<'PY' | tee -a "$OUT/grade_summary.txt"
import json, statistics, sys
from opgen.grading.summary import summarize_grades, summary_text
path, attempted, wall, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
lines = [json.loads(line) for line in open(path) if line.strip()]
figures = summarize_grades(lines, attempted)   # over the tasks given a solution: the ones cut off count as not graded
figures.update(graded_now=len(lines), wall_s=wall, seconds_per_task=wall / len(lines) if lines else None)
recorded = [line["recorded_eager_ms"] / line["solution_ms"] for line in lines
            if line.get("correct") and line.get("recorded_eager_ms") and line.get("solution_ms")
            and line.get("recorded_hardware") == line.get("hardware")]
figures["recorded_eager_over_solution"] = {"tasks": len(recorded),
                                           "median": statistics.median(recorded) if recorded else None}
print(summary_text(figures))
print("recorded eager time / solution time (rows timed on this GPU model):", figures["recorded_eager_over_solution"])
failed = [(line["task"], line["reason"], (line.get("detail") or "")[:160]) for line in lines if not line["correct"]]
for task, reason, detail in failed[:15]:
    print(f"  {task}: {reason}: {detail}")
json.dump(figures, open(out, "w"), indent=1)
PY
      ;;
    throughput)  # solutions graded per minute per GPU: TP_SOLUTIONS for each of TP_TASKS tasks of the dataset with the
      # reference's timing reused within the run, then (the before) TP_BEFORE tasks x 2 without, each in a process and
      # compile cache of its own; the figures so far after every TP_WAVE tasks (default 5), and each pool's start-up
      # seconds on stderr (into the summary), so a step cut short by DEADLINE still says what it measured
      data=$(tasks)
      timeout "$(left)" python3 scripts/bench/grading_throughput.py --device cuda --dataset "$data" --reuse-only \
        --tasks "${TP_TASKS:-25}" --solutions "${TP_SOLUTIONS:-8}" --wave-tasks "${TP_WAVE:-5}" > "$OUT/throughput.jsonl" 2> "$WORK/throughput.err"
      say "throughput with reuse rc=$?: $(cat "$OUT/throughput.jsonl")"; tail -n 3 "$WORK/throughput.err" >> "$OUT/grade_summary.txt"
      timeout "$(left)" python3 scripts/bench/grading_throughput.py --device cuda --dataset "$data" --no-reuse \
        --tasks "${TP_BEFORE:-4}" --solutions 2 > "$WORK/before.jsonl" 2> "$WORK/throughput_before.err"
      say "throughput without reuse rc=$?: $(cat "$WORK/before.jsonl")"; cat "$WORK/before.jsonl" >> "$OUT/throughput.jsonl"
      ;;
  esac
done
say "done (t=${SECONDS}s)"
