"""Hidden variants, the review of forbidden calls, and the instructor's outputs (free text, PrairieLearn, Gradescope).

The batch in tests/test_grade.py grades hostile notebooks in the sandbox; this file checks the pieces on
their own: the per-student seed (HMAC of the student under the run's secret), the rewriting of the
parameters cell, what the AST review flags and what it leaves alone, the report files, and a Gradescope
autograder bundle run end to end in a scratch folder laid out as Gradescope lays out /autograder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

import _submissions as subs
from inferlab.exercises import EXERCISES, exports, review, variants
from inferlab.exercises import grader as grade


# ---- the variant's seed and inputs --------------------------------------------------------------------------
def test_the_seed_is_an_hmac_of_the_student_under_the_runs_secret(monkeypatch) -> None:
    a = variants.seed(b"k", "ada_8-8", "8-8")
    assert a == variants.seed(b"k", "ada_8-8", "8-8")
    assert len({a, variants.seed(b"k", "bob_8-8", "8-8"), variants.seed(b"other", "ada_8-8", "8-8"),
                variants.seed(b"k", "ada_8-8", "8-3")}) == 4
    monkeypatch.delenv(variants.SECRET_ENV, raising=False)
    drawn, source = variants.secret()
    assert len(drawn) == 32 and "recorded nowhere" in source and variants.secret()[0] != drawn
    monkeypatch.setenv(variants.SECRET_ENV, "from the environment")
    assert variants.secret() == (b"from the environment", f"${variants.SECRET_ENV}")
    assert variants.secret("given") == (b"given", "--secret")


def test_the_parameters_cell_gets_the_runs_inputs_and_keeps_the_rest() -> None:
    source = "# inputs\nimport math\nsetup_s = 8.0  # s\nstages_s = {\n    'prefill': 20.0,\n}\nx = setup_s * 2\n"
    out = variants.assignments(source, {"setup_s": 9.5, "stages_s": {"prefill": 1.0}, "halving": 3.0})
    assert out == ("# inputs\nimport math\nsetup_s = 9.5  # s\nstages_s = {'prefill': 1.0}\nx = setup_s * 2\n"
                   "halving = 3.0\n")
    assert "halving = 3.0" in variants.assignments("%time x = (", {"halving": 3.0})  # a cell that does not parse
    nb = subs.submission("8-8", "Ada")
    index = variants.parameters_cell(nb, list(EXERCISES["8-8"].inputs))
    assert "parameters" in nb.cells[index].metadata["tags"]
    rewritten = variants.with_inputs(nb, index, {**EXERCISES["8-8"].inputs, "setup_s": 12.0})
    assert "setup_s = 12.0" in rewritten.cells[index].source and "setup_s = 8.0" in nb.cells[index].source
    untagged = subs.submission("8-8", "Ada")
    untagged.cells[index].metadata["tags"] = []  # found by what it assigns
    assert variants.parameters_cell(untagged, list(EXERCISES["8-8"].inputs)) == index
    assert variants.parameters_cell(subs.no_parameters(), list(EXERCISES["8-8"].inputs)) is None


# ---- the review ------------------------------------------------------------------------------------------
def test_honest_and_typed_notebooks_need_no_review() -> None:
    for ex_id, ex in EXERCISES.items():
        assert review.flags(subs.submission(ex_id, "Ada"), ex) == {}, ex_id
        assert review.flags(subs.typist(ex_id), ex) == {}, ex_id
        assert review.flags(nbformat.read(subs.notebook_path(ex_id), as_version=4), ex) == {}, ex_id


@pytest.mark.parametrize("cell", [
    "from inferlab.memory import paged_waste\ntail_waste = {b: paged_waste(lengths, b) for b in block_sizes}",
    "import inferlab.memory as m\ntail_waste = {b: m.paged_waste(lengths, b) for b in block_sizes}",
    "from inferlab import memory\nf = memory.paged_waste\ntail_waste = {b: f(lengths, b) for b in block_sizes}",
    "import inferlab\ntail_waste = {b: inferlab.kvcache.BlockManager for b in block_sizes}",
])
def test_a_forbidden_call_flags_its_part_only(cell: str) -> None:
    flagged = review.flags(subs.submission("8-3", "", answers={"tail_waste": cell}), EXERCISES["8-3"])
    assert set(flagged) == {"tail_waste"} and "rules forbid" in flagged["tail_waste"]


def test_a_helper_defined_elsewhere_is_followed_and_allowed_parts_are_left_alone() -> None:
    helper = subs.submission("8-3", "", extra="")
    helper.cells.insert(5, nbformat.v4.new_code_cell(
        "from inferlab.memory import blocks_for\ndef entries(b):\n    return sum(blocks_for(n, b) for n in lengths)"))
    for cell in helper.cells:
        if cell.source.startswith("table_entries = "):
            cell.source = "table_entries = {b: entries(b) for b in block_sizes}"
        if cell.source.startswith("from inferlab.units import MiB\ndef kv_mib"):  # part 4 may use inferlab.memory
            cell.source = ("from inferlab import memory\nfrom inferlab.example import MODEL\n"
                           "from inferlab.units import MiB\n" + cell.source.split("\n", 1)[1]
                           + "\n_check = memory.batch_kv_bytes(8, MODEL, 8192, 256)")
    assert set(review.flags(helper, EXERCISES["8-3"])) == {"table_entries"}


@pytest.mark.parametrize("cell", ["import inferlab.exercises.catalog as c", "from inferlab.exercises import EXERCISES",
                                  "import importlib\nc = importlib.import_module('inferlab.exercises.catalog')",
                                  "from inferlab import exercises", "check.__globals__['EXERCISES']",
                                  "checker.__globals__['EXERCISES']"])
def test_reaching_for_the_catalog_flags_every_part(cell: str) -> None:
    flagged = review.flags(subs.submission("8-8", "", extra=cell), EXERCISES["8-8"])
    if cell.startswith("check."):  # a lambda of the notebook's own: not resolved, so not flagged (a reading)
        assert flagged == {}
        return
    assert set(flagged) == {p.name for p in EXERCISES["8-8"].parts} and all("references" in w for w in flagged.values())


# ---- the instructor's outputs ------------------------------------------------------------------------------
def _subs() -> list[grade.Submission]:
    parts = [grade.PartResult("explanation", "manual", 0, 0, "", "Memory binds first.\n```\nnot code\n```"),
             grade.PartResult("b_kv_short", "wrong on variant", 0, 1,
                              "correct on the public inputs, wrong on the variant"),
             grade.PartResult("b_kv_long", "correct", 1, 1)]
    return [grade.Submission("a/ada_8-1.ipynb", "a/ada_8-1", "8-1", "graded", parts=parts, variant={"x": 1}),
            grade.Submission("=x.ipynb", "=x", "", "error", "not a readable notebook")]


def test_free_text_answers_are_collected_by_exercise_and_part() -> None:
    text = exports.free_text(_subs())
    assert "## Exercise 8-1" in text and "### `explanation`:" in text and "**a/ada_8-1**" in text
    assert "````text\nMemory binds first.\n```\nnot code\n```\n````" in text  # a longer fence than the answer's


def test_prairielearn_and_gradescope_results_have_the_documented_fields(tmp_path) -> None:
    pl = exports.prairielearn_results(_subs()[0])
    assert pl["gradable"] and pl["score"] == pytest.approx(1 / 2)
    assert [set(t) >= {"name", "points", "max_points", "output"} for t in pl["tests"]] == [True] * 3
    _validate_gradescope(exports.gradescope_results(_subs()[:1], "note", 1.23))
    grade._write(_subs()[:1], tmp_path, {"sandbox": "test"})
    assert json.loads((tmp_path / "results.json").read_text())["score"] == pytest.approx(1 / 2)  # one submission


GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format", "tags",
                   "visibility", "extra_data"}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def _validate_gradescope(results: dict) -> None:
    """Gradescope's results.json as its autograder documentation specifies it (fields, types, values)."""
    assert set(results) <= GRADESCOPE_TOP, set(results) - GRADESCOPE_TOP
    assert isinstance(results.get("score", 0), (int, float)) and isinstance(results["tests"], list)
    assert results.get("visibility", "visible") in VISIBILITY
    assert results.get("stdout_visibility", "hidden") in VISIBILITY
    for t in results["tests"]:
        assert set(t) <= GRADESCOPE_TEST and {"score", "max_score", "name", "output"} <= set(t), t
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["visibility"] in VISIBILITY and t.get("status", "passed") in ("passed", "failed")
        assert isinstance(t["name"], str) and isinstance(t["output"], str)


