"""Exercise parts: inputs and references, variants, the comparison rule, the shipped answers, in-notebook feedback."""

import ast
import json
import math
import re
import subprocess
import sys

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

import _submissions as subs
from _submissions import notebook_path, submission
from inferlab.datasets import published
from inferlab.exercises import EXERCISES, attempted, check, checker, exercise, judge, public
from inferlab.exercises.core import Part, Precision
from inferlab.exercises.data import EXERCISE_DATA, build, exercise_data


def test_printed_answers_are_the_references() -> None:
    e1, e2, e3, e4, e8, e9 = (EXERCISES[k] for k in ("8-1", "8-2", "8-3", "8-4", "8-8", "8-9"))
    assert (e1.part("b_kv_short").expected(), e1.part("b_kv_long").expected()) == (51, 13)
    assert (e1.part("max_requests_short").expected(), e1.part("max_requests_long").expected()) == (37, 10)
    assert e1.part("capacity_binds_first").expected() is True
    assert round(e1.part("per_token_gib").expected().loc[64, "2048"], 4) == 0.5015
    assert round(e2.part("prefill_r0_r1_ms").expected(), 2) == 163.33
    assert round(e2.part("decode_ms").expected(), 2) == 26.29
    assert round(e2.part("admit_r2_ms").expected(), 2) == 375.97
    assert (e2.part("pairs_h0").expected(), e2.part("pairs_cached").expected()) == (131_328, 4_063_488)
    assert (e2.part("budget_within_gap").expected(), e2.part("budget_fastest").expected()) == (512, 4096)
    assert e3.part("total_waste").expected() == {2: 4, 4: 10, 8: 14}
    assert e3.part("table_entries").expected() == {2: 23, 4: 13, 8: 7}
    assert e3.part("independent_mib").expected() == {8: 9504, 16: 19_008, 32: 38_016}
    assert e3.part("shared_mib").expected() == {8: 3456, 16: 6048, 32: 11_232}
    assert e3.part("blocks_saved").expected() == [0, 1, 15, 99]
    # 8-4 states 62.2 % (the chapter's measured efficiency), so its answers are the chapter's Figure 8-22
    assert round(e4.part("value_a_ms").expected(), 1) == 132.7
    assert round(e4.part("value_three_b_ms").expected(), 1) == 120.9
    assert round(e4.part("p_a_crossover").expected(), 3) == 0.460
    assert round(e4.part("p_a_crossover_gen4").expected(), 3) == 0.458
    assert e8.part("halved_s").expected() == {"prefill": 90, "decode": 75, "tools": 85}
    assert round(e8.part("net_speedup").expected(), 2) == 1.42 and e8.part("breakeven_setup_s").expected() == 37.5
    assert e9.part("e_kv_mib").expected() == 6048 and round(e9.part("e_total_s").expected(), 2) == 5.55
    assert round(e9.part("e_gpu_s_per_good").expected(), 3) == 0.347
    assert [e9.part(p).expected() for p in ("best_12gib", "best_6gib", "best_16_outputs")] == ["D", "E", "E"]


def test_printed_answers_of_8_5_to_8_7() -> None:
    """8-5 has numbers of its own, not the 8.4.3 page's (nine FFNs, 255 steps, PCIe Gen5)."""
    e5, e6, e7 = (EXERCISES[k] for k in ("8-5", "8-6", "8-7"))
    assert e5.part("net_mib").expected() == {1: 3168, 2: 2880}
    assert e5.part("extra_inputs").expected() == {1: 3, 2: 2} and e5.part("extra_requests").expected() == {1: 2, 2: 2}
    step = e5.part("copy_step_ms").expected()
    assert round(step["pcie"], 1) == 113.2 and round(step["c2c"], 2) == 8.05
    total = e5.part("copy_total_s").expected()
    assert round(total["pcie"], 1) == 57.9 and round(total["c2c"], 2) == 4.12
    assert round(e5.part("min_bandwidth_gb_s").expected()) == 926
    assert e5.inputs["offloaded"] != 9 and e5.inputs["steps"] != 255 and e5.inputs["links_gb_s"]["pcie"] != 64
    assert e6.part("kv_mib").expected() == {"q8_0": {"input": 612, "request": 631.125},
                                            "q4_0": {"input": 324, "request": 334.125}}
    assert e6.part("changed_tasks").expected() == [5, 6]
    assert round(e6.part("retry_overhead_s").expected(), 6) == 2.0
    assert e7.part("expected_tokens").expected()[4] == pytest.approx(3.05, abs=0.005)
    assert e7.part("better_length").expected() == 4


