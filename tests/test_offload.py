"""Weight offloading: capacity, copy time, the prefetch pipeline and compressed transfers (8.4.3)."""

import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.compression import offload as off
from inferlab.hardware import ACCELERATORS
from inferlab.models import MODELS
from inferlab.units import GB, MiB

QWEN = MODELS["qwen3-8b"]
LAYERS = off.offloaded_layers(36, 4)
PCIE = ACCELERATORS["rtx-pro-6000"].host_link_bandwidth
C2C = ACCELERATORS["gh200"].host_link_bandwidth
LAYER_S = 26.26e-3 / 36


def plan(n_buffers: int) -> off.OffloadPlan:
    return off.OffloadPlan(QWEN.ffn_layer_bytes(), len(LAYERS), n_buffers)


def test_capacity() -> None:
    assert len(LAYERS) == 9 and QWEN.ffn_layer_bytes() == 288 * MiB
    assert plan(1).freed_bytes == 2592 * MiB
    assert (plan(1).net_bytes, plan(2).net_bytes) == (2304 * MiB, 2016 * MiB)
    assert (plan(1).extra_requests(1152 * MiB), plan(2).extra_requests(1152 * MiB)) == (2, 1)
    assert (plan(1).extra_requests(1188 * MiB), plan(2).extra_requests(1188 * MiB)) == (1, 1)
    with pytest.raises(ValueError, match="n_buffers"):
        off.OffloadPlan(1.0, 3, 0)


def test_copy_time() -> None:
    d = plan(1).copy_bytes_per_step
    assert round(d / GB, 2) == 2.72
    t_pcie, t_c2c = off.copy_time(d, PCIE), off.copy_time(d, C2C)
    assert round(t_pcie * 1e3, 1) == 42.5 and round(t_c2c * 1e3, 1) == 6.0
    assert round(255 * t_pcie, 1) == 10.8 and round(255 * t_c2c, 2) == 1.54
    assert round(off.throughput_ceiling(4, t_pcie)) == 94
    assert 255 * t_pcie > 7.0 > 255 * t_c2c
    assert round(off.min_link_bandwidth(d, 255, 1.0) / GB) == 693
    with pytest.raises(ValueError, match="link_bandwidth"):
        off.copy_time(1.0, -1.0)


def test_compressed_transfer() -> None:
    s = 96 * MiB
    assert round(off.copy_time(s, PCIE) * 1e3, 2) == 1.57
    assert round(off.copy_time(s / 4, PCIE) * 1e3, 2) == 0.39
    assert round((off.copy_time(s, PCIE) - off.copy_time(s / 4, PCIE)) * 1e3, 2) == 1.18
    r = off.decompress_threshold(0.25, PCIE)
    assert round(r / GB, 1) == 85.3
    # just above the threshold compressing wins, just below it loses
    assert off.compressed_transfer_time(s, 0.25, PCIE, 1.01 * r) < off.copy_time(s, PCIE)
    assert off.compressed_transfer_time(s, 0.25, PCIE, 0.99 * r) > off.copy_time(s, PCIE)
    ineq, thr = off.decompress_threshold_symbolic()
    syms = {str(x): x for x in thr.free_symbols}
    assert float(thr.subs({syms[r"\rho"]: 0.25, syms[r"\beta_{\mathrm{link}}"]: 64})) == pytest.approx(85.333, 1e-4)
    with pytest.raises(ValueError, match="ratio"):
        off.decompress_threshold(1.0, PCIE)


def test_decompress_threshold_symbolic_is_sympys_full_solve() -> None:
    ineq, thr = off.decompress_threshold_symbolic()
    syms = {str(x): x for x in ineq.free_symbols}
    rho, link, rate = syms[r"\rho"], syms[r"\beta_{\mathrm{link}}"], syms[r"R_{\mathrm{dec}}"]
    assert thr == link / (1 - rho)
    full = sp.solve(sp.Eq(ineq.lhs, ineq.rhs), rate)  # checked and simplified (this one imports sympy.physics)
    assert len(full) == 1 and sp.cancel(full[0] - thr) == 0