def test_a_gradescope_bundle_grades_a_submission_in_gradescopes_layout(tmp_path) -> None:
    bundle = tmp_path / "autograder.zip"
    made = subprocess.run([sys.executable, "-m", "inferlab.grade", "bundle", "--gradescope", str(bundle)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert "--no-sandbox" in made.stdout
    root = tmp_path / "autograder"  # /autograder as Gradescope lays it out
    for folder in ("source", "submission", "results"):
        (root / folder).mkdir(parents=True)
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "inferlab-src/pyproject.toml",
                "inferlab-src/data/exercises/expected.json", "inferlab-src/lib/inferlab/exercises/catalog.py"} <= names
        assert not any("__pycache__" in n for n in names)
        assert stat.S_IMODE(z.getinfo("run_autograder").external_attr >> 16) == 0o755
        z.extractall(root / "source")
    setup = (root / "source" / "setup.sh").read_text()
    assert "pip install" in setup and "apt" not in setup and "--no-sandbox" in setup
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # Gradescope copies it there
    os.chmod(root / "run_autograder", 0o755)
    # the second run (public inputs) must start clean: no variable and no file of the first survives it
    clean = ("RUNS = globals().get('RUNS', 0) + 1\nopen('mark', 'x').close()\n"
             "breakeven_setup_s = decode - decode / decode_speedup if RUNS == 1 else -1.0")
    nbformat.write(subs.submission("8-8", "Ada", answers={"breakeven_setup_s": clean}),
                   root / "submission" / "8-8-task-time.ipynb")
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"name": "Ada L", "email": "ada@x.org",
                                                                         "id": "4242"}]}))
    env = {**os.environ, "INFERLAB_AUTOGRADER_ROOT": str(root), "INFERLAB_PYTHON": sys.executable}
    done = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((root / "results" / "results.json").read_text())
    _validate_gradescope(results)
    assert results["score"] == EXERCISES["8-8"].max_points and len(results["tests"]) == len(EXERCISES["8-8"].parts)
    assert all(t["score"] == t["max_score"] == 1 and t["output"] == "correct" for t in results["tests"])
    assert "without a sandbox" in results["output"] and "variant" in results["output"]


def test_no_public_answer_is_merely_close_on_a_variant() -> None:
    """A typed public answer must read 'wrong on variant', never 'close: check the rounding' (found by the bench)."""
    from inferlab.exercises import EXERCISES
    from inferlab.exercises.core import compare

    for ex in EXERCISES.values():
        public = ex.expected()
        for seed in range(6):
            _, found = ex.variant(seed, public=public)
            close = [p.name for p in ex.parts if not p.manual and not p.choice and p.name in found
                     and compare(public[p.name], found[p.name], p)[0] == "close"]
            assert not close, (ex.id, seed, close)
