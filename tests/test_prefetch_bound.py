"""The prefetch pipeline's step time in closed form against the event simulator (8.4.3)."""

import numpy as np
import pytest

from inferlab.compression import offload as off
from inferlab.compression import prefetch_bound as pb
from inferlab.hardware import NVLINK_C2C, PCIE_GEN5_X16
from inferlab.models import MODELS
from inferlab.units import GB, ms

LAYER_S = 26.26e-3 / 36
FFN = MODELS["qwen3-8b"].ffn_layer_bytes()


@pytest.mark.parametrize("every", [1, 2, 3, 4, 5, 7, 9, 36])
@pytest.mark.parametrize("n_buffers", [1, 2, 3])
def test_closed_form_equals_the_simulator(every: int, n_buffers: int) -> None:
    layers = off.offloaded_layers(36, every)
    for copy in np.geomspace(0.05 * LAYER_S, 20 * LAYER_S, 9):
        sim = off.steady_step_time(LAYER_S, 36, layers, float(copy), n_buffers)
        assert pb.step_time_closed_form(LAYER_S, 36, layers, float(copy), n_buffers) == pytest.approx(sim, rel=1e-9)


def test_running_example() -> None:
    layers = off.offloaded_layers(36, 4)
    assert pb.resident_gaps(36, layers) == [3] * 9
    pcie = off.copy_time(FFN, PCIE_GEN5_X16)
    assert round(pb.step_time_closed_form(LAYER_S, 36, layers, pcie, 1) / ms, 1) == 49.0
    assert round(pb.step_time_closed_form(LAYER_S, 36, layers, pcie, 2) / ms, 1) == 42.5
    c2c = off.copy_time(FFN, NVLINK_C2C)
    assert round(pb.step_time_closed_form(LAYER_S, 36, layers, c2c, 1) / ms, 2) == 26.26
    assert round(pb.hiding_bandwidth(FFN, LAYER_S, 36, layers, 2) / GB, 1) == 103.5
    assert round(pb.hiding_bandwidth(FFN, LAYER_S, 36, layers, 1) / GB) == 138
    assert pb.hiding_bandwidth(FFN, LAYER_S, 36, list(range(36)), 1) == float("inf")


def test_hiding_bandwidth_hides() -> None:
    for every in (2, 3, 4, 6):
        layers = off.offloaded_layers(36, every)
        for nb in (1, 2):
            bw = pb.hiding_bandwidth(FFN, LAYER_S, 36, layers, nb)
            fast = off.steady_step_time(LAYER_S, 36, layers, off.copy_time(FFN, 1.001 * bw), nb)
            slow = off.steady_step_time(LAYER_S, 36, layers, off.copy_time(FFN, 0.99 * bw), nb)
            assert fast == pytest.approx(36 * LAYER_S) and slow > 36 * LAYER_S


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="offloaded"):
        pb.resident_gaps(36, [])
    with pytest.raises(ValueError, match="offloaded"):
        pb.resident_gaps(36, [3, 36])
    with pytest.raises(ValueError, match="n_buffers"):
        pb.step_time_closed_form(LAYER_S, 36, [3], 1e-3, 0)