# ---- the comparison rule --------------------------------------------------------------------------------
def _part(precision: str = "exact", value=2.0, **kw) -> Part:
    return Part("x", "q", lambda p: value, precision=precision, **kw)


def test_precision_accepts_what_people_round_and_calls_the_rest_close() -> None:
    """The known cases: rtol=1e-3 refused all four, and the hint then suggested a wrong method."""
    assert judge(_part("dec:2"), 0.50, 0.5015).status == "correct"  # GiB, 8-1 part 1
    assert judge(_part("sig:3"), 2.31, 2.3125).status == "correct"  # tokens, 8-7 part 1
    assert judge(_part("sig:3"), 13.3, 13.3408).status == "correct"  # ms, 8-7 part 2 (inputs to one decimal)
    assert judge(_part("dec:2"), 0.35, 0.3471).status == "correct"  # GPU-s, 8-9 part 3
    assert judge(_part("dec:2"), 0.3471297, 0.3471297).status == "correct"  # the exact value too
    for answer in (13.0, 13.5):  # the method is right, the rounding is not
        verdict = judge(_part("sig:3", hint="the method"), answer, 13.3408)
        assert verdict.status == "close" and "check the rounding" in verdict.message and "method" not in verdict.message
    assert judge(_part("sig:3"), 15.0, 13.3408).status == "wrong"
    # a value that rounds to the same figures passes even at the far edge of the rounding interval
    assert judge(_part("sig:3"), 13.349, 13.3408).status == "correct"
    assert judge(_part("dec:1"), 0.05, 0.0).status == "correct" and judge(_part("dec:1"), 0.06, 0.0).status == "close"
    assert judge(_part("about"), 1.004, 1.0).status == "correct" and judge(_part("about"), 1.02, 1.0).status == "close"
    exact = _part(value=51)
    assert judge(exact, 51).status == "correct" and judge(exact, 52).status == "wrong"
    assert judge(_part("exact"), 2304.0, 2304.0).status == "correct"
    assert judge(_part("exact"), 2304.5, 2304.0).status == "wrong"
    assert Precision.parse("sig:3").text == "to three significant figures"
    assert Precision.parse("dec:1").text == "to one decimal" and Precision.parse("dec:2").text == "to two decimals"
    with pytest.raises(ValueError, match="precision"):
        Precision.parse("3 figures")


def test_judge_rules() -> None:
    num = _part("dec:2", hint="h")
    assert judge(num, 2.001, 2.0).status == "correct" and judge(num, 2.03, 2.0).status == "close"
    assert judge(num, 2.1, 2.0).status == "wrong"
    assert judge(num, ..., 2.0).status == "not attempted" and judge(num, None, 2.0).status == "not attempted"
    assert judge(num, True, 2.0).status == "wrong" and judge(num, "2.0", 2.0).status == "wrong"
    assert judge(num, math.nan, 2.0).status == "wrong"
    d = _part(value={2: [1, 1], 4: [3, 3]})
    assert judge(d, {2: [1, 1], 4: [3, 3]}).status == "correct" and judge(d, {2: [1, 1]}).status == "wrong"
    assert judge(d, {"2": [1, 1], "4": [3, 3]}).status == "correct"  # keys compared as labels
    free = Part("why", "q")
    assert free.manual and judge(free, "because").status == "manual" and judge(free, "...").status == "not attempted"
    wrong = judge(_part("dec:2", hint="weights are shared"), 3.0, 2.0)
    assert wrong.points == 0 and "2.0" not in wrong.message and "weights are shared" in wrong.message
    unordered = _part(value=[5, 6], unordered=True)
    assert judge(unordered, [6, 5]).status == "correct" and judge(unordered, [5]).status == "wrong"


