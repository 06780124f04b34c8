"""Seeded synthetic traces: a multi-turn coding-agent session and the traffic that competes with it.

The chapter replays a real 12-turn coding-agent session (19,556 input tokens) against a
prefix cache; that trace is not public. This generator makes one with the same structure:
a stable head (system prompt + tool definitions) shared by every turn; a first turn that
shares only that head (a side call such as planning the task, as in the chapter's Figure
8-17, where the first four turns share 206 tokens and turns 2-4 then extend one path); then
a main line, head + task, whose turns append the assistant's tool call and the tool's
result; and occasional rewrites where the harness re-renders part of the history
(everything after the rewritten position changes, so reuse stops there). Token ids are
random; only their equality matters for caching.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._validate import (MAX_COUNT, flag, fraction, generator, instance, items, non_negative_int, one_of, positive,
                        positive_int, token_ids)

VOCAB = 151_936  # Qwen3's vocabulary; ids are drawn below it
KINDS = ("first", "append", "rewrite", "other")


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: its input and output token ids and where it comes from."""

    name: str
    input_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    session: bool = False  # True for the agent session under study
    turn: int = -1  # turn number within the session (0-based), -1 for other traffic
    kind: str = "other"  # 'first' (turn 1, and the main line's first turn), 'append', 'rewrite' or 'other'
    reuse_hint: float | None = None  # engine's prior that this context is continued (None: unknown)

    def __post_init__(self) -> None:
        instance("name", self.name, str)
        object.__setattr__(self, "input_ids", tuple(token_ids(self.input_ids, "input_ids", allow_empty=False)))
        object.__setattr__(self, "output_ids", tuple(token_ids(self.output_ids, "output_ids")))
        flag("session", self.session)
        if type(self.turn) is not int or self.turn != -1:
            non_negative_int("turn (-1: other traffic)", self.turn)
        one_of("kind", self.kind, KINDS)
        if self.reuse_hint is not None:
            fraction("reuse_hint", self.reuse_hint)


def _ids(rng: np.random.Generator, n: int) -> tuple[int, ...]:
    return tuple(rng.integers(0, VOCAB, size=n).tolist())


def _mean_length(name: str, mean: float) -> float:
    """A mean length of a lognormal draw: a number in (0, MAX_COUNT]."""
    if positive(name, mean) > MAX_COUNT:
        raise ValueError(f"{name} must be at most {MAX_COUNT}, got {mean!r}")
    return mean


def _length(rng: np.random.Generator, mean: float, low: int = 8) -> int:
    """A lognormal length with the given mean (sigma 0.5), at least ``low``."""
    return max(low, int(round(rng.lognormal(np.log(mean) - 0.125, 0.5))))


def _trace(name: str, requests: list[TraceRequest]) -> list[TraceRequest]:
    out = items(name, requests)
    for r in out:
        instance(name, r, TraceRequest, "a list of TraceRequest")
    return out


def agent_session(
    seed: int = 0,
    turns: int = 12,
    system_tokens: int = 96,
    tool_definition_tokens: int = 110,
    task_tokens: int = 400,
    tool_result_tokens: float = 130,
    output_tokens: float = 60,
    rewrite_prob: float = 0.15,
    reuse_hint: float = 0.9,
    first_turn_diverges: bool = True,
) -> list[TraceRequest]:
    """A coding-agent session: turn k's input = turn k-1's input + its output + a tool result (or a rewrite).

    With ``first_turn_diverges`` turn 1 is a side call that shares only the head (system prompt
    + tool definitions) and turn 2 starts the main line (head + task + first tool result).
    ``reuse_hint`` is the prior each main-line turn but the last carries (it ends in a tool call).
    """
    positive_int("turns", turns, at_most=MAX_COUNT)
    for name, v in (("system_tokens", system_tokens), ("tool_definition_tokens", tool_definition_tokens),
                    ("task_tokens", task_tokens)):
        non_negative_int(name, v, at_most=MAX_COUNT)
    _mean_length("tool_result_tokens", tool_result_tokens)
    _mean_length("output_tokens", output_tokens)
    fraction("rewrite_prob", rewrite_prob)
    fraction("reuse_hint", reuse_hint)
    flag("first_turn_diverges", first_turn_diverges)
    rng = generator("seed", seed)
    head = _ids(np.random.default_rng(10_000 + system_tokens), system_tokens) + _ids(rng, tool_definition_tokens)
    context = head + _ids(rng, task_tokens)
    out: list[TraceRequest] = []
    side = head + _ids(rng, _length(rng, task_tokens / 4)) if first_turn_diverges else None
    for k in range(turns):
        kind = "first"
        if k == 0 and side is not None:
            # a side call: nothing continues it, so it carries no reuse hint
            out.append(TraceRequest("turn 1", side, _ids(rng, _length(rng, output_tokens)), True, 0, "first", 0.0))
            continue
        if k == 1 and side is not None:
            context = context + _ids(rng, _length(rng, tool_result_tokens))
        elif k:
            kind = "append"
            context = context + out[-1].output_ids
            if rng.random() < rewrite_prob and len(context) > len(head) + 1:
                # the harness re-renders the history from a point after the head (plan, todo list, edits)
                at = int(rng.integers(len(head), len(context)))
                context = context[:at] + _ids(rng, len(context) - at)
                kind = "rewrite"
            context = context + _ids(rng, _length(rng, tool_result_tokens))
        hint = reuse_hint if k < turns - 1 else 0.0  # every turn but the last ends in a tool call
        out.append(TraceRequest(f"turn {k + 1}", context, _ids(rng, _length(rng, output_tokens)), True, k, kind, hint))
    return out