def test_decompress_threshold_symbolic_leaves_sympy_physics_out() -> None:
    code = ("import sys; from inferlab.compression import offload; offload.decompress_threshold_symbolic(); "
            "assert 'sympy.physics' not in sys.modules, 'sympy.physics imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_pipeline_pcie_and_c2c() -> None:
    per_layer_copy = 288 * MiB
    pcie1 = off.simulate_prefetch(LAYER_S, 36, LAYERS, off.copy_time(per_layer_copy, PCIE), 1, n_steps=3)
    pcie2 = off.simulate_prefetch(LAYER_S, 36, LAYERS, off.copy_time(per_layer_copy, PCIE), 2, n_steps=3)
    # two buffers keep the link busy: a step is the link time of 9 copies (42.5 ms)
    assert round(pcie2.step_s * 1e3, 1) == 42.5
    # one buffer serializes each copy behind the previous offloaded layer's compute
    assert pcie1.step_s == pytest.approx(9 * (off.copy_time(per_layer_copy, PCIE) + LAYER_S))
    c2c1 = off.simulate_prefetch(LAYER_S, 36, LAYERS, off.copy_time(per_layer_copy, C2C), 1, n_steps=3)
    assert c2c1.step_s == pytest.approx(26.26e-3)  # copies hidden behind compute after the first
    assert c2c1.stall_s == pytest.approx(0.0, abs=1e-12)  # the first copy (0.67 ms) lands before layer 3 starts
    assert pcie2.stall_s > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.floats(1e-4, 1e-2), st.floats(1e-4, 1e-2), st.integers(1, 12), st.integers(1, 3))
def test_pipeline_respects_both_ordering_rules(n_buffers, comp, copy, every, steps) -> None:
    layers = off.offloaded_layers(12, every)
    res = off.simulate_prefetch(comp, 12, layers, copy, n_buffers, n_steps=steps)
    ev = res.events
    copies = ev[ev.kind == "copy"].reset_index(drop=True)
    computes = ev[(ev.kind == "compute") & (ev.buffer >= 0)].reset_index(drop=True)
    assert len(copies) == len(computes) == len(layers) * steps
    # rule 1: compute reads a buffer only after its copy completed
    assert (computes.start_s.to_numpy() >= copies.end_s.to_numpy() - 1e-15).all()
    # rule 2: a copy overwrites a buffer only after compute is done with the previous layer in it
    prev = computes.end_s.to_numpy()[:-n_buffers] if len(computes) > n_buffers else np.array([])
    assert (copies.start_s.to_numpy()[n_buffers:] >= prev - 1e-15).all()
    assert (copies.buffer.to_numpy() == np.arange(len(copies)) % n_buffers).all()
    # the link carries one copy at a time; compute runs the layers one after another
    assert (np.diff(copies.start_s) >= copy - 1e-12).all()
    allc = ev[ev.kind == "compute"]
    assert (allc.start_s.to_numpy()[1:] >= allc.end_s.to_numpy()[:-1] - 1e-15).all()
    # never faster than the compute alone or the link alone
    assert res.total_s >= max(steps * 12 * comp, len(copies) * copy) - 1e-12
    # more buffers never make it slower
    more = off.simulate_prefetch(comp, 12, layers, copy, n_buffers + 1, n_steps=steps)
    assert more.total_s <= res.total_s + 1e-12


def test_pipeline_bad_input() -> None:
    with pytest.raises(ValueError, match="offloaded"):
        off.simulate_prefetch(1e-3, 4, [4], 1e-3, 1)
    with pytest.raises(ValueError, match="layer_compute_s"):
        off.simulate_prefetch(0.0, 4, [1], 1e-3, 1)
