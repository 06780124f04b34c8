"""Section 8.3.2's preemption figure: its title counts preemptions in words, never as "preemption(s)"."""

from __future__ import annotations

from inferlab.book.plot import blocks as bplot
from inferlab.kvcache.scenarios import decode_with_preemption


def _prompts(n: int) -> dict[str, list[int]]:
    return {name: [100 * i + t for t in range(10)] for i, name in enumerate("abc"[:n])}


def test_preemption_title_names_one_preemption() -> None:
    run = decode_with_preemption(num_blocks=12, block_size=4, prompts=_prompts(3), output_tokens=12)
    assert len(run.preemptions) == 1
    title = bplot.draw_preemption(run, 12).axes[0].get_title()
    assert title == f"one preemption, {run.recomputed_tokens} tokens recomputed"


def test_preemption_title_without_preemptions() -> None:
    run = decode_with_preemption(num_blocks=24, block_size=4, prompts=_prompts(3), output_tokens=12)
    assert bplot.draw_preemption(run, 24).axes[0].get_title() == "no preemptions, 0 tokens recomputed"
