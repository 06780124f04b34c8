"""The first code cell of every notebook: install ``inferlab`` where it is missing (Colab, JupyterLite).

The repository URL lives in one place, ``repository.url`` in ``_config.yml``; this module writes it
into the cell. ``python -m inferlab.book.install_cell`` (re)writes the cell of every notebook in
``chapters/`` and ``exercises/``; ``tests/test_lite.py`` checks that each notebook has the current one.
Where ``import inferlab`` works (a local checkout, Binder, the book build), the cell does nothing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[3]
TAG = "inferlab-install"
_TEMPLATE = '''\
# Colab and JupyterLite: install inferlab when it is missing (URL: repository.url in _config.yml)
try:
    import inferlab
except ImportError:
    import sys
    if sys.platform == "emscripten":  # JupyterLite: the wheel (data/ inside) ships with the book
        import piplite
        await piplite.install("inferlab")
    else:  # Colab: the repository with its data/, installed in place
        !git clone --quiet --depth 1 {url} /content/inferlab-book
        %pip install --quiet -e /content/inferlab-book
        sys.path.append("/content/inferlab-book/lib")  # a new kernel would find it without this line
'''


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """``repository.url`` of the book's ``_config.yml``."""
    match = re.search(r"^repository:\s*\n(?:[ \t]+.*\n)*?[ \t]+url:\s*(\S+)", config.read_text(), re.M)
    if match is None:
        raise ValueError(f"config ({config}) has no repository.url")
    return match.group(1)


def cell_source(url: str) -> str:
    """The install cell's code for the repository at ``url``."""
    if not url.startswith("https://"):
        raise ValueError(f"url must be an https:// repository URL, got {url!r}")
    return _TEMPLATE.format(url=url)


def ensure_install_cell(path: Path, url: str) -> bool:
    """Make the first code cell of notebook ``path`` the install cell (hidden in the book); True if it changed.

    It goes right before the first code cell, so a notebook still opens with its title.
    """
    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_code_cell(cell_source(url), metadata={"tags": [TAG, "remove-cell"]})
    tagged = [c for c in nb.cells if TAG in c.get("metadata", {}).get("tags", [])]
    if tagged:
        if tagged[0].source == cell.source:
            return False
        tagged[0].source = cell.source
    else:
        first_code = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
        nb.cells.insert(first_code, cell)
    nbformat.write(nb, path)
    return True


def has_install_cell(path: Path, url: str) -> bool:
    """True if the first code cell of notebook ``path`` is the current install cell."""
    nb = nbformat.read(path, as_version=4)
    first_code = next((c for c in nb.cells if c.cell_type == "code"), None)
    return first_code is not None and first_code.source == cell_source(url)


def notebooks(root: Path = ROOT) -> list[Path]:
    """Every section and exercise notebook."""
    return sorted([*root.glob("chapters/*.ipynb"), *root.glob("exercises/*.ipynb")])


if __name__ == "__main__":
    url = repository_url()
    changed = [p for p in notebooks() if ensure_install_cell(p, url)]
    print(f"install cell written to {len(changed)} notebooks", file=sys.stderr)
