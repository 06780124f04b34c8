"""What a draft source costs per round (8.5.3): lookups, serial and parallel draft networks."""

from __future__ import annotations

import pytest

from inferlab.speculative import DRAFT_SOURCES, expected_tokens, source_round
from inferlab.speculative.cost import draft_forward_s, effective_bandwidth
from inferlab.units import GB, ms

PLAIN = 26.26 * ms
BW = effective_bandwidth(15.44 * GB, PLAIN)


def test_the_pages_numbers_come_out_of_source_round() -> None:
    serial = source_round("draft model, serial", 4, 0.75, PLAIN, 2.10 * GB, BW)
    parallel = source_round("draft model, parallel", 4, 0.75, PLAIN, 2.10 * GB, BW)
    lookup = source_round("context lookup", 4, 0.75, PLAIN, 2.10 * GB, BW)
    assert round(serial.draft_s / ms, 2) == 14.29 and serial.draft_s == pytest.approx(4 * parallel.draft_s)
    assert lookup.draft_s == 0.1 * ms and lookup.extra_bytes == 0 and serial.extra_bytes == 2.10 * GB
    assert lookup.tokens == serial.tokens == expected_tokens([0.75] * 4)
    assert round(lookup.per_token_s / ms, 2) == 8.64  # the 8.64 ms of section 8.5.2
    assert serial.per_token_s == pytest.approx((serial.draft_s + PLAIN) / serial.tokens)


def test_a_fixed_cost_per_forward_is_paid_once_per_forward() -> None:
    base = {s: source_round(s, 6, 0.6, PLAIN, 1.0 * GB, BW) for s in DRAFT_SOURCES}
    slow = {s: source_round(s, 6, 0.6, PLAIN, 1.0 * GB, BW, forward_overhead_s=5 * ms) for s in DRAFT_SOURCES}
    assert slow["draft model, serial"].draft_s - base["draft model, serial"].draft_s == pytest.approx(6 * 5 * ms)
    assert slow["draft model, parallel"].draft_s - base["draft model, parallel"].draft_s == pytest.approx(5 * ms)
    assert slow["context lookup"] == base["context lookup"]
    assert draft_forward_s(1.0 * GB, BW) + 5 * ms == pytest.approx(slow["draft model, parallel"].draft_s)


@pytest.mark.parametrize("kwargs, match", [
    ({"source": "oracle"}, "source"), ({"drafts": 0}, "drafts"), ({"accept": 1.5}, "accept"),
    ({"verify_s": 0.0}, "verify_s"), ({"draft_weight_bytes": -1.0}, "draft_weight_bytes"),
    ({"forward_overhead_s": float("nan")}, "forward_overhead_s"),
])
def test_bad_input_names_the_parameter(kwargs, match) -> None:
    args = {"source": "draft model, serial", "drafts": 4, "accept": 0.75, "verify_s": PLAIN,
            "draft_weight_bytes": 2.1 * GB, "bandwidth": BW} | kwargs
    with pytest.raises(ValueError, match=match):
        source_round(**args)


def test_a_network_ties_plain_decode_at_its_tie_overhead() -> None:
    from inferlab.speculative import tie_forward_overhead

    for source, per_round in (("draft model, serial", 4), ("draft model, parallel", 1)):
        ovh = tie_forward_overhead(source, 4, 0.75, PLAIN, 2.10 * GB, BW)
        assert source_round(source, 4, 0.75, PLAIN, 2.10 * GB, BW, ovh).per_token_s == pytest.approx(PLAIN)
    assert round(tie_forward_overhead("draft model, serial", 4, 0.75, PLAIN, 2.10 * GB, BW) / ms, 1) == 9.9
    assert round(tie_forward_overhead("draft model, parallel", 4, 0.75, PLAIN, 2.10 * GB, BW) / ms, 1) == 50.3
    assert tie_forward_overhead("draft model, serial", 4, 0.05, PLAIN, 2.10 * GB, BW) < 0  # reads alone lose
    with pytest.raises(ValueError, match="source"):
        tie_forward_overhead("context lookup", 4, 0.75, PLAIN, 2.10 * GB, BW)
