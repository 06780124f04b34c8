"""Everything that exists only to present the book; no model imports it.

- ``prose``: ``glue``, numbers computed on a page named for its Markdown, ``number_table`` and ``formatted_table`` to print tables;
- ``plot``: the book's figures and explorers, one module per part of the chapter;
- ``widgets``: labelled controls wired to a pure draw function; ``static_explorers``: the same explorers in the
  static book, every state drawn at build time;
- ``sphinx_offline``: the Sphinx extension that serves the book offline; ``static/``: its CSS and scripts;
- ``install_cell``: the first cell of every notebook (installs ``inferlab`` on Colab and JupyterLite).
"""

from .prose import GLUE_PREFIX, formatted_table, glue, number_table, plain, readable_name, source_of

__all__ = ["GLUE_PREFIX", "formatted_table", "glue", "number_table", "plain", "readable_name", "source_of"]
