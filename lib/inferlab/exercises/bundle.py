"""A Gradescope autograder for the exercises: ``python -m inferlab.grade bundle --gradescope OUT.zip``.

The zip holds what Gradescope asks for at its top level, plus the library:

- ``setup.sh``: run once when Gradescope builds the image; installs from pip only (the library in
  ``inferlab-src``, the repository's ``lib/`` and ``data/`` as this grader has them, with its ``tools`` extra,
  and ipykernel). Gradescope's base image must have Python 3.11 or later (its Ubuntu 24.04 image).
- ``run_autograder``: run per submission; grades the notebooks in ``/autograder/submission/`` and writes
  ``/autograder/results/results.json`` (``exports.gradescope_results``: one test per part with ``score``,
  ``max_score``, ``name``, ``output``, ``visibility``). ``$INFERLAB_AUTOGRADER_ROOT`` moves ``/autograder``
  (the tests use a scratch folder), ``$INFERLAB_PYTHON`` the interpreter.

bubblewrap is not available inside Gradescope's container, so the bundle's grader runs with
``--no-sandbox``: the student's notebook runs unconfined in Gradescope's own container, which is then
the only isolation, and it could read the catalog's references there. results.json says so. The
variants' secret is ``$INFERLAB_GRADE_SECRET`` if the image sets one, else drawn per run (a regrade then
draws another variant); the student is the one named in ``submission_metadata.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["ROOT_ENV", "SETUP_SH", "RUN_AUTOGRADER", "NO_SANDBOX_NOTE", "build_gradescope", "run_gradescope", "main"]

ROOT_ENV = "INFERLAB_AUTOGRADER_ROOT"
NO_SANDBOX_NOTE = ("Graded without a sandbox (--no-sandbox): bubblewrap is not available in Gradescope's container, "
                   "so the notebook ran unconfined there. Each part is graded on a variant of the inputs.")

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image. It installs from pip only:
# the inferlab library shipped in this bundle (inferlab-src: the repository's lib/ and data/, installed in
# place so that its data/ is found) with the grader's tools, and ipykernel for the notebooks' kernel.
# bubblewrap is not available here, so run_autograder grades with --no-sandbox inside Gradescope's own
# container. Choose a base image with Python 3.11 or later (Ubuntu 24.04).
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"
PYTHON="${INFERLAB_PYTHON:-python3}"
install() { "$PYTHON" -m pip install --no-cache-dir "$@"; }
install --break-system-packages -e "$SOURCE/inferlab-src[tools]" ipykernel 2>/dev/null \\
    || install -e "$SOURCE/inferlab-src[tools]" ipykernel
"""

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission: it grades the notebooks in $ROOT/submission and writes
# $ROOT/results/results.json. The notebooks run WITHOUT a sandbox (--no-sandbox): bubblewrap is not available
# in Gradescope's container, which is the only isolation. ${ROOT_ENV} moves the root (default /autograder).
set -uo pipefail
ROOT="${{{ROOT_ENV}:-/autograder}}"
exec "${{INFERLAB_PYTHON:-python3}}" -m inferlab.grade gradescope --root "$ROOT"
"""

README = """inferlab exercises: Gradescope autograder

