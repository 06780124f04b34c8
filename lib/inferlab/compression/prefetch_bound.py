"""The step time of the prefetch pipeline in closed form (section 8.4.3).

A step computes n_layer layers of t_layer each; n_off of them are offloaded and each needs a copy of
t_copy over the link before it runs. With one buffer, the copy of an offloaded layer can start only once
the previous offloaded layer has been computed, so it overlaps only the g resident layers between the two
and stalls compute for max(0, t_copy - g t_layer). With two or more buffers the next copy runs while the
current offloaded layer computes, and the step is set by the busier of the two resources:

    T_step(1 buffer)  = n_layer t_layer + sum over offloaded layers of max(0, t_copy - g t_layer)
    T_step(2+ buffers) = max(n_layer t_layer, n_off t_copy)

``offload.simulate_prefetch`` schedules the same two ordering rules event by event; its steady step equals
these forms (tests/test_prefetch_bound.py compares them over offload spacings, copy times and buffer counts).
"""

from __future__ import annotations

from .._validate import items, non_negative_int, positive, positive_int

__all__ = ["resident_gaps", "step_time_closed_form", "hiding_bandwidth"]


def resident_gaps(n_layers: int, offloaded: list[int]) -> list[int]:
    """Resident layers computed between each offloaded layer and the offloaded one before it (cyclic over steps)."""
    positive_int("n_layers", n_layers)
    layers = sorted(non_negative_int("offloaded", i) for i in items("offloaded", offloaded))
    if not layers or layers[-1] >= n_layers or len(set(layers)) != len(layers):
        raise ValueError(f"offloaded must hold distinct layer indices in [0, {n_layers}), at least one")
    return [layer - (layers[i - 1] if i else layers[-1] - n_layers) - 1 for i, layer in enumerate(layers)]


def step_time_closed_form(layer_s: float, n_layers: int, offloaded: list[int], copy_s: float,
                          n_buffers: int) -> float:
    """Steady step time (s) of the prefetch pipeline, from the closed forms of the module docstring."""
    positive("layer_s", layer_s)
    positive("copy_s", copy_s)
    gaps = resident_gaps(n_layers, offloaded)
    compute = n_layers * layer_s
    if positive_int("n_buffers", n_buffers) == 1:
        return compute + sum(max(0.0, copy_s - g * layer_s) for g in gaps)
    return max(compute, len(gaps) * copy_s)


def hiding_bandwidth(layer_bytes: float, layer_s: float, n_layers: int, offloaded: list[int], n_buffers: int) -> float:
    """Lowest link bandwidth (B/s) at which the step stays n_layer t_layer: every copy hidden behind compute.

    One buffer: each copy must fit behind the fewest resident layers before its layer, t_copy <= g_min t_layer
    (infinite when two offloaded layers are adjacent). Two or more: n_off t_copy <= n_layer t_layer.
    """
    positive("layer_bytes", layer_bytes)
    positive("layer_s", layer_s)
    gaps = resident_gaps(n_layers, offloaded)
    if positive_int("n_buffers", n_buffers) == 1:
        return float("inf") if min(gaps) == 0 else layer_bytes / (min(gaps) * layer_s)
    return len(gaps) * layer_bytes / (n_layers * layer_s)
