"""Section 8.5: verification rules, exactness (sympy and chi-square), and every number of the round arithmetic."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import speculative as S
from inferlab.calibration import PREFILL_MFU_BATCH1
from inferlab.datasets import published
from inferlab.example import ACCELERATOR, MODEL
from inferlab.speculative import cost as C
from inferlab.speculative import symbolic as Y
from inferlab.speculative.goodness_of_fit import chi_square, chi_square_critical, fits
from inferlab.units import GB, ms

PLAIN = 26.26 * ms  # batch-1 2K decode step on the RTX PRO 6000 (experiment 8-1)
ROUND = PLAIN + 0.1 * ms  # verification plus the 0.1 ms context lookup
AAAA, BBBB = [0.25] * 4, [0.75] * 4


# ---- greedy verification ---------------------------------------------------------------------
def test_figure_8_29_two_accepted_then_a_correction():
    v = S.greedy_verify(list("abcd"), list("abxdy"))
    assert v.accepted == 2 and v.emitted == ("a", "b", "x") and v.rejected == ("c", "d")
    assert v.last == "x" and not v.bonus


def test_all_accepted_gives_the_bonus_token_and_none_accepted_still_emits_one():
    full = S.greedy_verify([3, 1, 4], [3, 1, 4, 9])
    assert full.bonus and full.emitted == (3, 1, 4, 9)
    none = S.greedy_verify([3, 1, 4], [7, 1, 4, 9])  # later matches do not count after a mismatch
    assert none.accepted == 0 and none.emitted == (7,)
    assert S.greedy_verify([], [5]).emitted == (5,)


def test_greedy_verify_rejects_a_target_of_the_wrong_length():
    with pytest.raises(ValueError, match="target"):
        S.greedy_verify([1, 2], [1, 2])
    with pytest.raises(ValueError, match="accepted"):
        S.Verdict((1,), 2, (1, 2, 3))


def test_verdict_checks_and_normalizes_its_tokens():
    """A list draft never matched the tuple emitted; None or 1.5 raised "no len()"; errors named only emitted."""
    v = S.Verdict([1, 2, 1, 2], 1, [1, 3])
    assert v.draft == (1, 2, 1, 2) and v.emitted == (1, 3) and v.rejected == (2, 1, 2)
    for field, bad in (("draft", None), ("draft", 1.5), ("emitted", None), ("emitted", 1.5), ("emitted", [[1]])):
        with pytest.raises(ValueError, match=rf"^{field}\b"):
            S.Verdict(**{"draft": (1, 2), "accepted": 1, "emitted": (1, 3), field: bad})
    with pytest.raises(ValueError, match=r"len\(draft\)"):
        S.Verdict((), 1, (1, 3))
    with pytest.raises(ValueError, match=r"draft\[:1\]"):
        S.Verdict([(1, 2)], 1, (1, 3))  # the nested draft is one token (1, 2), not 1
    with pytest.raises(ValueError, match="^n must be an integer in"):
        S.sample_position([0.5, 0.5], [0.5, 0.5], 2**63, 0)


# ---- speculative sampling: exactness -----------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 4])
def test_sympy_proves_exactness_for_arbitrary_p_and_q(n):
    proof = Y.prove_exact(n)
    assert len(proof) == 2**n - 2  # every mixed sign pattern
    assert all(diff == 0 for diffs in proof.values() for diff in diffs)


def test_sympy_proof_would_catch_a_wrong_rule():
    """Resampling from p instead of [p - q]+ is not exact: the same check gives a non-zero difference."""
    p = list(sp.symbols("p_1:4", positive=True))
    q = list(sp.symbols("q_1:4", positive=True))
    normalize = {p[-1]: 1 - p[0] - p[1], q[-1]: 1 - q[0] - q[1]}
    mins = [q[0], p[1], p[2]]  # pattern: only token 1 has p > q
    wrong = mins[0] + (1 - sum(mins)) * p[0]
    assert sp.simplify((wrong - p[0]).subs(normalize)) != 0


def test_exact_rational_two_symbol_and_three_symbol_cases():
    quarter = sp.Rational(1, 4)
    p = [quarter, 1 - quarter]
    assert Y.exact_emission(p, [1, 0]) == p and Y.exact_emission(p, [0, 1]) == p
    p3, q3 = [sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 6)], [sp.Rational(1, 6), sp.Rational(1, 6), sp.Rational(2, 3)]
    assert Y.exact_emission(p3, q3) == p3


def test_two_symbol_example_figures_8_30_and_8_31():
    a = S.two_symbol_paths(0.25, drafted=0)
    b = S.two_symbol_paths(0.25, drafted=1)
    assert a["accept"] == pytest.approx(1 / 4) and a["reject"] == pytest.approx(3 / 4)
    assert b["accept"] == pytest.approx(3 / 4) and b["reject"] == pytest.approx(1 / 4)
    for paths in (a, b):
        assert (paths["emit A"], paths["emit B"]) == pytest.approx((0.25, 0.75))


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 12), st.integers(0, 2**31 - 1))
def test_emission_distribution_equals_p(vocab, seed):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(vocab)), rng.dirichlet(np.ones(vocab))
    assert S.emission_distribution(p, q) == pytest.approx(p, abs=1e-12)
    assert S.acceptance_rate(p, q) == pytest.approx(1 - 0.5 * np.abs(p - q).sum())
    r = S.residual(p, q)
    assert r.sum() == pytest.approx(1) and np.all(r[p <= q] == 0)


def test_chi_square_critical_values_match_the_table():
    # standard table values (e.g. NIST/SEMATECH e-Handbook, Table 1.3.6.7.4)
    assert round(chi_square_critical(1, 0.01), 3) == 6.635
    assert round(chi_square_critical(10, 0.05), 3) == 18.307
    assert round(chi_square_critical(100, 0.01), 3) == 135.807


SIGNIFICANCE = 0.01


def test_empirical_speculative_sampling_passes_chi_square():
    """Random p, q over 8 symbols, 200,000 rounds with seed 2026: the emitted tokens fit p at the 1 % level."""
    rng = np.random.default_rng(2026)
    for _ in range(5):
        p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8) * 0.5)
        tokens, accepted = S.sample_position(p, q, 200_000, rng)
        counts = np.bincount(tokens, minlength=8)
        assert fits(counts, p, SIGNIFICANCE)
        assert accepted.mean() == pytest.approx(S.acceptance_rate(p, q), abs=0.01)


def test_chi_square_rejects_a_wrong_sampler():
    """The same test rejects the biased rule 'keep the draft, else draw from p'."""
    rng = np.random.default_rng(2026)
    p, q = rng.dirichlet(np.ones(8)), rng.dirichlet(np.ones(8) * 0.5)
    drafts = rng.choice(8, size=200_000, p=q)
    keep = rng.random(drafts.size) < S.acceptance_probability(p, q)[drafts]
    biased = np.where(keep, drafts, rng.choice(8, size=drafts.size, p=p))
    stat, dof = chi_square(np.bincount(biased, minlength=8), p)
    assert stat > chi_square_critical(dof, SIGNIFICANCE)


def test_verify_sample_with_fixed_drafts_is_exact_per_position():
    rng = np.random.default_rng(7)
    p_rows = rng.dirichlet(np.ones(5), size=2)
    first = np.array([S.verify_sample(p_rows, None, [3], rng).emitted[0] for _ in range(20_000)])
    assert fits(np.bincount(first, minlength=5), p_rows[0], SIGNIFICANCE)


def test_distribution_inputs_are_validated():
    with pytest.raises(ValueError, match="p must"):
        S.residual([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ValueError, match="same vocabulary"):
        S.residual([0.5, 0.5], [1.0])
    with pytest.raises(ValueError, match="p_rows"):
        S.verify_sample(np.ones((1, 2)) / 2, None, [0, 1], np.random.default_rng(0))
    with pytest.raises(ValueError, match="significance"):
        chi_square_critical(3, 1.5)



# ---- input checks: every row and every draft token, before any draw -----------------------------
THIRDS = [1 / 3, 1 / 3, 1 / 3]


@pytest.mark.parametrize("row", [[0.0, 1.5, 0.0], [np.nan, 1.0, 0.0], [0.0, 1.0, np.inf]],
                         ids=["unnormalised", "nan", "inf"])
def test_verify_sample_checks_the_rows_of_accepted_drafts(row):
    """Draft 1 has p >= q = 1, so it is always accepted: the bad row 0 is never sampled from, yet must be refused."""
    with pytest.raises(ValueError, match="p_rows"):
        S.verify_sample([row, THIRDS], None, [1], np.random.default_rng(0))


def test_verify_sample_refuses_a_negative_probability_for_every_draw():
    for seed in range(20):  # p(draft) = 0.5: about half the draws reject and used to reach the check
        with pytest.raises(ValueError, match="p_rows"):
            S.verify_sample([[-0.5, 0.5, 1.0], THIRDS], None, [1], np.random.default_rng(seed))


def test_verify_sample_checks_every_draft_row_and_its_length():
    p = [[0.0, 1.0, 0.0], THIRDS]
    with pytest.raises(ValueError, match="q_rows"):
        S.verify_sample(p, [[0.0, 0.5, 0.0]], [1], np.random.default_rng(0))  # accepted: p/q = 2
    with pytest.raises(ValueError, match="q_rows"):
        S.verify_sample(p, [[0.0, 1.0, 0.0, 0.0]], [1], np.random.default_rng(0))
    with pytest.raises(ValueError, match="p_rows"):
        S.verify_sample([[0.0, 1.0, 0.0], [0.5, 0.5]], None, [1], np.random.default_rng(0))  # ragged
    with pytest.raises(ValueError, match="draft"):  # q gives the draft no probability: it was not drawn from q
        S.verify_sample(p, [[1.0, 0.0, 0.0]], [1], np.random.default_rng(0))


@pytest.mark.parametrize("draft", [[2.7], [2.0], [True], [3], [-1], ["a"], [None], np.array([1.0])],
                         ids=["float", "integral-float", "bool", "too-large", "negative", "str", "none", "float-array"])
def test_verify_sample_draft_tokens_are_integer_ids_in_the_vocabulary(draft):
    with pytest.raises(ValueError, match="draft"):
        S.verify_sample([[0.0, 0.0, 1.0], THIRDS], None, draft, np.random.default_rng(0))


def test_verify_sample_takes_a_generator_or_an_int_seed():
    p = np.random.default_rng(1).dirichlet(np.ones(6), size=3)
    for bad in (None, True, -1, 1.5, "7", np.random.RandomState(0)):
        with pytest.raises(ValueError, match="rng"):
            S.verify_sample(p, None, [2, 4], bad)
    seeded = S.verify_sample(p, None, [2, 4], 11)
    assert seeded == S.verify_sample(p, None, np.array([2, 4]), np.random.default_rng(11))
    assert seeded == S.verify_sample(p, None, [np.int64(2), 4], np.int64(11))
    assert S.verify_sample([[1.0, 0.0]], None, [], 0) == S.Verdict((), 0, (0,))  # no drafts: one draw from p


def test_distribution_functions_check_their_inputs_alike():
    fns = (S.acceptance_probability, S.acceptance_rate, S.residual, S.emission_distribution)
    for fn in fns:
        for bad in ([np.nan, 1.0], [-0.5, 1.5], [0.5, 0.6], [True, False], ["0.5", "0.5"], [], [[0.5, 0.5]]):
            with pytest.raises(ValueError, match=r"^q\b"):
                fn([0.5, 0.5], bad)
            with pytest.raises(ValueError, match=r"^p\b"):
                fn(bad, [0.5, 0.5])
    with pytest.raises(ValueError, match="rng"):
        S.sample_position([0.5, 0.5], [0.5, 0.5], 10, None)
    tokens, _ = S.sample_position([0.5, 0.5], [0.5, 0.5], 10, 3)
    assert tokens.tolist() == S.sample_position([0.5, 0.5], [0.5, 0.5], 10, np.random.default_rng(3))[0].tolist()


def test_greedy_verify_compares_whole_tokens_and_refuses_bad_ones():
    v = S.greedy_verify([(1, 2)], [(1, 3), (3, 4)])  # tuples are tokens, not rows of an array
    assert v.accepted == 0 and v.emitted == ((1, 3),)
    assert S.greedy_verify(np.array([3, 1]), [3, 1, 4]).emitted == (3, 1, 4)
    with pytest.raises(ValueError, match="draft"):
        S.greedy_verify([True], [1, 2])  # True == 1 would match token 1
    with pytest.raises(ValueError, match="draft"):
        S.greedy_verify([[1]], [[1], 2])
    with pytest.raises(ValueError, match="target"):
        S.greedy_verify([1], [1, {2: 3}])
    with pytest.raises(ValueError, match="draft"):
        S.greedy_verify(5, [5])
    with pytest.raises(ValueError, match="accepted"):
        S.Verdict((1,), True, (1, 2))


def test_two_symbol_paths_checks_its_arguments():
    for drafted in (True, 1.0, 2, "A"):
        with pytest.raises(ValueError, match="drafted"):
            S.two_symbol_paths(0.25, drafted)
    for p_first in (1.5, -0.1, np.nan, True):
        with pytest.raises(ValueError, match="p_first"):
            S.two_symbol_paths(p_first, 0)

# ---- round arithmetic (8.5.2) --------------------------------------------------------------------
def test_expected_tokens_per_round():
    assert round(S.expected_tokens(AAAA), 2) == 1.33
    assert round(S.expected_tokens(BBBB), 2) == 3.05
    assert S.expected_tokens([]) == 1 and S.expected_tokens([1, 1, 1]) == 4
    dist = S.tokens_distribution(BBBB)
    assert dist.sum() == pytest.approx(1) and dist @ np.arange(1, 6) == pytest.approx(S.expected_tokens(BBBB))
    with pytest.raises(ValueError, match="accept_probs"):
        S.expected_tokens([0.5, 1.2])


def test_time_per_token_is_total_over_total():
    assert C.time_per_token([1.5 * ms, 1.5 * ms], [1, 5]) == pytest.approx(0.5 * ms)
    assert C.mean_of_round_rates([1.5 * ms, 1.5 * ms], [1, 5]) == pytest.approx(0.9 * ms)
    with pytest.raises(ValueError, match="round_tokens"):
        C.time_per_token([1.0], [0])


def test_verification_costs_the_same_as_a_decode_step():
    extra = C.extra_verify_flops(MODEL, 2048, 4)
    assert round(extra / 1e9) == 65
    assert round(ACCELERATOR.compute_time(extra, PREFILL_MFU_BATCH1) / ms, 1) == 0.2


def test_round_times_per_token_and_break_even():
    assert round(C.spec_time_per_token(AAAA, PLAIN, 0.1 * ms) / ms, 1) == 19.8
    assert round(C.spec_time_per_token(BBBB, PLAIN, 0.1 * ms) / ms, 2) == 8.64
    assert round(C.break_even_draft_s(AAAA, PLAIN) / ms, 1) == 8.7
    assert round(C.break_even_draft_s(BBBB, PLAIN) / ms, 1) == 53.9
    # at the break-even draft time the round ties with plain decode
    t = C.break_even_draft_s(BBBB, PLAIN)
    assert C.spec_time_per_token(BBBB, PLAIN, t) == pytest.approx(PLAIN)
    be = Y.BREAK_EVEN_DRAFT.subs({Y.a: sp.Rational(3, 4), Y.m: 4, Y.T_v: 26.26, Y.T_p: 26.26})
    assert round(float(be), 1) == 53.9


def test_index_amortization_and_the_256_token_request():
    spec = C.spec_time_per_token(BBBB, PLAIN, 0.1 * ms)
    assert round((PLAIN - spec) / ms, 1) == 17.6
    assert round(C.amortization_tokens(2.0, PLAIN, spec)) == 114
    assert round(256 * PLAIN, 2) == 6.72
    assert round(C.expected_rounds(256, BBBB), 2) == 84.39
    assert round(C.request_time(256, BBBB, ROUND, setup_s=2.0), 2) == 4.22
    assert 256 / S.expected_tokens(BBBB) < C.expected_rounds(256, BBBB)  # the overshoot of the last round
    assert C.expected_rounds(10, [0.0]) == 10 and C.expected_rounds(10, [1.0]) == 5
    with pytest.raises(ValueError, match="spec_s_per_token"):
        C.amortization_tokens(2.0, PLAIN, 2 * PLAIN)


# ---- draft sources (8.5.3) -----------------------------------------------------------------------
def test_serial_and_parallel_drafting():
    bw = C.effective_bandwidth(15.44 * GB, PLAIN)
    assert round(bw / GB) == 588
    fwd = C.draft_forward_s(2.10 * GB, bw)
    assert round(fwd / ms, 2) == 3.57
    serial, parallel = C.drafting_s(4, fwd, parallel=False), C.drafting_s(4, fwd, parallel=True)
    assert round(serial / ms, 2) == 14.29 and parallel == fwd  # unrounded
    assert round(4 * round(fwd / ms, 2), 2) == 14.28  # the chapter multiplies the printed 3.57 ms
    assert round((serial + PLAIN) / 3 / ms, 1) == 13.5
    assert round((parallel + PLAIN) / 3 / ms, 1) == 9.9
    assert round((parallel + PLAIN) / 2 / ms, 1) == 14.9
    assert round((serial - parallel) / ms, 1) == 10.7
    assert C.drafting_s(0, fwd, parallel=True) == 0


# ---- draft length (8.5.4) ------------------------------------------------------------------------
def test_marginal_rule_matches_the_sympy_derivation():
    assert sp.simplify(Y.MARGINAL_CONDITION.rhs - Y.dN * Y.T / Y.N) == 0
    assert C.worth_extending(29.9, 1.75, 3.6, 0.5625)  # 1 -> 2 drafts: 6.4 < 17.1 ms per token
    assert not C.worth_extending(40.7, 3.05, 3.6, 0.2373)  # 4 -> 5 drafts: 15.2 > 13.3 ms per token
    assert C.marginal_tokens(BBBB)[-1] == pytest.approx(0.75**4)


def test_exercise_8_7_table():
    a = [0.75] * 8
    plain = C.draft_length_table(a, lambda m: C.linear_round_s(m, 26.3 * ms, 3.6 * ms), lengths=[1, 2, 4, 8])
    assert plain["E[N]"].round(2).tolist() == [1.75, 2.31, 3.05, 3.7]
    assert (plain["T/N (s)"] / ms).round(1).tolist() == [17.1, 14.5, 13.3, 14.9]
    grouped = C.draft_length_table(a, lambda m: C.linear_round_s(m, 26.3 * ms, 3.6 * ms, group=4))
    assert round(grouped.loc[4, "T/N (s)"] / ms, 1) == 13.3 and round(grouped.loc[5, "T/N (s)"] / ms, 1) == 16.8
    assert not grouped.loc[5, "extend from m-1"] and round(grouped.loc[5, "dT/dN (s)"] / ms, 1) == 60.7
    assert grouped.loc[2, "dT (s)"] == 0 and grouped.loc[2, "extend from m-1"]  # inside a group, extra drafts are free
    assert grouped.notna().all().all()


def test_verification_shapes_are_padded_to_buckets():
    assert C.verify_rows(4) == C.verify_rows(5) == 8
    assert C.verify_rows(8) == 8 and C.verify_rows(9) == 16


def test_the_gain_shrinks_at_high_concurrency():
    k7 = [0.75] * 7
    low = C.batch_speedup(MODEL, ACCELERATOR, 1, 512, k7, mfu=0.58, mbu=0.65)
    high = C.batch_speedup(MODEL, ACCELERATOR, 256, 512, k7, mfu=0.58, mbu=0.65)
    assert low == pytest.approx(S.expected_tokens(k7)) and high < 1.0 < low


def test_measured_draft_lengths_k7_k15():
    t = published("speculative_8_5").set_index("name")["value_s"]
    assert [round(t[n] / ms, 1) for n in ("plain_k0", "dflash_k7", "dflash_k15")] == [90.0, 30.6, 29.4]
    assert round((t["plain_k0"] - t["dflash_k7"]) / ms) == 59
    assert round(round(t["dflash_k7"] / ms, 1) - round(t["dflash_k15"] / ms, 1), 1) == 1.2  # from the printed medians
    assert round((t["dflash_k7"] - t["dflash_k15"]) / ms, 2) == 1.15  # from the footnote's 30.58 and 29.43
    assert (round(t["dflash_round"] / ms, 1), round(t["dflash_plain_step"] / ms, 1)) == (15.2, 16.9)


def test_round_time_at_batch_pads_to_buckets_and_matches_the_plain_step():
    overhead = PLAIN - C.verify_step_s(MODEL, ACCELERATOR, 1, 2048, 0)
    assert round(overhead / ms, 1) == 17.6  # T_ovh of experiment 8-1 at batch 1
    plain = C.round_time_s(0, MODEL, ACCELERATOR, 1, 2048, overhead_s=overhead, mfu=0.58)
    assert plain == pytest.approx(PLAIN)
    at = [C.round_time_s(m, MODEL, ACCELERATOR, 64, 512, overhead_s=overhead, mfu=0.58, buckets=C.VERIFY_BUCKETS)
          for m in (3, 4, 7, 8)]
    assert at[0] == at[1] == at[2] < at[3]  # 4..8 verified rows share the 8-row shape; 9 rows pay for 16
    assert C.geometric_profile(0.8, 3, 0.5).tolist() == pytest.approx([0.8, 0.4, 0.2])
    with pytest.raises(ValueError, match="decay"):
        C.geometric_profile(0.8, 3, 0.0)


def test_draft_length_frame_finds_the_chapter_optimum_at_batch_1():
    from inferlab.book.plot.speculative import draft_length_frame

    frame = draft_length_frame(0.75, 1.0, 3.6, 1, 1)
    assert int(frame["ms per token"].idxmin()) == 4 and frame.notna().all().all()


def test_batch_padded_rows_pads_the_iterations_total_up_to_the_largest_captured_size():
    from inferlab.scheduling.shapes import multiples

    captured = multiples(8, 512)  # vLLM's pattern: 1, 2, 4, then multiples of 8 up to 512
    assert C.batch_padded_rows(4, 1, captured) == 8 and C.batch_padded_rows(8, 1, captured) == 16  # 5 -> 8, 9 -> 16
    assert C.batch_padded_rows(4, 3, captured) == 16  # 15 rows of three requests: one padding row, not 3 x 3
    assert C.batch_padded_rows(4, 16, captured) == 80  # already a captured size
    assert C.batch_padded_rows(1, 256, captured) == 512 and C.batch_padded_rows(2, 256, captured) == 768  # eager
    assert C.batch_padded_rows(2, 5) == 15  # no captured sizes: no padding
    with pytest.raises(ValueError, match="batch"):
        C.batch_padded_rows(2, 0, captured)


def test_padded_round_time_matches_the_plain_step_and_charges_padding_only_when_compute_bound():
    from inferlab.scheduling.shapes import multiples

    overhead = PLAIN - C.verify_step_s(MODEL, ACCELERATOR, 1, 2048, 0)
    plain = C.padded_round_time_s(0, MODEL, ACCELERATOR, 1, 2048, overhead_s=overhead, mfu=0.58)
    assert plain == pytest.approx(PLAIN)
    assert plain == pytest.approx(C.round_time_s(0, MODEL, ACCELERATOR, 1, 2048, overhead_s=overhead, mfu=0.58))
    captured = multiples(8, 512)
    # batch 1 is memory-bound: 8 or 16 rows take the same time; drafts add per_draft_s each
    at1 = [C.padded_round_time_s(m, MODEL, ACCELERATOR, 1, 2048, 0.0, overhead, 0.58, captured) for m in (7, 8)]
    assert at1[0] == at1[1] == pytest.approx(plain)
    assert C.padded_round_time_s(3, MODEL, ACCELERATOR, 1, 2048, 1e-3, overhead, 0.58) == pytest.approx(plain + 3e-3)
    # compute-bound (250 requests, 512 tokens): 500 rows padded to 512 cost time; past 512 rows nothing is padded
    padded = C.padded_round_time_s(1, MODEL, ACCELERATOR, 250, 512, 0.0, 0.0, 0.58, (1, 2, 4, 512))
    exact = C.padded_round_time_s(1, MODEL, ACCELERATOR, 250, 512, 0.0, 0.0, 0.58, None)
    assert padded > exact
    big = [C.padded_round_time_s(m, MODEL, ACCELERATOR, 256, 512, 0.0, 0.0, 0.58, captured) for m in (2, 3)]
    assert big[0] == pytest.approx(C.padded_round_time_s(2, MODEL, ACCELERATOR, 256, 512, 0.0, 0.0, 0.58))
    assert big[0] < big[1]
