"""Which grading actor grades which solution: a task's solutions together, on the actor that graded the task before
(its reference timing is kept there), split only where one task is more than an actor's fair share of the batch."""

from __future__ import annotations

import hashlib
import math
from collections import deque

KEPT_PREFERENCES = 100_000   # tasks whose actor is remembered between batches (a training run's dataset)


def task_key(payload: dict) -> str:
    """What identifies a task for routing: its source (two rows of one source share their reference timing)."""
    return hashlib.sha256(payload["task"].encode()).hexdigest()


def route(keys: list[str], actors: list[int], preferred: dict[str, int]) -> dict[int, deque[int]]:
    """A queue of indices (into `keys`) for each actor. Each actor gets at most its fair share (the batch over the
    actors, rounded up); a task's indices go to its `preferred` actor while it has room, the rest, and new tasks, to
    the least loaded one, largest task first. `preferred` is updated with where each task went (most of it)."""
    queues: dict[int, deque[int]] = {actor: deque() for actor in actors}
    if not actors:
        return queues
    share = math.ceil(len(keys) / len(actors))
    groups: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    for key, indices in sorted(groups.items(), key=lambda item: -len(item[1])):
        target = preferred.get(key)
        if target not in queues or len(queues[target]) >= share:
            target = min(actors, key=lambda actor: len(queues[actor]))
        if len(preferred) >= KEPT_PREFERENCES and key not in preferred:
            preferred.clear()
        preferred[key] = target
        while indices:
            if len(queues[target]) >= share:
                target = min(actors, key=lambda actor: len(queues[actor]))
            room = share - len(queues[target])
            queues[target].extend(indices[:room])
            indices = indices[room:]
    return queues


def steal(queues: dict[int, deque[int]], thief: int, count: int, allowed=lambda index: True) -> list[int]:
    """Up to `count` indices taken for an idle actor from the tail of the longest other queue (its last task, the
    least likely to be under way there); `allowed` filters what may move (a build kept on its node stays there)."""
    victims = sorted((actor for actor in queues if actor != thief and queues[actor]),
                     key=lambda actor: -len(queues[actor]))
    for victim in victims:
        taken = [index for index in reversed(queues[victim]) if allowed(index)][:count]
        if taken:
            for index in taken:
                queues[victim].remove(index)
            return taken[::-1]
    return []
