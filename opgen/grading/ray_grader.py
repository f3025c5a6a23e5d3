"""Grading batches on a Ray cluster: grading actors pinned one per GPU (on a CPU-only cluster, one per node unless
told), each with its own sandbox workers and reference timings; extensions compiled first by CPU tasks on the node
of the actor that grades them; a task's solutions routed together (opgen/grading/ray_routing.py). An actor that dies
mid-batch is restarted by Ray and what it held is graded again, by it or another: judged once, never lost."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from opgen.errors import MachineFault, UsageError
from opgen.grading.extensions import needs_compile
from opgen.grading.ray_actor import GradingActor, compile_on_node
from opgen.grading.ray_routing import route, steal, task_key
from opgen.grading.run import GradeOptions
from opgen.ray_cluster import join_cluster, worker_env
from opgen.sandbox.gpus import MAX_WORKERS_PER_GPU

ACTOR_RESTARTS = 4          # Ray restarts a dead grading actor this many times before it is given up
MAX_ATTEMPTS = 3            # a solution whose actor died under it this many times is judged `crash`
START_TIMEOUT_S = 600.0     # the actors' start (a GPU each): longer means the cluster cannot place them
COMPILE_GROUP = 4           # solutions per compile task
OPTION = "--executor ray"


@dataclass
class ActorSlot:
    """One grading actor as the driver sees it: its handle, where it runs, its workers, the chunk it grades now."""

    handle: object
    info: dict
    workers: int = 1
    threads: int = 1
    running: object = None      # the ObjectRef of the chunk in flight
    chunk: tuple = ()
    probe: object = None        # while down: the ObjectRef of the call that says whether Ray restarted it
    alive: bool = True

    @property
    def idle(self) -> bool:
        return self.alive and self.running is None and self.probe is None


class RayGrader:
    """Grades batches on a Ray cluster's actors, with run.run_grades' lines (and `require_healthy_device`)."""

    def __init__(self, device: str = "auto", actors: int | None = None, workers: int | None = None):
        self.ray, self._joined_here = join_cluster(option=OPTION)
        errors = self.ray.exceptions
        self.lost = (errors.RayActorError, errors.OutOfMemoryError, errors.WorkerCrashedError)   # a process, not a grade
        self.task_error = errors.RayTaskError
        self._start_errors = (*self.lost, errors.RayTaskError, errors.GetTimeoutError)
        self.device = cluster_device(self.ray, device)
        self.preferred: dict[str, int] = {}
        self.redone = 0   # grades sent again because their actor died under them
        self.slots = self._start_actors(actors, workers)

    def _start_actors(self, actors: int | None, workers: int | None) -> list[ActorSlot]:
        ray = self.ray
        gpus = int(ray.cluster_resources().get("GPU", 0))
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        count = actors or (gpus if self.device == "cuda" else len(nodes))
        if count < 1:
            raise UsageError("ray_actors must be at least 1")
        if self.device == "cuda" and count > gpus:
            raise UsageError(f"{count} grading actors need a GPU each; the Ray cluster has {gpus}")
        resources = {"num_gpus": 1} if self.device == "cuda" else {"num_gpus": 0, "scheduling_strategy": "SPREAD"}
        remote = ray.remote(GradingActor).options(num_cpus=0, max_restarts=ACTOR_RESTARTS, max_task_retries=0,
                                                  runtime_env=worker_env(), **resources)
        handles = [remote.remote(self.device) for _ in range(count)]
        try:
            infos = ray.get([handle.describe.remote() for handle in handles], timeout=START_TIMEOUT_S)
        except self._start_errors as error:
            for handle in handles:
                ray.kill(handle)
            raise MachineFault(f"the grading actors did not start on the Ray cluster: {_first_line(error)}") from None
        slots = [ActorSlot(handle, info) for handle, info in zip(handles, infos)]
        cpus = {node["NodeID"]: int(node.get("Resources", {}).get("CPU", 1)) for node in nodes}
        for slot in slots:
            node = slot.info["node_id"]
            share = max(1, cpus.get(node, 1) // sum(s.info["node_id"] == node for s in slots))
            slot.workers = workers or (max(1, min(MAX_WORKERS_PER_GPU, share // 2)) if self.device == "cuda"
                                       else share)
            slot.threads = max(1, share // slot.workers)
        return slots

    @property
    def workers(self) -> int:
        """Sandbox workers over every actor."""
        return sum(slot.workers for slot in self.slots if slot.alive)

    def run_grades(self, payloads: list[dict], options: GradeOptions, progress: bool = False) -> list[dict]:
        """Grade lines of `payloads`, in order, as run.run_grades gives them."""
        return _Batch(self, payloads, options).run()

    def require_healthy_device(self, options: GradeOptions, message: str | None) -> None:
        """MachineFault unless a grading actor's device passes a trivial computation."""
        slot = next((slot for slot in self.slots if slot.alive), None)
        if slot is None:
            raise MachineFault("every grading actor on the Ray cluster died")
        self._get(slot.handle.check_device.remote(replace(options, workers=1), message))

    def _get(self, ref):
        """ray.get, a grader's own MachineFault or UsageError raised as itself."""
        try:
            return self.ray.get(ref)
        except self.task_error as error:
            if isinstance(error.cause, MachineFault | UsageError):
                raise error.cause from None
            raise

    def stop_actors(self) -> None:
        """Stop the actors, their sandbox workers with them."""
        for slot in self.slots:
            self.ray.kill(slot.handle)
        self.slots = []

    def close(self) -> None:
        """Stop the actors; disconnect if this grader joined the cluster."""
        self.stop_actors()
        if self._joined_here:
            self.ray.shutdown()
            self._joined_here = False


