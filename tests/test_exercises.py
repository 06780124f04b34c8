"""Exercise parts: references, the comparison rule and in-notebook feedback."""

import math

import nbformat
import pandas as pd
import pytest
from nbclient import NotebookClient

from _submissions import notebook_path, submission
from inferlab.exercises import EXERCISES, attempted, check, checker, exercise, judge
from inferlab.exercises.core import Part
from inferlab.exercises.data import EXERCISE_DATA, build, exercise_data


def test_printed_answers_are_the_references() -> None:
    e1, e2, e3, e4, e8, e9 = (EXERCISES[k] for k in ("8-1", "8-2", "8-3", "8-4", "8-8", "8-9"))
    assert (e1.part("b_kv_2k").expected(), e1.part("b_kv_8k").expected()) == (51, 13)
    assert (e1.part("max_requests_2k").expected(), e1.part("max_requests_8k").expected()) == (37, 10)
    assert e1.part("capacity_binds_first").expected() is True
    assert round(e2.part("prefill_r0_r1_ms").expected(), 2) == 163.33
    assert round(e2.part("decode_ms").expected(), 2) == 26.29
    assert round(e2.part("admit_r2_ms").expected(), 2) == 375.97
    assert (e2.part("pairs_h0").expected(), e2.part("pairs_h7680").expected()) == (131_328, 4_063_488)
    assert e3.part("total_waste").expected() == {2: 4, 4: 10, 8: 14}
    assert e3.part("table_entries").expected() == {2: 23, 4: 13, 8: 7}
    assert e3.part("independent_mib").expected() == {8: 9504, 16: 19_008, 32: 38_016}
    assert e3.part("shared_mib").expected() == {8: 3456, 16: 6048, 32: 11_232}
    assert e3.part("blocks_saved").expected() == [0, 1, 15, 99]
    assert round(e4.part("value_a_ms").expected(), 1) == 132.7
    assert round(e4.part("value_three_b_ms").expected(), 1) == 120.9
    assert round(e4.part("p_a_crossover").expected(), 3) == 0.460
    assert round(e4.part("p_a_crossover_gen4").expected(), 3) == 0.458
    assert e8.part("halved_s").expected() == {"prefill": 90, "decode": 75, "tools": 85}
    assert round(e8.part("net_speedup").expected(), 2) == 1.42 and e8.part("breakeven_setup_s").expected() == 37.5
    assert e9.part("e_kv_mib").expected() == 6048 and round(e9.part("e_total_s").expected(), 2) == 5.55
    assert round(e9.part("e_gpu_s_per_good").expected(), 3) == 0.347
    assert [e9.part(p).expected() for p in ("best_12gib", "best_6gib", "best_16_outputs")] == ["D", "E", "E"]


def test_judge_rules() -> None:
    num = Part("x", "q", lambda: 2.0, rtol=0.01)
    assert judge(num, 2.01).status == "correct" and judge(num, 2.1).status == "wrong"
    assert judge(num, ...).status == "not attempted" and judge(num, None).status == "not attempted"
    assert judge(num, True).status == "wrong" and judge(num, "2.0").status == "wrong"
    assert judge(num, math.nan).status == "wrong"
    exact = Part("n", "q", lambda: 51, rtol=0)
    assert judge(exact, 51).status == "correct" and judge(exact, 52).status == "wrong"
    table = Part("t", "q", lambda: pd.DataFrame({"a": [1.0, 2.0]}))
    assert judge(table, pd.DataFrame({"a": [1.0, 2.0]})).status == "correct"
    assert judge(table, {"a": [1.0, 2.0]}).status == "correct"
    assert judge(table, [[1.0], [2.5]]).status == "wrong"
    d = Part("d", "q", lambda: {2: [1, 1], 4: [3, 3]}, rtol=0)
    assert judge(d, {2: [1, 1], 4: [3, 3]}).status == "correct" and judge(d, {2: [1, 1]}).status == "wrong"
    free = Part("why", "q")
    assert free.manual and judge(free, "because").status == "manual" and judge(free, "...").status == "not attempted"
    wrong = judge(num, 3.0)
    assert wrong.points == 0 and "2.0" not in wrong.message  # a hint, never the answer


