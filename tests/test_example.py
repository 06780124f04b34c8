"""The running example is defined once, as the chapter states it."""

import pytest

from inferlab import example
from inferlab.units import GiB


def test_running_example() -> None:
    assert example.MODEL.name == "qwen3-8b" and example.ACCELERATOR.name == "rtx-pro-6000"
    assert example.KV_BUDGET_BYTES == 12 * GiB and example.INSTANCE_BYTES == 32 * GiB
    assert (example.SHORT.prompt_tokens, example.SHORT.output_tokens, example.SHORT.shared_prefix_tokens) == (2048, 256, 0)
    assert (example.LONG.prompt_tokens, example.LONG.output_tokens, example.LONG.shared_prefix_tokens) == (8192, 256, 6144)
    assert example.DEADLINE_S == 7.0
    split = example.memory_split()["GiB"]
    assert round(split["weights (BF16)"], 1) == 15.3
    assert round(split["activations, graph replay, workspace"], 1) == 4.7
    assert example.request_classes().loc["prompt tokens"].tolist() == [2048, 8192]


def test_request_class_validates() -> None:
    with pytest.raises(ValueError, match="shared_prefix_tokens"):
        example.RequestClass("x", 10, 5, shared_prefix_tokens=11)
    with pytest.raises(ValueError, match="output_tokens"):
        example.RequestClass("x", 10, 0)