def test_tables_and_series_are_compared_by_their_labels() -> None:
    expected = pd.DataFrame({"2048": [1.0, 2.0], "8192": [3.0, 4.0]}, index=[1, 4])
    table = _part("dec:2", value=expected)
    assert judge(table, expected.copy()).status == "correct"
    assert judge(table, expected[["8192", "2048"]].iloc[::-1]).status == "correct"  # reordered: same labels
    assert judge(table, pd.DataFrame({2048: [1.0, 2.0], 8192: [3.0, 4.0]}, index=[1.0, 4.0])).status == "correct"
    assert judge(table, {"2048": {1: 1.0, 4: 2.0}, "8192": {1: 3.0, 4: 4.0}}).status == "correct"
    meaningless = judge(table, pd.DataFrame({"2048": [1.0, 2.0], "8192": [3.0, 4.0]}))  # rows 0, 1
    assert meaningless.status == "wrong" and "label" in meaningless.message
    assert judge(table, {"a": [1.0, 2.0], "b": [3.0, 4.0]}).status == "wrong"
    assert judge(table, [[1.0, 3.0], [2.0, 4.0]]).status == "wrong"
    # a Series for a dict: check sends it through the grader's encoding, so both see a dict
    series = pd.Series({"prefill": 90.0, "decode": 75.0, "tools": 85.0})
    assert check("8-8", "halved_s", series).status == "correct"
    assert check("8-8", "halved_s", series.iloc[::-1]).status == "correct"
    assert check("8-8", "halved_s", pd.Series([90.0, 75.0, 85.0])).status == "wrong"


def test_check_gives_feedback_and_handles_functions() -> None:
    assert check("8-1", "b_kv_short", 51).status == "correct"
    assert check("8-1", "b_kv_short", 50).status == "wrong"
    assert checker("8-3")("blocks_saved", lambda b: b - 1).status == "correct"
    raised = checker("8-3")("blocks_saved", lambda b: 1 / 0)
    assert raised.status == "wrong" and "ZeroDivisionError" in raised.message
    assert checker("8-3")("blocks_saved", 3).status == "wrong"
    assert check("8-6", "changed_tasks", {6, 5}).status == "correct"  # a set, in any order
    with pytest.raises(ValueError, match="exercise_id"):
        exercise("8-0")
    with pytest.raises(ValueError, match="part"):
        check("8-1", "nope", 1)
    assert not attempted(...) and attempted(0)


def test_check_runs_no_reference_and_starts_without_numpy() -> None:
    """check compares with the shipped public answers: the catalog's references never run in a student's kernel."""
    def refuse(p):
        raise AssertionError("a reference ran inside check")

    saved = {(ex.id, p.name): p.reference for ex in EXERCISES.values() for p in ex.parts if not p.manual}
    try:
        for ex in EXERCISES.values():
            for part in ex.parts:
                if not part.manual:
                    object.__setattr__(part, "reference", refuse)
        for ex_id, ex in EXERCISES.items():
            for name, value in public.load(ex_id).items():
                part = ex.part(name)
                if part.probes:
                    value = dict(zip((a[0] for a in part.probes), value)).get
                assert check(ex_id, name, value).status == "correct", (ex_id, name)
    finally:
        for ex in EXERCISES.values():
            for part in ex.parts:
                if not part.manual:
                    object.__setattr__(part, "reference", saved[ex.id, part.name])
    code = ("import sys\nfrom inferlab.exercises import check\ncheck('8-8', 'net_speedup', 1.42)\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'inferlab.serving') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_shipped_expected_answers_equal_what_the_references_compute() -> None:
    shipped = json.loads(public.path().read_text(encoding="utf-8"))
    assert shipped == public.compute()
    for ex_id, ex in EXERCISES.items():
        assert set(shipped[ex_id]) == {p.name for p in ex.parts if not p.manual}


def test_shipped_data_matches_the_code_that_made_it() -> None:
    for name in EXERCISE_DATA:
        shipped, fresh = exercise_data(name), build(name)
        pd.testing.assert_frame_equal(shipped.reset_index(drop=True), fresh.reset_index(drop=True),
                                      check_dtype=False, rtol=1e-8)
    other = exercise_data("replay_record_8_2", interval_ms=40)  # another input: built, not read
    assert not other.equals(exercise_data("replay_record_8_2")) and other.index.name == "token_budget"
    assert exercise_data("retry_records_8_6", seed=6).equals(exercise_data("retry_records_8_6"))
    with pytest.raises(ValueError, match="inputs"):
        exercise_data("retry_records_8_6", sead=7)


# ---- the notebooks ----------------------------------------------------------------------------------------
def _parameters(nb) -> dict:
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    tree = ast.parse(cell.source)
    return {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body}


def test_the_parameters_cell_holds_every_input_of_the_catalog() -> None:
    for ex in EXERCISES.values():
        nb = nbformat.read(notebook_path(ex.id), as_version=4)
        assert _parameters(nb) == dict(ex.inputs), ex.id
        ids = [c.id for c in nb.cells]
        assert len(set(ids)) == len(ids)
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")


def test_shipped_notebooks_name_their_exercise_and_parts() -> None:
    for ex in EXERCISES.values():
        nb = nbformat.read(notebook_path(ex.id), as_version=4)
        assert nb.metadata["inferlab"]["exercise"] == ex.id
        sources = "\n".join(c.source for c in nb.cells)
        for part in ex.parts:
            assert f"{part.name} = " in sources and f'check("{part.name}", {part.name})' in sources


def test_questions_state_the_precision_they_are_graded_at() -> None:
    for ex in EXERCISES.values():
        cells = nbformat.read(notebook_path(ex.id), as_version=4).cells
        for part in ex.parts:
            if part.manual or part.precision == "exact":
                continue
            at = next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith(f"{part.name} ="))
            question = next(c.source for c in reversed(cells[:at]) if c.cell_type == "markdown")
            assert part.tolerance.text in question.lower(), (ex.id, part.name, part.tolerance.text)


