"""The page glue: plain values in, clear errors for what the book cannot print."""

import math

import numpy as np
import pytest

from inferlab import book


def test_numpy_scalars_become_plain_python() -> None:
    out = book.glue(a=np.float64(1.5), b=np.int64(3), c="x")
    assert out == {"a": 1.5, "b": 3, "c": "x"}
    assert type(out["a"]) is float and type(out["b"]) is int


@pytest.mark.parametrize("bad", [math.nan, math.inf, np.float32("nan"), None, [1], True])
def test_rejects_what_cannot_be_printed(bad: object) -> None:
    with pytest.raises(ValueError, match="ttft"):
        book.glue(ttft=bad)
