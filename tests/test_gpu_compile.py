"""torch.compile of the GPU measurements' decode step, through Inductor on the CPU (tens of seconds: kept apart).

The compiled decode must write new K/V in place into the pools: written through a view of one
layer's pool, Inductor clones that layer's pool and copies it back, two pool-sized temporaries
per layer (about 104 GB more than an H200 has at the full preset). Peak memory is read as the
process's peak resident set (VmHWM, reset through /proc/self/clear_refs), so this runs on Linux.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from inferlab.gpu.settings import TINY  # noqa: E402

MiB = 2**20
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not Path("/proc/self/clear_refs").exists(),
                                reason="peak memory is read from /proc (Linux)")


def _rss(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024


def peak_extra_bytes(fn) -> int:
    """Bytes the process's resident set grew to, above where it stood, while ``fn()`` ran."""
    fn()  # compiled, warm
    base = _rss("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    fn()
    return _rss("VmHWM") - base


@pytest.fixture
def compiled_env():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch._dynamo.reset()
    torch.set_num_threads(threads)


def test_compiled_decode_writes_the_pools_in_place(compiled_env) -> None:
    """One compiled step over 64 MiB per layer and pool: no pool-sized temporary, the eager step's logits and K/V.

    The step is ``model_runs.decode_fn``'s, compiled as decode_step compiles it for its ``compiled`` and
    ``graph+compiled`` rows (one compile serves both; the graph is captured from the compiled step on CUDA).
    """
    from inferlab.gpu.decoder import TorchDecoder
    from inferlab.gpu.model_runs import decode_fn

    dec = TorchDecoder.random(TINY, "cpu", "float32", seed=0)
    per_block = 4 * TINY.n_kv_heads * TINY.head_dim * 4  # block of 4 tokens, float32
    kc, vc = dec.new_cache(64 * MiB // per_block, 4)  # 64 MiB per layer and pool
    kc.normal_(), vc.normal_()  # resident pages, not zero pages
    tables = torch.randperm(kc.shape[1], generator=torch.Generator().manual_seed(1))[:6].reshape(2, 3)
    lens, tokens = torch.tensor([12, 12]), torch.tensor([5, 7])
    k_eager, v_eager = kc.clone(), vc.clone()
    want = dec.decode(tokens, tables, lens, k_eager, v_eager, full_blocks=True)

    step = decode_fn(dec, tokens, tables, lens, kc, vc, True, compiled=True)  # what decode_step's compiled paths time
    extra = peak_extra_bytes(step)
    assert extra < 16 * MiB, f"a compiled step took {extra / MiB:.0f} MiB beyond the pools (one layer's is 64 MiB)"
    torch.testing.assert_close(step(), want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(kc, k_eager, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(vc, v_eager, rtol=1e-4, atol=1e-4)


def test_the_measure_sees_a_write_through_a_view(compiled_env) -> None:
    """Control: the old write (into a view of one layer's pool) makes Inductor copy that layer's pool."""
    pool = torch.randn(2, 64 * MiB // 4 // 256, 256)  # two layers of 64 MiB
    slots, k = torch.tensor([3, 9]), torch.randn(2, 256)

    def old():
        layer = pool[1]
        layer.view(-1, 256)[slots] = k
        return layer[slots].sum()

    def new():
        pool.index_put_((torch.tensor([1]), slots), k)
        return pool[1][slots].sum()

    assert peak_extra_bytes(torch.compile(old, fullgraph=True)) > 48 * MiB
    assert peak_extra_bytes(torch.compile(new, fullgraph=True)) < 16 * MiB


def test_the_real_compiler_errors_are_told_apart() -> None:
    from torch._dynamo.exc import BackendCompilerFailed
    from torch._inductor.exc import InvalidCxxCompiler, TritonMissing

    from inferlab.gpu.model_runs import no_compiler

    assert no_compiler(BackendCompilerFailed(None, InvalidCxxCompiler(), None))
    assert no_compiler(BackendCompilerFailed(None, TritonMissing("x.py"), None))
    assert not no_compiler(BackendCompilerFailed(None, torch.OutOfMemoryError("out of memory"), None))


def test_lower_right_causal_bias_equals_the_boolean_mask() -> None:
    """On CUDA a later chunk's mask is causal_lower_right (flash attention takes it); on the CPU the same boolean mask."""
    from inferlab.gpu.attention import chunk_attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, generator=g) for shape in ((5, 8, 16), (21, 2, 16), (21, 2, 16)))
    torch.testing.assert_close(chunk_attention(q, k, v, bias=True), chunk_attention(q, k, v, bias=False))
