"""Section 8.5: the real decoder. Greedy output identical to plain greedy decoding, sampled output distributed as
plain sampling, prompt lookup, and KV rollback through the paging allocator's public API."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.kvcache import BlockManager, OutOfBlocks
from inferlab.speculative import speculative_decode
from inferlab.speculative.goodness_of_fit import chi_square, chi_square_critical
from inferlab.speculative.ngram import NgramLM
from inferlab.speculative.prompt_lookup import ModelDrafter, PromptLookup, lookup_draft

TARGET = NgramLM.fit()
DRAFT_MODEL = NgramLM.fit(order=2)
PROMPT = TARGET.encode("the draft proposes tokens. the target model checks them. the draft proposes ")


# ---- the model and the drafter -------------------------------------------------------------------
def test_scoring_k_positions_at_once_equals_scoring_them_one_by_one():
    toks = np.concatenate([PROMPT, TARGET.generate(PROMPT, 40, np.random.default_rng(3))])
    batch = TARGET.probs_at(toks, np.arange(1, toks.size + 1))
    single = np.stack([TARGET.next_probs(toks[:i]) for i in range(1, toks.size + 1)])
    assert np.array_equal(batch, single)  # bit-identical: greedy argmax cannot differ
    assert np.allclose(batch.sum(axis=1), 1) and np.all(batch > 0)


def test_the_copy_component_reads_the_context():
    ctx = TARGET.encode("zqx7 zqx7 zqx")
    assert TARGET.decode([np.argmax(TARGET.next_probs(ctx))]) == "7"
    no_copy = NgramLM.fit(copy_weight=0.0)
    assert no_copy.decode([np.argmax(no_copy.next_probs(ctx))]) != "7"


def test_lookup_draft_takes_the_longest_recent_match():
    toks = [1, 2, 3, 9, 9, 1, 2, 3, 7, 7, 5, 1, 2, 3]
    assert lookup_draft(toks, 3).tolist() == [7, 7, 5]  # the most recent "1 2 3" was followed by 7 7 5
    assert lookup_draft(toks, 3, max_ngram=1).tolist() == [7, 7, 5]  # "3" last occurred before 7 7 5
    assert lookup_draft([1, 2, 3, 4], 3).tolist() == []  # nothing recurs
    assert lookup_draft([5, 6, 5], 4).tolist() == [6, 5]  # shorter than k near the end
    with pytest.raises(ValueError, match="min_ngram"):
        lookup_draft(toks, 3, max_ngram=1, min_ngram=2)


# ---- greedy: token-for-token identity -------------------------------------------------------------
@pytest.mark.parametrize("drafter", [PromptLookup(4), PromptLookup(8, max_ngram=4), ModelDrafter(DRAFT_MODEL, 3)],
                         ids=["lookup-4", "lookup-8", "draft-model-3"])
def test_greedy_speculative_equals_plain_greedy(drafter):
    reference = TARGET.generate(PROMPT, 150)
    result = speculative_decode(TARGET, PROMPT, 150, drafter)
    assert np.array_equal(result.tokens, reference)
    assert result.tokens_per_round > 1.5 and result.target_passes < 150


@settings(max_examples=25, deadline=None)
@given(text=st.text(alphabet="abc .", min_size=2, max_size=40), k=st.integers(1, 6), n=st.integers(1, 40))
def test_greedy_identity_on_arbitrary_prompts(text, k, n):
    prompt = TARGET.encode(text)
    assert np.array_equal(speculative_decode(TARGET, prompt, n, PromptLookup(k)).tokens, TARGET.generate(prompt, n))


def test_no_drafter_is_plain_decoding_one_pass_per_token():
    result = speculative_decode(TARGET, PROMPT, 20)
    assert np.array_equal(result.tokens, TARGET.generate(PROMPT, 20))
    assert result.target_passes == 20 and result.acceptance_rate == 0 and result.tokens_per_round == 1


# ---- sampling: the output distribution is plain sampling's ---------------------------------------
LENGTH, SAMPLES, SIGNIFICANCE = 3, 3000, 0.01


def _sequence_fit(drafter, seed):
    exact = TARGET.continuations(PROMPT, LENGTH, min_prob=5 / SAMPLES)
    keys = list(exact)
    index = {key: i for i, key in enumerate(keys)}
    counts = np.zeros(len(keys) + 1)
    rng = np.random.default_rng(seed)
    for _ in range(SAMPLES):
        seq = tuple(speculative_decode(TARGET, PROMPT, LENGTH, drafter, rng=rng).tokens.tolist())
        counts[index.get(seq, len(keys))] += 1
    probs = np.append(list(exact.values()), 1 - sum(exact.values()))
    return chi_square(counts, probs)


@pytest.mark.parametrize("drafter", [PromptLookup(4), ModelDrafter(DRAFT_MODEL, 2)], ids=["lookup", "draft-model"])
def test_sampled_speculative_sequences_fit_plain_sampling(drafter):
    """3,000 sampled 3-token continuations (seed 11) against the exact plain-sampling probabilities, 1 % level."""
    stat, dof = _sequence_fit(drafter, seed=11)
    assert dof >= 10 and stat <= chi_square_critical(dof, SIGNIFICANCE)


class _BiasedLookup(PromptLookup):
    """Claims its drafts came from q = target, so the verifier accepts them at min(1, p/p) = 1: biased."""

    def propose(self, tokens, rng=None):
        draft, _ = super().propose(tokens, rng)
        q = TARGET.probs_at(np.concatenate([tokens, draft]), np.arange(tokens.size, tokens.size + draft.size))
        return draft, q


def test_the_sequence_test_catches_a_biased_verifier():
    stat, dof = _sequence_fit(_BiasedLookup(4), seed=11)
    assert stat > chi_square_critical(dof, SIGNIFICANCE)


# ---- KV rollback in the paging allocator ----------------------------------------------------------
def _check_pool(manager: BlockManager, seq: str) -> None:
    state = manager.state()
    n = manager.num_tokens(seq)
    table = manager.block_table(seq)
    assert len(table) == -(-n // manager.block_size)  # exactly the blocks the kept tokens need
    assert len(set(table)) == len(table)
    refs = np.bincount([b for t in state.tables.values() for b in t], minlength=state.num_blocks)
    assert np.array_equal(refs, state.ref_counts)  # refcounts equal the table references
    assert state.free == {b for b in range(state.num_blocks) if refs[b] == 0}
    assert manager.num_free + manager.num_used == manager.num_blocks


def test_rollback_keeps_block_tables_and_refcounts_consistent():
    manager = BlockManager(num_blocks=64, block_size=4)
    seen = []

    def after(mgr, record):
        _check_pool(mgr, "req")
        seen.append(record)
        # the KV holds exactly the committed tokens but the newest: no rejected draft survives
        assert mgr.num_tokens("req") == PROMPT.size + sum(len(r.emitted) for r in seen)

    rng = np.random.default_rng(5)
    result = speculative_decode(TARGET, PROMPT, 120, PromptLookup(6), rng=rng, manager=manager,
                                seq_id="req", after_round=after)
    assert any(r.accepted < r.drafted for r in seen)  # rollbacks did happen
    assert manager.num_free == 64 and not manager.seqs  # everything returned at the end
    assert len(result.tokens) == 120


def test_rollback_beside_a_sharing_sequence_leaves_the_other_untouched():
    manager = BlockManager(num_blocks=64, block_size=4)
    manager.allocate("other", PROMPT.tolist())
    before = manager.read("other")
    reference = TARGET.generate(PROMPT, 60)
    result = speculative_decode(TARGET, PROMPT, 60, PromptLookup(5), manager=manager, seq_id="req",
                                after_round=lambda m, r: _check_pool(m, "req"))
    assert np.array_equal(result.tokens, reference)
    assert manager.read("other") == before and manager.num_tokens("other") == PROMPT.size


def test_a_rollback_that_forgets_to_truncate_changes_the_output():
    """The model reads its context from the KV pool, so stale draft slots would show in the output."""

    class NoTruncate(BlockManager):
        def truncate(self, seq_id, n_tokens):  # keeps the rejected drafts' KV
            return None

    with pytest.raises(ValueError):  # the round record notices the KV length is wrong
        speculative_decode(TARGET, PROMPT, 60, PromptLookup(5), manager=NoTruncate(64, 4))


def test_decoder_validates_and_runs_out_of_blocks_cleanly():
    with pytest.raises(ValueError, match="n_tokens"):
        speculative_decode(TARGET, PROMPT, 0)
    with pytest.raises(ValueError, match="prompt"):
        speculative_decode(TARGET, [], 5)
    with pytest.raises(OutOfBlocks):
        speculative_decode(TARGET, PROMPT, 200, PromptLookup(4), manager=BlockManager(22, 4))