class _Batch:
    """One batch's dispatch: compile tasks first where needed, then chunks to idle actors until every line is in."""

    def __init__(self, grader: RayGrader, payloads: list[dict], options: GradeOptions):
        self.grader, self.ray, self.payloads, self.options = grader, grader.ray, payloads, options
        self.lines: list[dict | None] = [None] * len(payloads)
        self.attempts = [0] * len(payloads)
        self.alone: set[int] = set()      # graded by itself: it was in a chunk whose actor died
        self.waiting: set[int] = set()    # its extensions are being compiled
        self.compiles: dict[object, tuple[int, list[int]]] = {}

    def run(self) -> list[dict]:
        slots = self.grader.slots
        live = [i for i, slot in enumerate(slots) if slot.alive]
        self.queues = route([task_key(p) for p in self.payloads], live, self.grader.preferred)
        for actor, queue in self.queues.items():
            for index in queue:
                self.payloads[index]["extensions"] = slots[actor].info["extensions"]
            self._compile(actor, [i for i in queue if needs_compile(self.payloads[i]["solution"])
                                  and "compiled" not in self.payloads[i]])
        while any(line is None for line in self.lines):
            self._dispatch()
            refs = [*self.compiles, *(s.running for s in slots if s.running is not None),
                    *(s.probe for s in slots if s.probe is not None)]
            if not refs:
                raise MachineFault("every grading actor on the Ray cluster died")
            [ready], _ = self.ray.wait(refs, num_returns=1)
            if ready in self.compiles:
                self._compiled(ready)
                continue
            slot = next(s for s in slots if ready in (s.running, s.probe))
            if ready is slot.probe:
                self._probed(slot)
            else:
                self._graded(slot)
        return self.lines  # type: ignore[return-value]

    def _compile(self, actor: int, indices: list[int]) -> None:
        node = self.grader.slots[actor].info["node_id"]
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = self.ray.remote(compile_on_node).options(
            num_cpus=1, num_gpus=0, runtime_env=worker_env(), max_retries=2,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=True))
        for start in range(0, len(indices), COMPILE_GROUP):
            group = indices[start:start + COMPILE_GROUP]
            self.waiting.update(group)
            self.compiles[task.remote([self.payloads[i] for i in group], self.options)] = (actor, group)

    def _compiled(self, ref) -> None:
        _, group = self.compiles.pop(ref)
        try:
            failed, compiled = self.grader._get(ref)
        except self.grader.lost:   # the compile task's worker died: the grading actor compiles them itself
            self.waiting.difference_update(group)
            return
        for position, index in enumerate(group):
            self.waiting.discard(index)
            if position in failed:
                self.lines[index] = failed[position]
                for queue in self.queues.values():
                    if index in queue:
                        queue.remove(index)
            else:
                self.payloads[index]["compiled"] = compiled.get(position)

    def _dispatch(self) -> None:
        for actor, slot in enumerate(self.grader.slots):
            if not slot.idle:
                continue
            chunk = self._take(actor, slot)
            if chunk:
                options = replace(self.options, workers=slot.workers)
                slot.chunk = tuple(chunk)
                slot.running = slot.handle.grade.remote([self.payloads[i] for i in chunk], options, slot.threads)

    def _take(self, actor: int, slot: ActorSlot) -> list[int]:
        """The next chunk for an idle actor: its own queue's ready solutions, else some of another's (a solution
        whose extensions were built on another node stays there); one alone after an actor died under it."""
        size = 2 * slot.workers
        queue = self.queues.setdefault(actor, deque())
        ready = [i for i in queue if i not in self.waiting][:size]
        if not ready:
            node = slot.info["node_id"]
            ready = steal(self.queues, actor, size, lambda i: i not in self.waiting and (
                "compiled" not in self.payloads[i] or self._node_of(i) == node))
            queue.extend(ready)
        if ready and ready[0] in self.alone:
            ready = ready[:1]
        else:
            ready = [i for i in ready if i not in self.alone]
        for index in ready:
            queue.remove(index)
        return ready

    def _node_of(self, index: int) -> str | None:
        for actor, queue in self.queues.items():
            if index in queue:
                return self.grader.slots[actor].info["node_id"]
        return None

    def _graded(self, slot: ActorSlot) -> None:
        ref, chunk = slot.running, slot.chunk
        slot.running, slot.chunk = None, ()
        try:
            lines = self.grader._get(ref)
        except self.grader.lost:   # the actor died under the chunk: graded again, by it once restarted or another
            self._requeue(slot, chunk)
            slot.probe = slot.handle.describe.options(max_task_retries=-1).remote()   # waits out a restart
            return
        for index, line in zip(chunk, lines):
            self.lines[index] = line

    def _requeue(self, slot: ActorSlot, chunk: tuple) -> None:
        actor = self.grader.slots.index(slot)
        for index in reversed(chunk):
            self.attempts[index] += 1
            if self.attempts[index] >= MAX_ATTEMPTS:
                self.lines[index] = {"correct": False, "reason": "crash",
                                     "detail": f"the grading actor died each of the {MAX_ATTEMPTS} times this "
                                               "solution was graded"}
                continue
            if len(chunk) > 1 or self.attempts[index] > 1:
                self.alone.add(index)
            self.queues[actor].appendleft(index)
            self.grader.redone += 1

    def _probed(self, slot: ActorSlot) -> None:
        ref, slot.probe = slot.probe, None
        try:
            slot.info = self.ray.get(ref)
        except self.grader.lost:   # restarts spent: its queue goes to the others
            slot.alive = False
            actor = self.grader.slots.index(slot)
            orphans = self.queues.pop(actor, deque())
            others = [i for i, s in enumerate(self.grader.slots) if s.alive]
            for position, index in enumerate(orphans):
                if others:
                    self.queues.setdefault(others[position % len(others)], deque()).append(index)


def cluster_device(ray, requested: str) -> str:
    """The device grades run on: the cluster's GPUs for auto when it has any, else the CPU; cuda needs a GPU."""
    if requested not in ("auto", "cuda", "cpu"):
        raise UsageError(f"device must be auto, cuda or cpu, not {requested!r}")
    gpus = ray.cluster_resources().get("GPU", 0)
    if requested == "cuda" and not gpus:
        raise UsageError("--device cuda: the Ray cluster has no GPU")
    if requested == "auto":
        return "cuda" if gpus else "cpu"
    return requested


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


_GRADERS: dict[tuple, RayGrader] = {}


def cluster_grader(device: str = "auto", actors: int | None = None, workers: int | None = None) -> RayGrader:
    """The RayGrader of these settings, kept for the life of this process (a trainer's steps reuse its actors)."""
    key = (device, actors, workers)
    grader = _GRADERS.get(key)
    if grader is None or not any(slot.alive for slot in grader.slots):
        grader = _GRADERS[key] = RayGrader(device, actors, workers)
    return grader


def close_graders() -> None:
    """Stop every kept grader's actors (before this process leaves its cluster)."""
    while _GRADERS:
        _GRADERS.popitem()[1].close()