def competing_traffic(seed: int = 1, n_requests: int = 48, prompt_tokens: float = 2048,
                      output_tokens: float = 256) -> list[TraceRequest]:
    """Unrelated requests (their own prompts, nothing shared with the session), lognormal lengths."""
    non_negative_int("n_requests", n_requests, at_most=MAX_COUNT)
    _mean_length("prompt_tokens", prompt_tokens)
    _mean_length("output_tokens", output_tokens)
    rng = generator("seed", seed)
    return [TraceRequest(f"other {i + 1}", _ids(rng, _length(rng, prompt_tokens)),
                         _ids(rng, _length(rng, output_tokens))) for i in range(n_requests)]


def interleave(session: list[TraceRequest], traffic: list[TraceRequest], per_gap: int) -> list[TraceRequest]:
    """Put ``per_gap`` competing requests between consecutive session turns (while the tool runs)."""
    session, traffic = _trace("session", session), _trace("traffic", traffic)
    non_negative_int("per_gap", per_gap)
    if per_gap * max(len(session) - 1, 0) > len(traffic):
        raise ValueError(f"traffic must hold per_gap x (len(session) - 1) = {per_gap * (len(session) - 1)} requests, "
                         f"got {len(traffic)}")
    out, it = [], iter(traffic)
    for k, turn in enumerate(session):
        if k:
            out.extend(next(it) for _ in range(per_gap))
        out.append(turn)
    return out


def agent_workload(seed: int = 0, turns: int = 12, other_per_gap: int = 4, other_prompt_tokens: float = 2048,
                   other_output_tokens: float = 256) -> list[TraceRequest]:
    """The session of ``agent_session(seed, turns)`` with ``other_per_gap`` competing requests in every gap."""
    generator("seed", seed)
    non_negative_int("other_per_gap", other_per_gap, at_most=MAX_COUNT)
    _mean_length("other_prompt_tokens", other_prompt_tokens), _mean_length("other_output_tokens", other_output_tokens)
    session = agent_session(seed, turns)
    if other_per_gap * (turns - 1) > MAX_COUNT:
        raise ValueError(f"other_per_gap x (turns - 1) must be at most {MAX_COUNT} requests")
    traffic = competing_traffic(seed + 1, other_per_gap * (turns - 1), other_prompt_tokens, other_output_tokens)
    return interleave(session, traffic, other_per_gap)


def reuse_from_previous(session: list[TraceRequest]) -> list[int]:
    """For each turn, the tokens its input shares with what the previous turn computed (0 for turn 1).

    A finished turn holds the KV of its input and output but the last output token
    (prompt + output - 1 tokens), so that is what the next turn can reuse.
    """
    session = _trace("session", session)
    shared = [0]
    for prev, cur in zip(session, session[1:]):
        ctx = (prev.input_ids + prev.output_ids)[:-1]
        n = 0
        for a, b in zip(ctx, cur.input_ids):
            if a != b:
                break
            n += 1
        shared.append(n)
    return shared
