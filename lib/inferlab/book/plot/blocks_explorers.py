"""The explorers of section 8.3 (notebooks display them; tests sweep every ``*_explorer``)."""

from __future__ import annotations

from inferlab.kvcache.scenarios import copy_on_write_steps, refcount_steps

from ..widgets import Explorer, choice, explore, float_slider, int_slider
from . import blocks as b


def paged_allocation_explorer() -> Explorer:
    """The 9/13/5/15-token example paged with a chosen block size (8.3.1)."""
    return explore(b.paged_allocation_view, grid=dict(block_size=range(1, 17)), block_size=int_slider("block size", 1, 16, 4, unit="tokens"))


def refcount_explorer() -> Explorer:
    """Step through Figure 8-14's reference counts."""
    return explore(b.refcount_view, step=int_slider("step", 0, len(refcount_steps()) - 1, 0))


def copy_on_write_explorer() -> Explorer:
    """Step through Figure 8-15's copy-on-write of a shared tail block."""
    return explore(b.copy_on_write_view, step=int_slider("step", 0, len(copy_on_write_steps()) - 1, 0))


def branch_sharing_explorer() -> Explorer:
    """References against physical blocks for branches forked after a shared prefix (8.3.2)."""
    return explore(
        b.branch_sharing_view,
        grid=dict(branches=(1, 2, 4, 8, 12, 16), prefix_tokens=(0, 512, 1024, 1520, 1528, 2048, 4096),
                  block_size=(1, 4, 8, 16, 32, 64)),
        branches=int_slider("branches", 1, 16, 4),
        prefix_tokens=int_slider("prefix length", 0, 4096, 1520, step=8, unit="tokens"),
        block_size=int_slider("block size", 1, 64, 16, unit="tokens"),
    )


def shared_batch_explorer() -> Explorer:
    """Long requests stored independently against sharing a prefix, in the 12 GiB budget (8.3.2)."""
    return explore(
        b.shared_batch_view, b.update_shared_batch,
        grid=dict(prefix_tokens=range(0, 8193, 1024), block_size=(1, 2, 4, 8, 16, 32, 64)),
        prefix_tokens=int_slider("shared prefix", 0, 8192, 6144, step=256, unit="tokens"),
        block_size=int_slider("block size", 1, 64, 16, unit="tokens"),
    )


def snapshot_explorer() -> Explorer:
    """Snapshot spacing of a hybrid model against recomputed tokens and storage (8.3.3)."""
    return explore(b.snapshot_view, b.update_snapshot, grid=dict(interval=(512, 1024, 2048, 4096, 8192, 16384)),
                   interval=int_slider("snapshot interval", 512, 16_384, 4096, step=512, unit="tokens"))


def value_explorer() -> Explorer:
    """V_h of the 6144-token prefix against link bandwidth, hit probability and maintenance (8.3.4)."""
    return explore(b.value_view, b.update_value,
                   grid=dict(link_gb_per_s=(4, 8, 16, 32, 64, 128), p_hit=(0, 0.25, 0.5, 0.75, 1),
                             maintain_per_fetch=(0, 0.5, 1, 2, 4, 8, 16)),
                   link_gb_per_s=float_slider("host link", 4, 128, 64, 4, unit="GB/s"),
                   p_hit=float_slider("hit probability", 0, 1, 0.5, 0.01),
                   maintain_per_fetch=float_slider("maintenance", 0, 16, 1, 0.5, unit="x T_fetch"))


def keep_or_recompute_explorer() -> Explorer:
    """T_rec / T_fetch of every prefix length against the line above which keeping pays (8.3.4)."""
    return explore(b.keep_or_recompute_view, b.update_keep_or_recompute,
                   grid=dict(link_gb_per_s=(4, 8, 16, 32, 64, 128), p_hit=(0.01, 0.1, 0.25, 0.5, 0.75, 1),
                             maintain_per_fetch=(0, 1, 2, 4, 6, 8, 9, 10, 12, 16)),
                   link_gb_per_s=float_slider("host link", 4, 128, 8, 4, unit="GB/s"),
                   p_hit=float_slider("hit probability", 0.01, 1, 0.5, 0.01),
                   maintain_per_fetch=float_slider("maintenance", 0, 16, 1, 0.5, unit="x T_fetch"))


def cache_choice_explorer() -> Explorer:
    """One prefix A against three prefixes B in 864 MiB, each with its own hit probability (Figure 8-22)."""
    # A's hit probability in hundredths around even odds, where the choice flips (the section's "Try it")
    return explore(b.cache_choice_view,
                   grid=dict(link_gb_per_s=(8, 16, 32, 64, 128), p_b=(0, 0.25, 0.5, 0.75, 1),
                             p_a=(0, 0.25, *(round(0.4 + i / 100, 2) for i in range(11)), 0.75, 1)),
                   link_gb_per_s=float_slider("host link", 8, 128, 64, 8, unit="GB/s"),
                   p_a=float_slider("hit probability of A", 0, 1, 0.5, 0.01),
                   p_b=float_slider("hit probability of each B", 0, 1, 0.5, 0.01))


def pool_explorer() -> Explorer:
    """Hit tokens of the synthetic agent replay against the KV pool size (8.3.4)."""
    return explore(b.pool_view, b.update_pool, pool_gib=choice("KV pool (GiB)", list(b.POOL_GRID_GIB), 6.0))
