"""The environment `make` installs: requirements.txt alone (uv --no-deps) must be complete, and lean where it counts."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _installed() -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}


def test_every_installed_package_finds_what_it_requires():
    """What `pip check` asks, without extras: with --no-deps, a package missing from the list would show here."""
    installed, missing = _installed(), []
    for dist in metadata.distributions():
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            have = installed.get(canonicalize_name(req.name))
            if have is None or not req.specifier.contains(have, prereleases=True):
                missing.append(f"{dist.metadata['Name']} needs {spec} (found {have})")
    assert not missing, missing


def test_the_list_is_pinned_and_leaves_the_slow_iri_checker_out():
    lines = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == "-e ." and all(re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.+\-]+", line) for line in lines[:-1])
    names = {canonicalize_name(line.split("==")[0]) for line in lines[:-1]}
    assert "rfc3987-syntax" not in names and "lark" not in names


def test_importing_the_notebook_tools_does_not_build_an_iri_parser():
    code = "import sys, nbclient, nbformat; nbformat.validate(nbformat.v4.new_notebook()); print('rfc3987_syntax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_third_party_import_of_the_library_is_declared():
    """A wheel installed alone (Colab's install cell, JupyterLite's piplite) must bring what the library imports.

    The models and figures' imports are in ``dependencies``; the tooling's (headless execution, the grader, the
    install cell) in the ``tools`` extra; the GPU code's in the ``gpu`` extra.
    """
    import ast
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    extras = {name: {canonicalize_name(Requirement(r).name) for r in reqs} | declared
              for name, reqs in project["optional-dependencies"].items()}
    tooling = ("headless.py", "grade.py", "exercises/grader.py", "exercises/worker.py", "exercises/sandbox.py",
               "exercises/answers.py", "book/install_cell.py", "book/sphinx_offline.py", "book/pdf.py")
    distributions = metadata.packages_distributions()
    missing = []
    for path in sorted((ROOT / "lib" / "inferlab").rglob("*.py")):
        rel = path.relative_to(ROOT / "lib" / "inferlab").as_posix()
        allowed = (extras["gpu"] if rel.startswith("gpu/") or rel == "kernels/triton_paged.py"
                   else extras["tools"] if rel in tooling else declared)
        for node in ast.walk(ast.parse(path.read_text())):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            for top in {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"inferlab"}:
                dists = {canonicalize_name(d) for d in distributions.get(top, [top])}
                if not dists & allowed:
                    missing.append(f"{rel}: {top} ({', '.join(sorted(dists))})")
    assert not missing, "imports not declared in pyproject.toml: " + "; ".join(missing)
