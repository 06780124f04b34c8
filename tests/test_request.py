"""The scheduler's Request: every field checked at construction, so a bad one fails there and not inside simulate."""

import math
from fractions import Fraction

import numpy as np
import pytest

from inferlab.scheduling import Request, simulate


@pytest.mark.parametrize("name", [["a"], {"a": 1}, {"a"}, ("a", ["b"]), None, 1.5, True, np.bool_(False), b"a"],
                         ids=["list", "dict", "set", "tuple-with-list", "none", "float", "bool", "numpy-bool", "bytes"])
def test_a_name_must_be_a_str_or_an_int(name) -> None:
    with pytest.raises(ValueError, match="name"):
        Request(name, 0.0, 16, 2)


def test_str_and_int_names_key_the_results() -> None:
    reqs = [Request("a", 0.0, 16, 2), Request(7, 0.0, 16, 2), Request(np.int64(8), 0.0, 16, 2)]
    s = simulate(reqs, "continuous", max_running=4)
    assert list(s.served) == ["a", 7, 8] and all(s.served[r.name].times.output_tokens == 2 for r in reqs)


@pytest.mark.parametrize("arrival_s", [-1.0, math.nan, math.inf, -math.inf, True, "0", None, 1j],
                         ids=["negative", "nan", "inf", "-inf", "bool", "str", "none", "complex"])
def test_arrival_must_be_a_finite_time_at_or_after_zero(arrival_s) -> None:
    with pytest.raises(ValueError, match="arrival_s"):
        Request("a", arrival_s, 16, 2)


@pytest.mark.parametrize("field", ["prompt_tokens", "output_tokens"])
@pytest.mark.parametrize("count", [0, -3, 1.5, 2.0, True, "4", None, math.nan], ids=str)
def test_token_counts_must_be_positive_ints(field, count) -> None:
    fields = {"prompt_tokens": 16, "output_tokens": 2, field: count}
    with pytest.raises(ValueError, match=field):
        Request("a", 0.0, **fields)


def test_numbers_of_other_types_are_stored_as_plain_floats_and_ints() -> None:
    r = Request("a", Fraction(1, 4), np.int64(16), np.int32(2))
    assert (type(r.arrival_s), type(r.prompt_tokens), type(r.output_tokens)) == (float, int, int)
    assert r == Request("a", 0.25, 16, 2)
    assert type(Request("a", 0, 16, 2).arrival_s) is float
