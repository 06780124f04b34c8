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