def test_8_4_states_the_efficiency_its_references_use_and_8_9_is_self_contained() -> None:
    text4 = "\n".join(c.source for c in nbformat.read(notebook_path("8-4"), as_version=4).cells)
    assert "62.2 %" in text4 and "62 %" not in text4 and EXERCISES["8-4"].inputs["mfu"] == 0.622
    text9 = "\n".join(c.source for c in nbformat.read(notebook_path("8-9"), as_version=4).cells)
    for needed in ("144 KiB", "16-token blocks", "prompt + output − 1", "3188 MiB", "9.4 %", "3 tokens per round",
                   "2.04 s", "27.35 ms", "0.1 ms", "deadline"):
        assert needed in text9, needed


def _numbers(value) -> list[float]:
    if isinstance(value, pd.DataFrame):
        return [float(x) for x in value.to_numpy().ravel()]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


def test_hints_never_give_the_answer() -> None:
    assert "stored once instead of b times" not in EXERCISES["8-3"].part("blocks_saved").hint
    for ex in EXERCISES.values():
        answers = [ex.expected()] + [ex.variant(seed)[1] for seed in (1, 2)]
        for part in ex.parts:
            if part.manual or not part.hint:
                continue
            hint_numbers = {float(x) for x in re.findall(r"\d+(?:\.\d+)?", part.hint)}
            for expected in answers:
                for x in _numbers(expected[part.name]):
                    shown = {round(x, d) for d in range(4)} | {float(f"{x:.3g}"), float(f"{x:.2g}")}
                    assert not (shown & hint_numbers - {0.0, 1.0, 2.0}), (ex.id, part.name, part.hint)


# ---- variants -------------------------------------------------------------------------------------------
def _honest_answers(ex_id: str, inputs: dict) -> dict:
    """What the honest answer cells (tests/_submissions.SOLUTIONS) compute for ``inputs``, run here."""
    ns = {"pd": pd, **inputs}
    if ex_id == "8-2":
        ns["record"] = exercise_data("replay_record_8_2", interval_ms=inputs["replay_interval_ms"])
    if ex_id == "8-4":
        ns["replay"] = exercise_data("agent_replay_8_4", seed=inputs["session_seed"])
    if ex_id == "8-6":
        ns["grid"] = published("quality_grid_8_4_4")
        ns["retries"] = exercise_data("retry_records_8_6", seed=inputs["retry_seed"])
    ex = EXERCISES[ex_id]
    graded = [p for p in ex.parts if not p.manual]
    for part in graded:
        exec(subs.SOLUTIONS[ex_id].get(part.name) or f"{part.name} = {subs.FUNCTIONS[part.name][0]}", ns)
    return {p.name: [ns[p.name](*a) for a in p.probes] if p.probes else ns[p.name] for p in graded}


