"""A focused build (`--focus`): the operators it is built around and the mix they can make, checked before the
build starts; the stop for a focused operator that fails every filter; and its figures for stats.json."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from opgen.errors import UsageError
from opgen.pipeline.config import BuildConfig
from opgen.sample.focus import check_focus, focus_counts, focus_hits, focused_mix, resolve_focus
from opgen.vocab import VocabError, cached_vocabulary

# A focused operator with at least this many judged candidates and no survivor stops the build before another
# round draws it again.
FOCUS_MIN_JUDGED = 8


def prepare_focus(config: BuildConfig) -> tuple[BuildConfig, tuple[str, ...]]:
    """The config with its mix narrowed to the sources the focused operators can make, and those operators; a bad
    name, or an operator that fits no chain at the build's profile, is a UsageError naming it."""
    try:
        vocab = cached_vocabulary(tuple(str(Path(p).resolve()) for p in config.vocab_plugins))
    except VocabError as error:
        raise UsageError(str(error)) from None
    focus = resolve_focus(config.focus, vocab, config.vocab_plugins)
    mix = focused_mix(config.mix, vocab, focus)
    check_focus(focus, vocab, config.profile, config.composition_rule(), mix)
    return replace(config, mix=mix), focus


def _judged(build) -> tuple[list[dict], dict[int, dict]]:
    """The candidates of the build's executed shards (skipped ones left out: nothing judged them) and the last
    verdict of each candidate (static, then dedup, then execute)."""
    rundir = build.rundir
    candidates: list[dict] = []
    verdicts: dict[int, dict] = {}
    for state in build.rounds:
        shards = []
        for shard in state.shards:
            folder = rundir.shard_dir(shard)
            marker = rundir.done(folder, "execute")
            if marker is None or marker.get("skipped"):
                continue
            shards.append(folder)
            candidates += rundir.rows(folder, "candidates")
            verdicts.update((v["sample_index"], v) for v in rundir.rows(folder, "static"))
        verdicts.update((v["sample_index"], v) for v in rundir.rows(rundir.round_dir(state.index), "dedup"))
        for folder in shards:
            verdicts.update((v["sample_index"], v) for v in rundir.rows(folder, "execute"))
    return candidates, verdicts


def stop_if_focus_fails(build) -> None:
    """Before a top-up round: a focused operator held by FOCUS_MIN_JUDGED judged candidates or more, none of which
    survived, stops the build with one line naming it and its rejections (another round would only draw it
    again). Survivors are the timed ones of finished rounds and the executed ones of the rest."""
    candidates, verdicts = _judged(build)
    survivors = [r for state in build.rounds
                 for r in (build._survivors(state) if state.complete else build._executed_survivors(state))]
    kept = focus_counts(survivors, build.focus)
    held: dict[str, list[int]] = {name: [] for name in build.focus}
    for candidate in candidates:
        for name in focus_hits(candidate, build.focus):
            held[name].append(candidate["sample_index"])
    for name in build.focus:
        if len(held[name]) >= FOCUS_MIN_JUDGED and not kept[name]:
            reasons = Counter(verdicts[i]["reason"] for i in held[name] if i in verdicts and not verdicts[i]["keep"])
            summary = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common()) or "none rejected yet"
            raise UsageError(f"focused operator {name!r} fails every filter: none of its {len(held[name])} judged "
                             f"candidates survived ({summary}); leave it out of --focus or fix its spec")


def focus_stats(build, chosen: list[dict], survivors: list[dict]) -> dict:
    """stats.json's `focus`: what was asked, the operators it named, and how many candidates, survivors and
    dataset tasks hold each of them."""
    candidates = [c for state in build.rounds for shard in state.shards
                  for c in build.rundir.rows(build.rundir.shard_dir(shard), "candidates")]
    return {"requested": list(build.config.focus), "operators": list(build.focus),
            "candidates": focus_counts(candidates, build.focus), "survivors": focus_counts(survivors, build.focus),
            "tasks": focus_counts(chosen, build.focus)}