def test_check_gives_feedback_and_handles_functions() -> None:
    assert check("8-1", "b_kv_2k", 51).status == "correct"
    assert check("8-1", "b_kv_2k", 50).status == "wrong"
    assert checker("8-3")("blocks_saved", lambda b: b - 1).status == "correct"
    assert checker("8-3")("blocks_saved", lambda b: 1 / 0).status == "wrong"
    with pytest.raises(ValueError, match="exercise_id"):
        exercise("8-0")
    with pytest.raises(ValueError, match="part"):
        check("8-1", "nope", 1)
    assert not attempted(...) and attempted(0)


def test_shipped_data_matches_the_code_that_made_it() -> None:
    for name in EXERCISE_DATA:
        shipped, fresh = exercise_data(name), build(name)
        pd.testing.assert_frame_equal(shipped.reset_index(drop=True), fresh.reset_index(drop=True),
                                      check_dtype=False, rtol=1e-8)


@pytest.fixture(scope="module")
def forked_kernels():
    """Kernels forked from a warm server, as nbmake's (``tests/_forked_kernels.py``): numpy, pandas, sympy and
    Matplotlib are imported once for the six notebooks below, not once per notebook."""
    import _forked_kernels as fk
    from jupyter_client.provisioning import local_provisioner

    launch = fk.forking(local_provisioner.launch_kernel)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_provisioner, "launch_kernel", launch)
        yield
    launch.server.close()


@pytest.mark.parametrize("ex_id", ["8-1", "8-3", "8-5", "8-6", "8-7", "8-8"])
def test_a_solved_notebook_says_correct_everywhere(ex_id: str, tmp_path, forked_kernels) -> None:
    nb = submission(ex_id, "Ada")
    NotebookClient(nb, timeout=120, resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = [o.get("data", {}).get("text/markdown", "") for c in nb.cells for o in c.get("outputs", [])]
    verdicts = [t for t in texts if f"**{ex_id} `" in t]
    assert len(verdicts) == len(EXERCISES[ex_id].parts)
    assert all("✅" in t or "📝" in t for t in verdicts), verdicts


def test_shipped_notebooks_name_their_exercise() -> None:
    for ex in EXERCISES.values():
        nb = nbformat.read(notebook_path(ex.id), as_version=4)
        assert nb.metadata["inferlab"]["exercise"] == ex.id
        sources = "\n".join(c.source for c in nb.cells)
        for part in ex.parts:
            assert f"{part.name} = " in sources and f'check("{part.name}", {part.name})' in sources


def test_printed_answers_of_8_5_to_8_7() -> None:
    e5, e6, e7 = (EXERCISES[k] for k in ("8-5", "8-6", "8-7"))
    assert e5.part("net_mib").expected() == {1: 2304, 2: 2016}
    assert e5.part("extra_inputs").expected() == {1: 2, 2: 1} and e5.part("extra_requests").expected() == {1: 1, 2: 1}
    step = e5.part("copy_step_ms").expected()
    assert round(step["gen5"], 1) == 42.5 and round(step["c2c"], 1) == 6.0
    total = e5.part("copy_255_s").expected()
    assert round(total["gen5"], 1) == 10.8 and round(total["c2c"], 2) == 1.54
    assert e6.part("kv_mib").expected() == {"q8_0": {"input": 612, "request": 631.125},
                                            "q4_0": {"input": 324, "request": 334.125}}
    assert e6.part("changed_tasks").expected() == [5, 6]
    assert round(e6.part("retry_overhead_s").expected(), 6) == 2.0
    assert e7.part("expected_tokens").expected()[4] == pytest.approx(3.05, abs=0.005)
    assert e7.part("better_length").expected() == 4
