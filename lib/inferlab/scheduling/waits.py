"""Why a short request waits for a long one (section 8.2.2): the two waits of the linear iteration cost.

Fixed batching admits a group together and releases it together. Once the group's request with the
fewest outputs (G_min) is done, its slot stands empty while the request with the most (G_max) keeps
decoding, and a request waiting for that slot waits through those decodes too: with a group of two,
the G_max - G_min iterations the long request runs alone (``idle_slot_s``; ``IDLE_SLOT_SUM`` summed
token by token, ``IDLE_SLOT`` in closed form).

Continuous batching refills the slot at the next iteration boundary. The newcomer's prompt (c tokens
after h cached: the whole prompt in one piece unless it is chunked) then runs in the same iteration as
the running decodes, and each of them waits for that iteration to end. Against a plain decode
iteration its gap grows by t_tok c + t_pair N_pair(c, h) (``stall_s``; ``STALL``): the fixed part
t_0 is paid once for both kinds of work, which is also why merging them saves time overall.

Both follow from ``symbolic.ITERATION_TIME`` = t_0 + t_tok N_tok + t_pair N_pair, the cost
``IterationCost`` fits; the decode that follows output token j of a request with an L_in-token
prompt attends to L_in + j keys.
"""

from __future__ import annotations

import sympy as sp

from .._validate import instance, non_negative_int, positive_int
from ..models import causal_pairs
from ..symbolic import (CAUSAL_PAIRS, ITERATION_TIME, PIECE_ITERATION_TIME, L_d, N_pair, N_tok, c_new, c_pair, c_tok,
                        n_d, t_0)
from .iteration import IterationCost

__all__ = ["L_in", "G_min", "G_max", "j_out", "SOLO_GAP", "IDLE_SLOT_SUM", "IDLE_SLOT", "STALL_DIFFERENCE", "STALL",
           "idle_slot_s", "stall_s"]

L_in = sp.Symbol(r"L_{\mathrm{in}}", positive=True, integer=True)
G_min, G_max = sp.symbols(r"G_{\min} G_{\max}", positive=True, integer=True)
j_out = sp.Symbol("j", positive=True, integer=True)

#: The gap after output token j of a request decoding alone: one new token attending to L_in + j keys.
SOLO_GAP = ITERATION_TIME.subs({N_tok: 1, N_pair: L_in + j_out})
#: How long a fixed group of two keeps its first freed slot empty: the long request's gaps G_min ... G_max - 1.
IDLE_SLOT_SUM = sp.Sum(SOLO_GAP, (j_out, G_min, G_max - 1))
#: The same in closed form: the number of idle iterations times their mean length.
IDLE_SLOT = (G_max - G_min) * (t_0 + c_tok + c_pair * (L_in + (G_min + G_max - 1) / 2))

#: An iteration of n_d decodes (context L_d) that also runs a prompt piece of c after h, minus the same
#: decodes alone: what the piece adds to every running request's gap.
STALL_DIFFERENCE = PIECE_ITERATION_TIME - ITERATION_TIME.subs({N_tok: n_d, N_pair: n_d * (L_d + 1)})
#: The same in closed form: the piece's tokens and its causal pairs; t_0 and the decodes cancel.
STALL = c_tok * c_new + c_pair * CAUSAL_PAIRS


def idle_slot_s(cost: IterationCost, prompt_tokens: int, fewest_outputs: int, most_outputs: int) -> float:
    """Seconds a fixed group of two keeps its first freed slot empty (``IDLE_SLOT`` with ``cost``'s coefficients).

    The request with ``fewest_outputs`` ends; the one with ``most_outputs`` and a ``prompt_tokens``-token
    prompt, prefilled in the same iteration, then decodes alone until its last token:
    the sum over j = G_min ... G_max - 1 of ``cost.decode(1, L_in + j - 1)``. Zero when both want as many.
    """
    instance("cost", cost, IterationCost, "an IterationCost (the linear iteration model)")
    prompt = positive_int("prompt_tokens", prompt_tokens)
    fewest = positive_int("fewest_outputs", fewest_outputs)
    most = positive_int("most_outputs", most_outputs)
    if most < fewest:
        raise ValueError(f"most_outputs ({most}) must be at least fewest_outputs ({fewest})")
    n = most - fewest
    keys = n * prompt + (fewest + most - 1) * n // 2  # sum of L_in + j over the idle gaps, an exact integer
    return n * (cost.fixed_s + cost.per_token_s) + cost.per_pair_s * keys


def stall_s(cost: IterationCost, piece_tokens: int, cached_tokens: int = 0) -> float:
    """Seconds a prompt piece adds to the gap of every decode in its iteration (``STALL`` with ``cost``'s coefficients).

    ``piece_tokens`` (c) new prompt tokens after ``cached_tokens`` (h): t_tok c + t_pair (c h + c (c + 1) / 2).
    Under continuous batching the piece is a newcomer's whole prompt (h = 0).
    """
    instance("cost", cost, IterationCost, "an IterationCost (the linear iteration model)")
    c = positive_int("piece_tokens", piece_tokens)
    h = non_negative_int("cached_tokens", cached_tokens)
    return cost.per_token_s * c + cost.per_pair_s * causal_pairs(c, h)
