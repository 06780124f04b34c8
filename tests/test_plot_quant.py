"""Figures and explorers of section 8.4 render, and draw what the library computes."""

import numpy as np
import pytest
from matplotlib.figure import Figure

from inferlab.book.plot import quant as qp
from inferlab.book.plot import to_png
from inferlab.compression import offload as off
from inferlab.compression import retrieval
from inferlab.example import MODEL
from inferlab.units import MiB


def test_block_bytes_from_real_encodings() -> None:
    t = qp.block_bytes(qp.weight_like(32))
    assert t["total bytes"].to_dict() == {"BF16": 64, "q8_0": 34, "q4_0": 18}
    assert t["scale bytes"].to_dict() == {"BF16": 0, "q8_0": 2, "q4_0": 2}


def test_format_errors_order() -> None:
    t = qp.format_errors(qp.weight_like(1 << 12, kind="heavy"))
    assert list(t["bits per value"].round(3)) == [16.0, 8.008, 8.5, 4.5, 2.625]
    e = t["relative RMS error"]
    assert e["bf16"] < e["q8_0"] < e["fp8_e4m3"] < e["q4_0"] < e["q2_K"]
    with pytest.raises(ValueError, match="kind"):
        qp.weight_like(8, kind="uniform")


def test_q2_K_regions_cover_the_block() -> None:
    r = qp.q2_K_regions()
    assert r["bytes"].sum() == 84 and (r["first byte"] + r["bytes"]).tolist() == [16, 80, 82, 84]


def test_prefetch_timelines_match_the_simulator() -> None:
    res = qp.prefetch_timelines()
    assert round(res[2].step_s * 1e3, 1) == 42.5 and res[1].step_s > res[2].step_s


@pytest.mark.parametrize("draw", [
    lambda: qp.draw_q2_K_block(qp.weight_like(256)),
    lambda: qp.draw_error_vs_bits(1 << 12),
    lambda: qp.weight_fit_view(32768, 0.0),
    lambda: qp.draw_block_bytes(qp.weight_like(32)),
    lambda: qp.kv_format_view(1024, "fp8_e4m3", 1.0),
    lambda: qp.draw_itl_crossover(),
    lambda: qp.draw_offload_memory([off.OffloadPlan(MODEL.ffn_layer_bytes(), 9, n) for n in (1, 2)]),
    lambda: qp.draw_prefetch_timelines(),
    lambda: qp.draw_copy_vs_bandwidth(2592 * MiB),
    lambda: qp.offload_view(900, 1, 4),
    lambda: qp.compression_view(0.95, 10, 900),
    lambda: qp.draw_task_grids(qp.chapter_grids()),
    lambda: qp.retrieval_view("q8_0", "fp8_e4m3", "n512"),
])
def test_figures_render(draw) -> None:
    fig = draw()
    assert isinstance(fig, Figure) and to_png(fig)[:4] == b"\x89PNG"


def test_chapter_grids_totals() -> None:
    g = qp.chapter_grids()
    assert {k: int(v.correct.sum()) for k, v in g.items()} == {"BF16 KV": 28, "FP8 KV + BF16 Q": 28}
    assert sorted(g["BF16 KV"].run.unique()) == ["c1-1", "c1-2", "c4-1", "c4-2"]
    assert np.all(g["BF16 KV"][g["BF16 KV"].task == 5].correct == 0)


def test_retrieval_view_draws_its_pair_as_a_lone_run_would() -> None:
    docs = [d for d in retrieval.chapter_like_documents(0) if d.name.startswith("n512")]
    g = retrieval.run_grid(docs, 4, ["q8_0"], ["fp8_e4m3"])
    fig = qp.retrieval_view("q8_0", "fp8_e4m3", "n512")
    ax = fig.axes[1]
    assert ax.get_title().endswith(f"{int(g.correct.sum())}/{len(g)} correct")
    circles, crosses = ax.get_lines()
    right = {(r - 1, t) for r, t in zip(g.run[g.correct], g.task[g.correct])}  # runs are columns 0..3
    wrong = {(r - 1, t) for r, t in zip(g.run[~g.correct], g.task[~g.correct])}
    assert set(zip(circles.get_xdata(), circles.get_ydata())) == right
    assert set(zip(crosses.get_xdata(), crosses.get_ydata())) == wrong
    with pytest.raises(ValueError, match="kv_formats"):
        qp.retrieval_view("q2_K")
