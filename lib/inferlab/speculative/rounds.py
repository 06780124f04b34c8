"""A simulated request read round by round (section 8.5.2): how long each decode round took and what it emitted.

``simulate_speculative`` (and ``scheduling.simulate`` for plain decoding) log every iteration of the scheduler.
For one request, its rounds are the iterations in which it decodes: a plain step emits one token, a speculative
round verifies m + 1 positions and emits between 1 and m + 1. Time per output token over the run is the sum of the
round times over the sum of their tokens (``cost.time_per_token``), never the mean of the rounds' own rates.
"""

from __future__ import annotations

import pandas as pd

from .._validate import instance
from ..scheduling.simulator import Schedule

__all__ = ["round_log"]


def round_log(schedule: Schedule, name: str) -> pd.DataFrame:
    """The decode rounds of request ``name`` in ``schedule``, in order: ``round_s`` (seconds) and ``tokens`` emitted.

    Iterations that only run the request's prompt are left out (the one that finishes it emits the first token).
    Raises ValueError if ``name`` is not a request of ``schedule`` or the request never decodes.
    """
    instance("schedule", schedule, Schedule)
    instance("name", name, str)
    if name not in schedule.served:
        known = sorted(schedule.served)[:5]
        raise ValueError(f"name must be a request of the schedule (such as {known}), got {name!r}")
    round_s, tokens = [], []
    for it in schedule.iterations:
        for work in it.work:
            if work.kind == "decode" and work.request.name == name:
                round_s.append(it.duration_s)
                tokens.append(work.emits)
    if not round_s:
        raise ValueError(f"name must be a request that decodes at least once; {name!r} emits only its first token")
    return pd.DataFrame({"round_s": round_s, "tokens": tokens}, index=pd.RangeIndex(1, len(round_s) + 1, name="round"))
