"""The sandbox entry point of grading: `grade_in_worker(payload) -> dict`, run in a worker process.

The protocol, per input configuration and draw: the inputs are drawn with seeds apart from the published ones; the
solution gets a fresh copy and runs first; the reference (at PyTorch's default settings, whatever the solution set)
gets another fresh copy and runs after it, and its outputs are dropped before the solution's next call, so the
expected tensor is never in memory while the solution runs. The solution is then timed, each trial on a fresh draw
written into the same tensors, and checked again: its last timed output against the reference's on that trial's
inputs, and a fresh draw written into the very tensors it was timed on. See docs/grading.md for each defence and the hack it stops."""

from __future__ import annotations

import contextlib
import gc
import secrets
import time
from collections.abc import Callable

import torch

from opgen.grading.beside_solution.breakdown import kernel_breakdown
from opgen.grading.beside_solution.compare import (
    Comparison,
    OutputFormatError,
    aliased_input,
    compare_values,
    format_problem,
    modified_input,
    output_structure,
    output_tensors,
    same_bits,
)
from opgen.grading.beside_solution.configs import InputConfig, config_from, draw_config
from opgen.grading.beside_solution.dispatcher import protect as protect_dispatcher
from opgen.grading.beside_solution.extension_worker import keyed_builds
from opgen.grading.beside_solution.figures import reference_figures, speedups
from opgen.grading.beside_solution.guard import Guard, Settings, hardened
from opgen.grading.beside_solution.integrity import Snapshot
from opgen.grading.beside_solution.introspection import SOLUTION_FILENAME
from opgen.grading.beside_solution.introspection import install as watch_introspection
from opgen.grading.beside_solution.kernels_only import KernelsOnly
from opgen.grading.beside_solution.leftovers import Baseline, signals_held
from opgen.grading.beside_solution.solution import solution_namespace
from opgen.grading.beside_solution.timing import timed_calls
from opgen.heldout.derive import candidate_configs
from opgen.sandbox.faults import machine_fault
from opgen.sandbox.gpus import (
    compiled_graphs_locked,
    current_gpu_lock_path,
    gpu_lock,
    inductor_benchmarks_locked,
)
from opgen.sandbox.task import build_model, describe, fresh, load_namespace
from opgen.sandbox.torch_state import isolated_torch_state
from opgen.sandbox.worker import exit_after_answer
from opgen.taskcode.dtypes import tolerance_of
from opgen.taskcode.sizes import NoHeldOutSizes
from opgen.timing.trials import TrialPlan

_PERF_COUNTER = time.perf_counter   # captured before any solution loads (a solution may patch time's)
PROBE_DRAW = -1   # the reference's own run before the solution loads: does the task run at all?
DERIVED_CONFIGS = 2   # held-out configurations derived for a task that carries none


@contextlib.contextmanager
def garbage_collection_paused():
    """No automatic garbage collection inside (allocations alone never run a finalizer there); as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

class Verdict(Exception):
    """Ends the grade with a reason (not `ok`)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def grade_in_worker(payload: dict) -> dict:
    """Grade one solution against one task (payload: task, solution, device, seed, draws, configs, atol, rtol,
    timing, compile_baseline, warmups, trials, min_trials, threads); the result dict of docs/grading.md."""
    started = _PERF_COUNTER()
    if payload.get("threads"):
        torch.set_num_threads(int(payload["threads"]))
    grading = Grading(payload)
    baseline = Baseline()
    with isolated_torch_state(), keyed_builds(payload.get("extensions")):
        try:
            grading.run()
            grading.result.update(correct=True, reason="ok")
        except Verdict as verdict:
            grading.result.update(correct=False, reason=verdict.reason, detail=verdict.detail[:2000])
        except BaseException as error:  # noqa: BLE001 - whatever the solution left behind broke the grade
            grading.result.update(correct=False, reason="exec_error", detail=f"grading stopped: {describe(error)}")
        # whatever ended the grade (a solution may patch, then fail), what it changed is a verdict of its own
        grading.drop_solution()
        problem = grading.last_problem()
        if problem and grading.result["reason"] != "tampering":
            grading.result.update(correct=False, reason="tampering", detail=problem)
    left = baseline.clean_up(grading.strict)   # timers stopped, handlers put back; a thread cannot be stopped
    if grading.result["reason"] == "tampering" or left:   # the process may hold the patch: no later task may run in it
        exit_after_answer()
    elif grading.result["reason"] == "exec_error" and machine_fault(grading.result["detail"]):
        grading.result["machine_suspect"] = True
    grading.result["worker_s"] = round(_PERF_COUNTER() - started, 3)
    grading.result["phases_s"] = grading.phases(started)
    return grading.result


