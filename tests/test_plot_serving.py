"""Figures of section 8.6: legends that match the bars drawn."""
import pandas as pd

from inferlab.datasets import published
from inferlab.plot import serving as splot


def _ours() -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples([(1, "one-at-a-time"), (1, "chunked"), (4, "one-at-a-time"), (4, "chunked")],
                                      names=["arrival_rate_per_s", "policy"])
    return pd.DataFrame({"completion_rps": [0.9, 1.0, 1.4, 2.2], "goodput_rps": [0.8, 0.9, 0.4, 0.8]}, index=index)


def test_goodput_legend_names_each_policy_and_the_experiment():
    chapter = published("goodput_8_6_2").set_index(["arrival_rate_per_s", "policy"])
    fig = splot.goodput_view(_ours(), chapter)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["ours, single", "ours, batched", "experiment 8-9 (median)"]
    colors = [h.get_facecolor() for h in fig.axes[1].get_legend().legend_handles[:2]]
    assert colors[0] != colors[1]


def test_goodput_legend_without_the_experiment():
    fig = splot.goodput_view(_ours())
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert labels == ["ours, single", "ours, batched"]