@pytest.mark.parametrize("ex_id", sorted(EXERCISES))
def test_variants_change_the_answers_and_the_inputs_decide_them(ex_id: str) -> None:
    """Each variant keeps the exercise meaningful (finite references), changes every numeric answer, and the
    honest cells, which compute from the inputs, are right on it."""
    ex = EXERCISES[ex_id]
    public_answers = ex.expected()
    for seed in (11, 12, 13):
        inputs, expected = ex.variant(seed)
        assert (inputs, expected.keys()) == (ex.variant(seed)[0], public_answers.keys())  # reproducible
        assert inputs != ex.inputs and set(inputs) == set(ex.inputs)
        for part in ex.parts:
            if part.manual or part.choice or isinstance(public_answers[part.name], (bool, str)):
                continue
            assert judge(part, public_answers[part.name], expected[part.name]).status != "correct", (seed, part.name)
        for name, value in _honest_answers(ex_id, inputs).items():
            assert judge(ex.part(name), value, expected[name]).status == "correct", (seed, name)
    for name, value in _honest_answers(ex_id, dict(ex.inputs)).items():
        assert judge(ex.part(name), value, public_answers[name]).status == "correct", name


def test_replayed_sessions_are_meaningful() -> None:
    from inferlab.exercises.catalog import SESSION_SEEDS

    for seed in SESSION_SEEDS[:3] + SESSION_SEEDS[-2:]:
        table = build("agent_replay_8_4", seed=seed)
        share = table["hit_tokens_1gib"].sum() / table["input_tokens"].sum()
        assert 0.03 < share < 0.25 and share < table["shared_with_previous"].sum() / table["input_tokens"].sum()


# ---- in the notebook ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def forked_kernels():
    """Kernels forked from a warm server, as nbmake's (``tests/_forked_kernels.py``): numpy, pandas, sympy and
    Matplotlib are imported once for the notebooks below, not once per notebook."""
    import _forked_kernels as fk
    from jupyter_client.provisioning import local_provisioner

    launch = fk.forking(local_provisioner.launch_kernel)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_provisioner, "launch_kernel", launch)
        yield
    launch.server.close()


def _verdicts(nb, ex_id: str, tmp_path) -> list[str]:
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = [o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", [])]
    return [t for t in texts if f"**{ex_id} `" in t]


@pytest.mark.parametrize("ex_id", ["8-1", "8-3", "8-5", "8-6", "8-7", "8-8"])
def test_a_solved_notebook_says_correct_everywhere(ex_id: str, tmp_path, forked_kernels) -> None:
    verdicts = _verdicts(submission(ex_id, "Ada"), ex_id, tmp_path)
    assert len(verdicts) == len(EXERCISES[ex_id].parts)
    assert all("✓" in t or "✎" in t for t in verdicts), verdicts


def test_check_says_close_and_notes_changed_inputs(tmp_path, forked_kernels) -> None:
    nb = submission("8-8", "Ada", answers={"net_speedup": "net_speedup = 1.4",
                                           "breakeven_setup_s": "breakeven_setup_s = 37.5"})
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace("setup_s = 8.0", "setup_s = 9.0")
    verdicts = _verdicts(nb, "8-8", tmp_path)
    assert "≈ close: check the rounding (to two decimals)" in verdicts[1]
    assert "inputs differ" in verdicts[1] and "✓" in verdicts[2]


def test_a_cell_ending_in_check_shows_its_verdict_once_and_no_repr(tmp_path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from inferlab.exercises import checker\ncheck = checker('8-8')\ncheck('halved_s', 1.0)")])
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    shown = [o for o in outputs if o.output_type in ("display_data", "execute_result")]
    assert len(shown) == 1 and "text/markdown" in shown[0].data, outputs
    assert not any("Verdict(" in str(o) for o in outputs)