Upload this zip as the autograder (base image: Ubuntu 24.04, Python 3.11 or later). setup.sh installs the
library in inferlab-src with pip; run_autograder grades each submitted notebook (8-1 ... 8-9) twice, on a
variant of its inputs and on the public ones, and writes one test per part. The notebooks run without a
sandbox: Gradescope's container is the only isolation. Set INFERLAB_GRADE_SECRET in the image to draw the
same variant for a student on every regrade; without it each run draws its own.
"""


def _repository() -> tuple[Path, Path, Path | None]:
    """(the package folder, the data folder, the repository's pyproject.toml if this is a checkout)."""
    import inferlab

    from ..datasets import DATA_DIR

    package = Path(inferlab.__file__).resolve().parent
    pyproject = package.parents[1] / "pyproject.toml"
    return package, DATA_DIR, pyproject if pyproject.is_file() else None


def _pyproject() -> str:
    """A pyproject.toml for the bundled library when this one runs from a wheel (no checkout around it)."""
    from importlib import metadata

    try:
        requires = metadata.requires("inferlab") or []
    except metadata.PackageNotFoundError:
        requires = []
    base = [r for r in requires if "extra ==" not in r]
    tools = [r.split(";")[0].strip() for r in requires if 'extra == "tools"' in r]
    return ('[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "inferlab"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = {base!r}\n\n'
            f'[project.optional-dependencies]\ntools = {tools!r}\n\n[tool.setuptools.packages.find]\nwhere = ["lib"]\n')


def build_gradescope(target: Path) -> Path:
    """Write the autograder zip to ``target`` (see the module docstring); returns ``target``."""
    package, data, pyproject = _repository()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
        z.writestr("README.txt", README)
        z.writestr("inferlab-src/pyproject.toml", pyproject.read_text(encoding="utf-8") if pyproject else _pyproject())
        for folder, inside in ((package, "inferlab-src/lib/inferlab"), (data, "inferlab-src/data")):
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder)
                if path.is_file() and not path.is_symlink() and "__pycache__" not in rel.parts \
                        and not any(p.startswith(".") for p in rel.parts) and not (
                            folder == package and rel.parts[0] == "data"):
                    z.write(path, f"{inside}/{rel.as_posix()}")
    os.replace(tmp, target)
    return target


def _student(root: Path) -> str:
    """The submitter Gradescope names in submission_metadata.json (id, else email, else name), else 'student'."""
    try:
        users = json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")).get("users") or []
        user = users[0] if users and isinstance(users[0], dict) else {}
    except (OSError, ValueError, AttributeError):
        user = {}
    for key in ("id", "email", "name"):
        if str(user.get(key) or "").strip():
            return "".join(c if c.isalnum() or c in "@._-" else "_" for c in str(user[key]).strip())[:100]
    return "student"


def run_gradescope(root: Path, timeout_s: float = 120.0, secret: str | None = None) -> dict[str, Any]:
    """Grade ``root``/submission without a sandbox and write ``root``/results/results.json; returns its content."""
    from . import exports, grader
    from . import sandbox as sb

    t0 = time.monotonic()
    out = root / "results" / "results.json"
    student = _student(root)
    notebooks = sorted(p for p in (root / "submission").rglob("*.ipynb")
                       if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))
    try:
        if not notebooks:
            results = {"score": 0, "output": "No notebook (.ipynb) was found in the submission.",
                       "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
        else:
            references = grader._References()
            with sb.run_folder() as folder:
                run = grader._Run.make(folder, timeout_s, False, secret)
                subs = [grader.grade_file(p, timeout_s, p.relative_to(root / "submission").as_posix(), references,
                                          name=f"{student}/{p.name}", run=run) for p in notebooks]
            results = exports.gradescope_results(subs, NO_SANDBOX_NOTE, time.monotonic() - t0)
    except Exception as err:  # a result for Gradescope whatever happens: the student sees that grading failed
        results = {"score": 0, "output": f"The autograder failed: {type(err).__name__}: {err}"[:500],
                   "visibility": "visible", "stdout_visibility": "hidden", "tests": []}
    exports.atomic(out, json.dumps(results, indent=1, default=str))
    return results


def main(argv: list[str]) -> int:
    """``bundle --gradescope OUT.zip`` or ``gradescope --root DIR [--timeout S]`` (what run_autograder calls)."""
    command, rest = argv[0], argv[1:]
    if command == "bundle":
        ap = argparse.ArgumentParser(prog="python -m inferlab.grade bundle",
                                     description="Write an autograder for a learning-management system.")
        ap.add_argument("--gradescope", required=True, type=Path, metavar="OUT.zip",
                        help="the Gradescope autograder zip to write (setup.sh, run_autograder, the library)")
        args = ap.parse_args(rest)
        path = build_gradescope(args.gradescope)
        print(f"wrote {path}: upload it as a Gradescope autograder (Ubuntu 24.04 base image). The notebooks will "
              "run without a sandbox there (--no-sandbox): bubblewrap is not available in Gradescope's container.")
        return 0
    ap = argparse.ArgumentParser(prog="python -m inferlab.grade gradescope",
                                 description="Grade a Gradescope submission (what run_autograder calls).")
    ap.add_argument("--root", type=Path, default=Path(os.environ.get(ROOT_ENV, "/autograder")))
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(rest)
    os.makedirs(args.root / "results", exist_ok=True)
    run_gradescope(args.root, args.timeout)
    return 0
