"""Whether the Hugging Face Hub can be reached: one short request, no retries, so that an offline machine is told
so in seconds (the Hub clients retry an unreachable host for about half a minute before they give up)."""

from __future__ import annotations

import threading

PROBE_S = 3.0   # one request to the Hub's front page; a reachable Hub answers it well within this


def offline_mode() -> bool:
    """Whether the user asked the Hub clients to stay offline (HF_HUB_OFFLINE=1): they then read their cache only."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_unreachable(timeout_s: float = PROBE_S) -> str | None:
    """None when the Hub answers one request within `timeout_s`, whatever its status; else why it did not, in a few
    words. The request goes through huggingface_hub's own session (its endpoint, proxies and certificates) in a
    thread, so that a name lookup that hangs is bounded by `timeout_s` too."""
    from huggingface_hub import constants, get_session

    if constants.HF_HUB_OFFLINE:
        return "HF_HUB_OFFLINE is set"
    endpoint = constants.ENDPOINT
    failure: list[str] = []
    answered = threading.Event()

    def probe() -> None:
        try:
            get_session().head(endpoint, timeout=timeout_s)
        except Exception as error:  # noqa: BLE001 - the HTTP client's many connection errors all mean "unreachable"
            failure.append((str(error).strip().splitlines() or [type(error).__name__])[0][:200])
        answered.set()

    threading.Thread(target=probe, name="hub-probe", daemon=True).start()
    if not answered.wait(timeout_s):
        return f"no answer from {endpoint} within {timeout_s:g} s"
    return f"{endpoint} unreachable: {failure[0]}" if failure else None
