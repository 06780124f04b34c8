"""Bits per value and metadata share of a group format, derived in sympy (8.4.1)."""

import pytest
import sympy as sp

from inferlab.compression import FORMATS, group_bits
from inferlab.models import MODELS


def test_symbolic_forms() -> None:
    g = group_bits.group_bits_symbolic()
    assert sp.simplify(g.bpv - 8 * g.s_g / g.n_g) == 0
    assert sp.simplify(g.share - g.s_meta / g.s_g) == 0
    # the share falls as the codes get wider: its slope is negative for every positive group
    assert g.dshare_dbits.subs({g.n_g: 32, g.n_bit: 4, g.s_meta: 2}) < 0
    assert sp.simplify(g.dshare_dbits + 8 * g.n_g * g.s_meta / (g.n_g * g.n_bit + 8 * g.s_meta) ** 2) == 0


@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q2_K"])
def test_substitution_matches_the_formats(fmt: str) -> None:
    f, got = FORMATS[fmt], group_bits.group_bits_for(fmt)
    assert got == {"s_g": f.block_bytes, "bpv": f.bits_per_value, "share": pytest.approx(f.metadata_share)}


def test_chapter_numbers() -> None:
    q2 = group_bits.group_bits_for("q2_K")
    assert (q2["s_g"], q2["bpv"], round(100 * q2["share"])) == (84, 2.625, 24)
    with pytest.raises(ValueError, match="fmt"):
        group_bits.group_bits_for("bf16")


def test_uniform_bytes_and_mean_bits() -> None:
    n = MODELS["qwen3-235b-a22b"].n_params
    codes, meta = group_bits.uniform_bytes(n, "q2_K")
    assert codes + meta == FORMATS["q2_K"].stored_bytes(n) and codes == n // 4
    assert group_bits.mean_bits_per_value(codes + meta, n) == 2.625
    assert group_bits.uniform_bytes(300, "q8_0") == (320, 20)  # whole groups: 10 of 32 values
    with pytest.raises(ValueError, match="n_values"):
        group_bits.mean_bits_per_value(1.0, 0)