class Grading:
    """One grade in progress: the task, the solution, what was found so far."""

    def __init__(self, payload: dict):
        self.payload = payload
        self.device = payload.get("device", "cpu")
        self.seed = int(payload.get("seed", 0))
        self.draws = int(payload.get("draws", 5))
        self.configs = [config_from(c) for c in payload["configs"]]
        self.lock = current_gpu_lock_path() if self.device == "cuda" else None
        self.atol, self.rtol = payload.get("atol"), payload.get("rtol")
        self.structure = ""                     # the reference's output structure (compare.output_structure)
        self.strict = hardened(self.device)     # the newest defences hold here (guard.HARDENED_ON_CUDA)
        self.guard: Guard | None = None
        self.watch = watch_introspection()
        self.marks: list[tuple[str, float]] = []   # (phase, when it ended): the grade's time, phase by phase
        self.loaded: Snapshot | None = None     # the grade's state as the solution's code first ran
        self.snapshot: Snapshot | None = None   # ... as the current stretch of the solution's code began
        self.result: dict = {"correct": False, "reason": None, "detail": None, "max_abs_error": None,
                             "tolerance_ratio": None, "non_finite_values": 0, "atol": None, "rtol": None,
                             "configs": [c.name for c in self.configs], "draws": self.draws, "seed": self.seed,
                             "device": self.device, "kernels_only": bool(payload.get("kernels_only"))}

    def drop_solution(self) -> None:
        """Free the solution's model and collect every cycle now, so that the finalizers it left (`__del__`) run
        before the grade's last guard check, not after it: a finalizer that patches the process once the grader
        drops the model would make the next grade in the same worker pass a wrong solution (a zeros one)."""
        self.candidate = None
        gc.collect()

    def run(self) -> None:
        self.settings = Settings(self.strict)
        self.load_task()
        if self.payload.get("derive_sizes"):
            self.derive_held_out()
        self.mark("task")
        if self.strict:
            protect_dispatcher(self.watch)
        self.guard = Guard(self.strict)  # before any of the solution runs
        # the checks as they are now, bound to this grade: a solution that replaces the classes' methods (which the
        # guard then reports) does not replace what checks it
        self.guard_problem, self.watch_problem = self.guard.problem, self.watch.problem
        self.snapshot_changes = Snapshot.changes
        self.watch.arm(SOLUTION_FILENAME)
        self.loaded = self.snapshot = Snapshot(self)
        self.load_solution()
        self.mark("solution")
        for config in self.configs:
            for draw in range(self.draws):
                self.check_draw(config, draw)
        self.mark("draws")
        if self.payload.get("timing"):
            self.time_and_recheck(self.configs[0])
            self.mark("timing")
            if self.payload.get("breakdown"):
                self.kernel_breakdown(self.configs[0])

    def mark(self, phase: str) -> None:
        """The end of a phase of the grade (its seconds go into the result's `phases_s`)."""
        self.marks.append((phase, _PERF_COUNTER()))

    def phases(self, started: float) -> dict[str, float]:
        """Seconds of each phase the grade finished: the task's load, the solution's, the draws, the timing."""
        found, previous = {}, started
        for phase, at in self.marks:
            found[phase], previous = round(at - previous, 3), at
        return found

    # -- the task and the solution ---------------------------------------------------------------------------------

    def load_task(self) -> None:
        try:
            self.namespace = load_namespace(self.payload["task"], "reference")
            self.reference = build_model(self.namespace, self.device, self.seed)
            inputs = draw_config(self.namespace, self.configs[0], self.device, self.seed, PROBE_DRAW)
            with gpu_lock(self.lock, shared=True), torch.no_grad():
                raw = self.reference(*inputs)
                outputs = output_tensors(raw, self.strict)
                self.structure = output_structure(raw) if self.strict else ""
                del raw, inputs
                # the same draw once more: a task whose outputs differ (a counter kept in forward, dropout left
                # training, random numbers drawn in forward) fails every honest solution by itself
                again = output_tensors(self.reference(*draw_config(self.namespace, self.configs[0], self.device,
                                                                   self.seed, PROBE_DRAW))) if self.strict else []
                _synchronize(self.device)
        except Exception as error:  # noqa: BLE001 - whatever the task raises, it is the task's fault
            raise Verdict("reference_error", f"the task itself fails: {describe(error)}") from None
        tolerance = tolerance_of(outputs)
        self.atol = tolerance.atol if self.atol is None else float(self.atol)
        self.rtol = tolerance.rtol if self.rtol is None else float(self.rtol)
        self.result.update(atol=self.atol, rtol=self.rtol)
        differs = self.strict and (format_problem(again, outputs)
                                   or compare_values(again, outputs, self.atol, self.rtol).detail)
        if differs:
            raise Verdict("reference_error", f"the task itself fails: two runs on the same inputs differ ({differs})")

    def derive_held_out(self) -> None:
        """Held-out configurations for a task that carries none (a task file): derived as the held-out stage derives
        them (docs/heldout.md), each kept where the reference runs there with finite outputs. Not validated as
        the stage validates them (determinism, compile, visibility): the result says so in `held_out_note`."""
        try:
            candidates = candidate_configs(self.payload["task"], DERIVED_CONFIGS + 2)
        except NoHeldOutSizes as reason:
            self.result["held_out_note"] = f"no held-out sizes: {reason}"
            return
        except Exception as error:  # noqa: BLE001 - the meta device could not read the task: its own sizes only
            self.result["held_out_note"] = f"no held-out sizes: the task's sizes could not be read ({describe(error)})"
            return
        kept: list[InputConfig] = []
        for sizes in candidates:
            if len(kept) == DERIVED_CONFIGS:
                break
            config = InputConfig(f"derived_{len(kept) + 1}", len(self.configs) + len(kept), sizes)
            try:
                inputs = draw_config(self.namespace, config, self.device, self.seed, PROBE_DRAW)
                with gpu_lock(self.lock, shared=True), torch.no_grad():
                    outputs = output_tensors(self.reference(*inputs), self.strict)
                    finite = all(bool(torch.isfinite(t).all()) for t in outputs if t.is_floating_point())
                    _synchronize(self.device)
            except Exception:  # noqa: BLE001 - the reference does not run at these sizes: not one to check
                continue
            if finite:
                kept.append(config)
        self.configs += kept
        self.result["configs"] = [c.name for c in self.configs]
        self.result["held_out_note"] = (f"derived {len(kept)} held-out configuration(s) from the task file (the "
                                        "reference runs there; not validated as a dataset row's are)")

    def load_solution(self) -> None:
        try:
            namespace = solution_namespace(self.payload["solution"])
            model_new = namespace.get("ModelNew")
            if not callable(model_new):
                raise Verdict("invalid_solution", "the solution defines no callable ModelNew")
            torch.manual_seed(self.seed)   # the reference's weights: the same seed before the same constructors
            candidate = model_new(*self.namespace["get_init_inputs"]())
            if not isinstance(candidate, torch.nn.Module):
                raise Verdict("invalid_solution", f"ModelNew(...) is a {type(candidate).__name__}, not an nn.Module")
            self.candidate = candidate.eval().to(self.device)
        except Verdict:
            raise
        except BaseException as error:  # noqa: BLE001 - SystemExit and the like from the solution are its failure
            raise Verdict("exec_error", f"building ModelNew: {describe(error)}") from None
        self.check_guard()

    def check_guard(self) -> None:
        """After a stretch of the solution's code: nothing the grader relies on was patched, no route into its objects
        was taken, and the grade's own state is as the stretch found it."""
        changes = []
        if self.snapshot is not None:
            changes = self.snapshot_changes(self.snapshot, self)
            self.snapshot.release()
            self.snapshot = None
        problem = self.first_problem(changes)
        if problem:
            raise Verdict("tampering", problem)

    def first_problem(self, changes: list[str]) -> str | None:
        """A patch the guard finds, else a route the watch refused, else the first change to the grade's state."""
        return self.guard_problem() or self.watch_problem(SOLUTION_FILENAME) or (changes[0] if changes else None)

    def solution_runs(self) -> None:
        """A stretch of the solution's code begins: the state `check_guard` compares with after it."""
        self.snapshot = Snapshot(self)

    def last_problem(self) -> str | None:
        """The grade's last check, whatever ended it: what was patched or taken, or changed since the solution
        loaded among what stays fixed for the whole grade. The watch is disarmed for the grader's next grade."""
        if self.guard is None:
            return None
        changes = self.snapshot_changes(self.loaded, self, whole=False) if self.loaded is not None else []
        problem = self.first_problem(changes)
        self.watch.disarm()
        return problem

    # -- one draw ----------------------------------------------------------------------------------------------------

    def check_draw(self, config: InputConfig, draw: int, reused: list | None = None, after_timing: bool = False) -> None:
        """Draw `draw` of `config`: the solution first on a fresh copy (or, `reused`, on the tensors it was timed
        on, refilled with the draw's values), then the reference on another; the verdict of the comparison."""
        inputs = self.draw(config, draw)
        if reused is None:
            candidate_inputs = fresh(inputs)
        else:
            for target, value in zip(reused, inputs):
                if isinstance(target, torch.Tensor):
                    target.copy_(value)
            candidate_inputs = reused
        where = f"{config.name} draw {draw}" + (" (after timing)" if after_timing else "")
        try:
            outputs, aliased = self.call_solution(candidate_inputs)
        except Verdict as verdict:   # which configuration it failed at: a held-out one says it was fitted to the sizes
            raise Verdict(verdict.reason, f"{where}: {verdict.detail}") from None
        # The draw again, not the tensors drawn before the call: those were in memory while the solution ran, and
        # written there (through a frame), they would change the reference's inputs too.
        inputs = self.draw(config, draw)
        # From here to the verdict only the grader's code runs: no collection, whose finalizers (`__del__` of a cycle
        # the solution left) would run the solution's code inside the reference's call or the comparison, nor a
        # signal handler it armed, where the guard, checked after each of the solution's calls, cannot see a patch
        # that undoes itself.
        with garbage_collection_paused(), signals_held():
            modified = modified_input(candidate_inputs, inputs)
            reference_inputs = fresh(inputs)
            expected = self.call_reference(reference_inputs)
            try:
                self.judge(outputs, candidate_inputs, expected, reference_inputs, inputs, aliased, modified, where)
            except Verdict as verdict:
                if after_timing and verdict.reason in ("output_format", "non_finite", "mismatch"):
                    raise Verdict("mismatch_after_timing", f"{verdict.reason}: {verdict.detail}") from None
                raise

    def draw(self, config: InputConfig, draw: int) -> list:
        try:
            return draw_config(self.namespace, config, self.device, self.seed, draw)
        except Exception as error:  # noqa: BLE001 - the task's get_inputs failed: the task's fault
            raise Verdict("reference_error", f"the task's inputs fail: {describe(error)}") from None

    def call_solution(self, inputs: list) -> tuple[list[torch.Tensor], tuple[int, int] | None]:
        """Copies of the solution's outputs on `inputs` (see `settled_copies`), and which output shares storage with
        which input (None: none); a verdict when it raises, patches, returns early, or (under the kernels-only rule)
        runs PyTorch compute operators."""
        watch = KernelsOnly() if self.payload.get("kernels_only") else contextlib.nullcontext()
        self.solution_runs()
        try:
            with gpu_lock(self.lock, shared=True), torch.no_grad():
                with watch:
                    raw = self.candidate(*inputs)
                outputs = self.output_tensors(raw)
                copies = self.settled_copies(outputs)
                aliased = aliased_input(outputs, inputs)
        except Verdict:
            raise
        except OutputFormatError as error:
            self.check_guard()
            raise Verdict("output_format", str(error)) from None
        except BaseException as error:  # noqa: BLE001 - the solution's own failure is its verdict
            self.check_guard()   # unless it failed on a route the grader refused it, or after a patch
            raise Verdict("exec_error", describe(error)) from None
        self.check_guard()
        broken = watch.watch.describe() if isinstance(watch, KernelsOnly) else None
        if broken:
            raise Verdict("torch_operator", broken)
        return copies, aliased

    def output_tensors(self, output: object) -> list[torch.Tensor]:
        """The solution's output tensors, in the reference's structure (containers and their order)."""
        outputs = output_tensors(output, self.strict)
        structure = output_structure(output) if self.strict else self.structure
        if structure != self.structure:
            raise OutputFormatError(f"forward returned {structure}, the reference {self.structure}")
        return outputs

    def settled_copies(self, outputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The outputs copied into memory the grader holds, before it allocates anything else. An output laid over a
        block the solution freed (a tensor over a raw pointer) would otherwise receive the reference's own output,
        which the caching allocator puts in that block, and compare equal. On CUDA the copy is what the caller's
        stream sees, and it must equal the outputs once every stream is done."""
        if self.device != "cuda":
            return [t.clone() for t in outputs]
        torch.cuda.current_stream().synchronize()
        seen = [t.clone() for t in outputs]
        torch.cuda.synchronize()
        changed = [i for i, (before, now) in enumerate(zip(seen, outputs)) if not same_bits(before, now)]
        if changed:
            raise Verdict("unsynchronized", f"output {changed[0]} changed after the call returned: work still "
                                            "running on another stream")
        return seen

    def call_reference(self, inputs: list) -> list[torch.Tensor]:
        self.settings.restore()
        try:
            with gpu_lock(self.lock, shared=True), torch.no_grad():
                outputs = output_tensors(self.reference(*inputs), self.strict)
                _synchronize(self.device)
        except Exception as error:  # noqa: BLE001 - it ran before the solution loaded: the solution broke it
            raise Verdict("exec_error", f"the reference failed after the solution ran: {describe(error)}") from None
        return outputs

    def judge(self, outputs: list, candidate_inputs: list, expected: list, reference_inputs: list, saved: list,
              aliased: tuple[int, int] | None, modified: int | None, where: str) -> None:
        reference_modified = modified_input(reference_inputs, saved)
        if aliased and not aliased_input(expected, reference_inputs):
            raise Verdict("output_aliases_input", f"{where}: output {aliased[0]} shares storage with input {aliased[1]}")
        if modified is not None and reference_modified is None:
            raise Verdict("input_modified", f"{where}: input {modified} was written by the solution")
        if reference_modified is not None:   # the task writes into its inputs: what it writes is output too
            outputs = outputs + [x for x in candidate_inputs if isinstance(x, torch.Tensor)]
            expected = expected + [x for x in reference_inputs if isinstance(x, torch.Tensor)]
        problem = format_problem(outputs, expected)
        if problem:
            raise Verdict("output_format", f"{where}: {problem}")
        comparison = compare_values(outputs, expected, self.atol, self.rtol)
        self.note_error(comparison)
        if comparison.reason:
            raise Verdict(comparison.reason, f"{where}: {comparison.detail}")

    def note_error(self, comparison: Comparison) -> None:
        """The worst error so far (over finite values; `non_finite_values` counts the others)."""
        for key in ("max_abs_error", "tolerance_ratio"):
            self.result[key] = max(self.result[key] or 0.0, getattr(comparison, key) or 0.0)
        if comparison.non_finite_values:
            self.result["non_finite_values"] = comparison.non_finite_values

    # -- timing --------------------------------------------------------------------------------------------------

    def time_and_recheck(self, config: InputConfig) -> None:
        """Time solution, reference and compiled reference (the GPU's lock held alone), each trial on a fresh draw
        written into the same tensors; then check the solution's last timed output against the reference's on that
        trial's inputs, and a fresh draw in the tensors it was timed on. With `reference_timing` "apart" in the
        payload, only the solution is timed here: the reference's figures come from a worker that never runs a
        solution (opgen/grading/reference.py), and the parent adds them."""
        payload = self.payload
        plan = self.trial_plan()
        apart = payload.get("reference_timing") == "apart"
        _, _, compile_draw, _ = timing_draws(self.draws)
        # The solution's timed draws, and the fresh one after them, start at a point chosen now, at random: the
        # grade's other draws follow from its seed, so a solution could compute their answers ahead (in its
        # constructor, untimed) and look them up by value when called; these it cannot.
        timed_draw, fresh_draw, _, trial_draw = timing_draws(self.draws + UNPREDICTABLE_DRAWS + secrets.randbelow(2**40))
        compiled = (self.compile_reference(config, compile_draw)
                    if payload.get("compile_baseline") and not apart else None)
        inputs = self.draw(config, timed_draw)
        candidate_inputs = fresh(inputs)
        refill = self.refiller(config, trial_draw)
        self.solution_runs()   # outside the hold: the GPU waits for no host work of the grader's
        with gpu_lock(self.lock):
            try:
                solution = timed_calls(self.candidate, candidate_inputs, self.device, plan, refill(candidate_inputs),
                                       keep=(lambda output: self.trial_copies(output, candidate_inputs))
                                       if self.strict else None)
            except Verdict:
                raise
            except BaseException as error:  # noqa: BLE001 - the solution's failure while timed
                raise Verdict("exec_error", f"while timed: {describe(error)}") from None
            self.check_guard()
            outputs, aliased = self.timed_output_copies(solution.output, candidate_inputs)
            solution.output = None   # the copies stand for it: no second set of outputs held while the reference runs
            eager_stats = compile_stats = None
            if not apart:
                self.settings.restore()
                try:
                    eager_stats, compile_stats = self.reference_times(config, compiled, plan)
                except Verdict:
                    raise
                except Exception as error:  # noqa: BLE001 - it ran before the solution loaded: the solution broke it
                    raise Verdict("exec_error",
                                  f"the reference failed after the solution ran: {describe(error)}") from None
        self.check_guard()
        self.record_times(solution.stats(), eager_stats, compile_stats, plan)
        last = self.draw(config, trial_draw + solution.last_trial) if solution.last_trial >= 0 else inputs
        kept, kept_trial = solution.kept, solution.kept_trial
        del solution
        expected_inputs = fresh(last)
        expected = self.call_reference(expected_inputs)   # the reference on the solution's last trial's inputs
        self.judge_timed(outputs, aliased, candidate_inputs, expected, expected_inputs, last, "the last timed call")
        del outputs, expected
        if kept is not None:   # and on the trial chosen at random
            (outputs, aliased), kept_inputs = kept
            del kept
            saved = self.draw(config, trial_draw + kept_trial)
            expected_inputs = fresh(saved)
            expected = self.call_reference(expected_inputs)
            self.judge_timed(outputs, aliased, kept_inputs, expected, expected_inputs, saved,
                             f"timed call {kept_trial + 1}")
            del outputs, expected, kept_inputs
        self.check_draw(config, fresh_draw, reused=candidate_inputs, after_timing=True)

    def timed_output_copies(self, output: object, inputs: list) -> tuple[list[torch.Tensor], tuple[int, int] | None]:
        """The last timed call's outputs copied before the reference is timed (see `settled_copies`), once every
        stream is done (work left on a side stream is judged by the fresh draw after timing), and which output shares
        storage with which input."""
        if self.device == "cuda":
            torch.cuda.synchronize()
        try:
            outputs = self.output_tensors(output)
        except OutputFormatError as error:
            raise Verdict("mismatch_after_timing", f"output_format: {error}") from None
        return [t.clone() for t in outputs], aliased_input(outputs, inputs)

    def trial_plan(self) -> TrialPlan:
        payload = self.payload
        return TrialPlan(warmups=int(payload.get("warmups", 10)), max_trials=int(payload.get("trials", 100)),
                         min_trials=min(int(payload.get("min_trials", 10)), int(payload.get("trials", 100))))

    def refiller(self, config: InputConfig, trial_draw: int) -> Callable[[list], Callable[[int], None]]:
        """`refiller(config, first)(targets)`: writes trial k's draw (`first` + k) into `targets`."""
        def refill(targets: list) -> Callable[[int], None]:
            def write(trial: int) -> None:
                for target, value in zip(targets, self.draw(config, trial_draw + trial)):
                    if isinstance(target, torch.Tensor):
                        target.copy_(value)
            return write
        return refill

    def reference_times(self, config: InputConfig, compiled: Callable | None,
                        plan: TrialPlan) -> tuple[dict, dict | None]:
        """The eager and compiled reference's trial statistics on the timed draws (the caller holds the GPU's lock
        alone and has put PyTorch's defaults back); each timed on its own fresh copy, every trial on its own draw."""
        timed_draw, _, _, trial_draw = timing_draws(self.draws)
        inputs = self.draw(config, timed_draw)
        refill = self.refiller(config, trial_draw)
        reference_inputs = fresh(inputs)
        eager = timed_calls(self.reference, reference_inputs, self.device, plan, refill(reference_inputs)).stats()
        compile_stats = None
        if compiled is not None:
            compiled_inputs = fresh(inputs)
            compile_stats = timed_calls(compiled, compiled_inputs, self.device, plan, refill(compiled_inputs)).stats()
        return eager, compile_stats

    def trial_copies(self, output: object, inputs: list) -> tuple[tuple[list[torch.Tensor], tuple[int, int] | None],
                                                                  list]:
        """A timed trial's outputs (`timed_output_copies`) and its inputs as the solution left them, copied."""
        return self.timed_output_copies(output, inputs), [x.clone() if isinstance(x, torch.Tensor) else x
                                                          for x in inputs]

    def judge_timed(self, outputs, aliased, candidate_inputs, expected, reference_inputs, saved, where) -> None:
        try:
            self.judge(outputs, candidate_inputs, expected, reference_inputs, saved, aliased,
                       modified_input(candidate_inputs, saved), where)
        except Verdict as verdict:
            if verdict.reason in ("output_format", "non_finite", "mismatch"):
                raise Verdict("mismatch_after_timing", f"{verdict.reason}: {verdict.detail}") from None
            raise

    def kernel_breakdown(self, config: InputConfig) -> None:
        """Where the solution's and the eager reference's time goes, kernel by kernel, on the timed draw (the GPU's
        lock held alone). On CUDA the profiler's CUDA tracing stays loaded in the process, so the worker exits after
        this grade and no later timing runs beside it."""
        inputs = self.draw(config, self.draws)
        with gpu_lock(self.lock):
            self.solution_runs()
            try:
                solution = kernel_breakdown(self.candidate, fresh(inputs), self.device)
            except BaseException as error:  # noqa: BLE001 - the breakdown is information, never a verdict
                self.result["breakdown_error"] = describe(error)
                return
            finally:
                if self.device == "cuda":
                    exit_after_answer()
            self.check_guard()
            self.settings.restore()
            reference = kernel_breakdown(self.reference, fresh(inputs), self.device)
        self.result["breakdown"] = {"solution": solution, "reference": reference}

    def compile_reference(self, config: InputConfig, draw: int) -> Callable | None:
        """torch.compile of the reference (default mode), at the settings the task was timed with, and its first
        call on a draw of its own (not the timed one: its output must not be in memory when the solution is timed).
        The compile's seconds of host work go unlocked, as the build's compile check's do: its autotuning benchmarks
        and its graphs' kernels hold the GPU's lock, shared, so a timed grade beside it waits for kernels, not for a
        compile."""
        self.settings.restore()
        inputs = self.draw(config, draw)
        try:
            with inductor_benchmarks_locked(self.lock), \
                    compiled_graphs_locked(self.lock, lambda: _synchronize(self.device)), torch.no_grad():
                compiled = torch.compile(self.reference)
                compiled(*inputs)
                _synchronize(self.device)
        except Exception as error:  # noqa: BLE001 - a compile failure leaves the compile baseline out
            self.result["compile_error"] = describe(error)
            return None
        return compiled

    def record_times(self, solution: dict, eager: dict | None, compiled: dict | None, plan: TrialPlan) -> None:
        """The solution's figures, and the reference's when they were timed here (else the parent adds them)."""
        result = self.result
        result.update(solution_ms=solution["median"], solution_ms_iqr=solution["iqr"],
                      trials={"solution": solution["count"]})
        if eager is not None:
            result.update(reference_figures(eager, compiled, self.result.get("compile_error")))
            result["trials"].update(result.pop("reference_trials"))
            result.update(speedups(result))
            result["reference_reused"] = False
        result["timing_method"] = (
            f"{'CUDA events, L2 flushed before each trial, every stream synchronised before the end event' if self.device == 'cuda' else 'host clock'}; "
            f"{plan.warmups} warm-ups, {plan.min_trials}-{plan.max_trials} trials until the median's 95% CI is "
            f"within ±{plan.rel_ci:.0%}; median")
        if self.device == "cuda":
            result["hardware"] = torch.cuda.get_device_properties(0).name


UNPREDICTABLE_DRAWS = 1_000_000   # the timed draws' random starting point lies past every seeded draw


def timing_draws(draws: int) -> tuple[int, int, int, int]:
    """The draws of the timed part: the timed inputs, the fresh draw after timing, the compile baseline's warm-up,
    and the first trial's (trial k is drawn as that + k, for every callable timed)."""
    return draws, draws + 1, draws + 2, draws + 3


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def probe_device(payload: dict) -> dict:
    """A trivial computation on the device, in a fresh worker: whether the machine works (a solution's error that
    names the machine is its verdict when this passes)."""
    device = payload.get("device", "cuda")
    value = (torch.ones(4, device=device) * 2).sum().item()
    _synchronize(device)
    return {"ok": value == 8.0}
