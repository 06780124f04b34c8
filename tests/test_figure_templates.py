"""new_figure's templates: a redraw unpickles a kept empty figure instead of building Axes and ticks again."""

from __future__ import annotations

import io
import pickle

import matplotlib as mpl
import numpy as np
import pytest
from PIL import Image

import inferlab.book.plot as P
from inferlab.book.plot import explorer_factories, new_figure, to_png


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)))


@pytest.mark.parametrize("name", sorted(explorer_factories()))
def test_every_explorer_draws_the_same_picture_from_a_template(name):
    ex = explorer_factories()[name]()
    P._templates.clear()
    built = _pixels(to_png(ex.render()))  # first request of each shape: built
    ex.render()  # second: built, then kept pickled
    from_template = _pixels(to_png(ex.render()))  # third: unpickled
    assert any(t.blob is not None for t in P._templates.values())
    assert from_template.shape == built.shape and (from_template == built).all()


def test_each_request_gets_its_own_figure():
    figs = [new_figure(1, 2, width=6.1, height=2.9) for _ in range(4)]
    assert len({id(f) for f, _ in figs}) == 4 and len({id(a) for _, axes in figs for a in axes}) == 8
    (first, (ax, _)), (last, (lx, _)) = figs[-2], figs[-1]  # both unpickled
    ax.plot([0, 1], [0, 1])
    ax.set_xscale("log")
    assert not lx.lines and lx.get_xscale() == "linear" and first is not last
    assert len(lx.xaxis.majorTicks) >= P._TEMPLATE_TICKS  # ticks come made


def test_a_change_of_rcparams_is_not_hidden_by_a_template():
    for _ in range(3):
        new_figure(width=5.3, height=2.1)
    with mpl.rc_context({"axes.labelsize": 17, "axes.facecolor": "#ffeeee"}):
        _, ax = new_figure(width=5.3, height=2.1)
        assert ax.get_facecolor()[:3] == mpl.colors.to_rgb("#ffeeee") and ax.xaxis.label.get_size() == 17
    _, ax = new_figure(width=5.3, height=2.1)
    assert ax.get_facecolor()[:3] == (1.0, 1.0, 1.0) and ax.xaxis.label.get_size() == P.STYLE["axes.labelsize"]


def test_unhashable_options_still_build_a_figure():
    fig, axes = new_figure(2, 1, width=5.0, height=4.0, gridspec_kw={"height_ratios": [2, 1]})
    assert len(axes) == 2 and axes[0].get_position().height > axes[1].get_position().height


def test_templates_stay_bounded():
    for i in range(P._MAX_TEMPLATES + 5):
        for _ in range(2):
            new_figure(width=3 + 0.01 * i, height=2)
    assert len(P._templates) <= P._MAX_TEMPLATES
    assert all(isinstance(pickle.loads(t.blob), mpl.figure.Figure) for t in P._templates.values() if t.blob)


def test_a_figure_pickle_cannot_copy_is_built_every_time(monkeypatch):
    def refuse(_obj):
        raise TypeError("cannot pickle")

    monkeypatch.setattr(P.pickle, "dumps", refuse)
    figs = [new_figure(width=4.4, height=2.2) for _ in range(3)]
    assert len({id(f) for f, _ in figs}) == 3 and all(len(f.axes) == 1 for f, _ in figs)
    (template,) = [t for k, t in P._templates.items() if k[2:4] == (4.4, 2.2)]
    assert template.blob == b""


def _transform_links(fig) -> list[tuple[int, object]]:
    """(key, parent) of every live parent link of every transform reachable from ``fig``."""
    from matplotlib.transforms import TransformNode

    seen, stack, links = set(), [fig], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, TransformNode):
            links += [(k, ref()) for k, ref in obj._parents.items() if ref() is not None]
        if isinstance(obj, dict):
            stack += obj.values()
        elif isinstance(obj, (list, tuple)):
            stack += obj
        elif type(obj).__module__.split(".")[0] in ("matplotlib", "inferlab") and hasattr(obj, "__dict__"):
            stack += vars(obj).values()
    return links


def test_an_unpickled_figure_keys_every_transform_link_by_its_parents_id():
    """Matplotlib keys a transform's parents under the ids they had when pickled: a transform made later
    with such an id would take an unpickled parent's place, and that parent would then draw with stale
    limits. Templates are unpickled with each link under its parent's id in this process."""
    for _ in range(3):
        fig, ax = new_figure(width=5.7, height=2.4)  # the third is unpickled from the template
    links = _transform_links(fig)
    assert len(links) > 100 and all(key == id(parent) for key, parent in links)
    (template,) = [t for k, t in P._templates.items() if k[2:4] == (5.7, 2.4)]
    plain = pickle.loads(template.blob)
    assert any(key != id(parent) for key, parent in _transform_links(plain))  # Matplotlib's own unpickling


def test_a_parent_taking_a_stale_key_leaves_the_unpickled_figure_drawing_old_limits():
    """What the keys above prevent: the failure a colliding id caused now and then, forced here."""
    import weakref

    from matplotlib.transforms import Affine2D

    def drawn(fig, ax) -> bytes:
        ax.bar([0, 1], [1, 2])
        to_png(fig)
        ax.set_ylim(0, 5)  # the view moves, as a slider's redraw in place moves it
        return to_png(fig)

    for _ in range(3):
        new_figure(width=5.9, height=2.4)
    (template,) = [t for k, t in P._templates.items() if k[2:4] == (5.9, 2.4)]
    built, ax = P._build_figure(1, 1, 5.9, 2.4, {})
    fig = pickle.loads(template.blob)
    newcomer = Affine2D()
    for node in (fig.axes[0].transData, fig.axes[0].transLimits, fig.axes[0].viewLim):
        for key, ref in list(node._parents.items()):
            if ref() is not None and key != id(ref()):
                node._parents[key] = weakref.ref(newcomer)  # as set_children does for a parent of that id
    assert drawn(fig, fig.axes[0]) != drawn(built, ax)
    fig = P.pickled.loads(template.blob)
    assert not any(key != id(parent) for key, parent in _transform_links(fig))  # no stale key to take
    assert drawn(fig, fig.axes[0]) == drawn(*P._build_figure(1, 1, 5.9, 2.4, {}))
