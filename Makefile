# Set-up is part of every target: a fresh machine needs Python 3.11, make and npm (make test adds Debian chromium).
SHELL  := /bin/bash
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := $(VENV)/.torch
WEB    := web/node_modules/.installed
CACHE  := _build/.jupyter_cache
JOBS   ?= 2
NOTEBOOKS := $(wildcard chapters/*.ipynb exercises/*.ipynb)
UV     := $(VENV)/bin/uv
# uv downloads and unpacks in parallel (pip: 40 s for requirements.txt here, uv: 10 s); pinned like the rest
UV_VERSION := 0.13.8
# where pip is told to find local wheels (torch's CPU build on some machines), uv is told too
UV_LINKS = $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS))
# Python writes bytecode for what it imports, once, even where the machine sets PYTHONDONTWRITEBYTECODE
# (the alternative, compiling the whole venv up front, cost 30-45 s here, mostly for modules never imported)
export PYTHONDONTWRITEBYTECODE :=
# the execution cache is keyed on notebook code only: drop it when the library or data changed since its oldest
# notebook was stored (the folder's own time moves whenever one notebook is stored again). What Python and the
# wheel build write there (bytecode, egg-info) is not a change: the unit tests write bytecode while nbmake fills
# the cache, and counting it made the build execute every notebook again (170 s instead of 25 s in make test).
# Sphinx's doctrees go with it: the notebooks are unchanged, so the build would keep pages written from the old outputs.
SOURCES ?= lib data
DROP_STALE_CACHE = @oldest=$$(find $(CACHE) -name '*.ipynb' -printf '%T@ %p\n' 2>/dev/null | sort -n | head -1 | \
	cut -d' ' -f2-); if [ -n "$$oldest" ] && [ -n "$$(find $(SOURCES) -type f -newer "$$oldest" \
	-not -path '*/__pycache__/*' -not -path '*.egg-info/*' | head -1)" ]; then rm -rf $(CACHE) _build/.doctrees; fi

.PHONY: drop-stale-cache setup book test unit notebooks notebooks-run book-check outputs-check build-check browser chromium bubblewrap lab bench clean strip fonts pdf pdf-check

# A fresh venv holds no bytecode: each module is compiled on its first import. make test then starts six
# processes at once (each chain's pytest and its two workers) that import the same packages, and each compiled
# them until one had written them. Two imports here compile them once, while npm installs the web files
# (four processes importing these at once from a fresh venv: 59-60 CPU-s; this, then the four: 32-35).
WARM_A := sympy, pandas
WARM_B := inferlab.book.plot, inferlab.book.widgets, matplotlib.pyplot, ipywidgets, IPython, ipykernel.kernelapp, nbclient, \
	nbmake.nb_run, hypothesis, pytest, xdist

$(STAMP): requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet uv==$(UV_VERSION)
	$(UV) pip install --quiet --no-deps --python $(PY) -r requirements.txt
	$(PY) -c "import $(WARM_A)" & pid=$$!; $(PY) -c "import $(WARM_B)" && wait $$pid
	touch $(STAMP)

# MathJax, require.js and the widget manager, served by the book itself (pinned in web/package-lock.json)
$(WEB): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(WEB)

# torch only for the GPU code, which CI runs on the CPU at tiny sizes (a CPU build; readers add it with requirements-gpu.txt);
# triton for the paged-attention kernel, which CI runs in Triton's interpreter: 3.7.1 is the one torch 2.13.0's CUDA build requires
# (then imported once, as WARM_B's packages are: both unit-test workers import torch as they collect, and each
# compiled its 725 modules until one had written them)
$(TORCH): $(STAMP)
	$(UV) pip install --quiet --python $(PY) $(UV_LINKS) torch==2.13.0 triton==3.7.1
	$(PY) -c "import torch, triton"
	touch $(TORCH)

drop-stale-cache:
	$(DROP_STALE_CACHE)

# Python packages and npm side by side
setup:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(WEB)

book: setup fonts  ## execute every notebook and build the HTML into _build/html
	$(DROP_STALE_CACHE)
	@# an empty cache is filled by nbmake on $(JOBS) cores (conftest.py stores each run), not one notebook at a time
	@if [ ! -d $(CACHE) ]; then $(MAKE) --no-print-directory notebooks-run; fi
	$(VENV)/bin/jupyter-book build . -W -n --keep-going

# Each notebook executes once: nbmake runs it and stores it in the book's cache (conftest.py), the build reuses it.
# nbmake's kernels are forked from a warm process (tests/_forked_kernels.py): 65 -> 40 s for the 31 notebooks here.
# Two chains share the two cores (make -j2): the unit tests, and notebooks -> book build -> PDF and browser test.
# The book chain has single-threaded stretches (the build, Chromium waiting on a page); the unit tests fill them.
# torch installs at the head of the unit chain; the repository checks (tests/test_repo.py) run among the unit tests.
test: setup  ## every test
	rm -rf $(CACHE)
	@$(MAKE) --no-print-directory -j2 --output-sync=target unit book-check

# the built book checked end to end: every notebook (nbmake fills the cache), the -W build, then side by side the
# PDF with its checks and the browser test (both read the built site only; each is one Chromium, mostly one core).
# One make per step: a single make given them all would run the notebooks, the build and the rest side by side.
# The build must execute nothing here: nbmake has just run and stored every notebook.
book-check: $(STAMP) $(WEB)
	@$(MAKE) --no-print-directory notebooks-run
	@$(MAKE) --no-print-directory build-check
	@if grep "Executing notebook" _build/build.log; then \
		echo "the build executed the notebooks above again: their cache records were dropped or missed"; exit 1; fi
	@$(MAKE) --no-print-directory -j2 --output-sync=target pdf-check browser

unit: $(STAMP) $(TORCH) $(WEB) bubblewrap
	INFERLAB_REQUIRE_SANDBOX=1 $(PY) -m pytest tests -m "not book" -n $(JOBS) -q

notebooks: $(STAMP)
	rm -rf $(CACHE)
	@$(MAKE) --no-print-directory notebooks-run

notebooks-run:
	$(PY) -m pytest --nbmake --nbmake-timeout=300 -n $(JOBS) -q $(NOTEBOOKS)

outputs-check: $(STAMP)
	$(PY) -m pytest tests/test_repo.py -q

build-check: $(STAMP) $(WEB) fonts  ## the book from scratch, notebooks from the cache nbmake filled (if any)
	find _build -mindepth 1 -maxdepth 1 ! -name .jupyter_cache -exec rm -rf {} + 2>/dev/null || true
	$(DROP_STALE_CACHE)
	mkdir -p _build; set -o pipefail; $(VENV)/bin/jupyter-book build . -W -n --keep-going 2>&1 | tee _build/build.log

# the built book in headless Chromium (Debian package): every page opened once and checked as it renders, as its
# explorers and "Try it"s work and as it reads on a desktop and a phone in both modes; the JupyterLite site
browser: $(STAMP) chromium
	$(PY) -m pytest tests/test_browser.py tests/test_browser_explorers.py tests/test_browser_pages.py tests/test_lite.py \
		-m book -q

# Debian packages, installed when missing; the unit and book chains run side by side, so apt takes turns (flock)
APT_INSTALL = flock /tmp/inferlab-apt.lock sh -c 'apt-get update -qq && apt-get install -y -qq "$$@"' apt

chromium:
	@command -v chromium >/dev/null || $(APT_INSTALL) chromium chromium-driver

# the fonts the book's fallback webfonts are cut from at build time (inferlab.book.sphinx_offline.FALLBACK_FONTS):
# Noto Sans CJK SC for the glossary's Chinese terms, DejaVu Sans for symbols; fontconfig finds them
fonts:
	@command -v fc-match >/dev/null && fc-list | grep -q "Noto Sans CJK SC" && fc-list | grep -q "DejaVu Sans" || \
		$(APT_INSTALL) fontconfig fonts-noto-cjk fonts-dejavu-core

# The whole book as one PDF, _build/pdf/inferlab-book.pdf (and a copy in the site, linked from the landing page):
# every page of _toc.yml printed by chromium, merged with bookmarks (inferlab.book.pdf; about a minute)
PDF := _build/pdf/inferlab-book.pdf
pdf: book chromium
	$(PY) -m inferlab.book.pdf

# printed again when a page or the site's CSS or scripts changed since (a build rewrites only what changed, but
# pygments.css every time); inferlab.book.pdf says `make book` first where there is no site
SITE_FILES = $(filter-out _build/html/lite/% %/pygments.css,$(wildcard _build/html/*.html _build/html/*/*.html \
	_build/html/_static/*.css _build/html/_static/*.js))
$(PDF): $(SITE_FILES) | $(STAMP) chromium
	$(PY) -m inferlab.book.pdf

# in the book chain, beside the browser test: the PDF of the book just built, its checks, the check that the site
# ships no large file that nothing loads, and its links (the landing page's to the PDF among them)
pdf-check: $(STAMP) chromium $(PDF)
	$(PY) -m pytest tests/test_pdf.py tests/test_assets.py tests/test_links.py -m book -q

# the grader runs each student notebook in a bubblewrap sandbox (inferlab.exercises.sandbox)
bubblewrap:
	@command -v bwrap >/dev/null || $(APT_INSTALL) bubblewrap

# JupyterLab with jupyterlab-myst (requirements.txt: its lab and server extensions), so the notebooks' MyST
# (terms, admonitions, dropdowns, math) renders as on the book's pages. A glued value ({glue:text}) shows only
# its key there (jupyterlab-myst knows no glue); the book and the JupyterLite copies show the value.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab

bench: $(STAMP) $(WEB)  ## benchmarks/results.md and .csv (with make book / make test from fresh clones: ~15 min)
	$(PY) benchmarks/run.py --fresh-clone

strip: $(STAMP)  ## remove outputs from every notebook before committing
	$(VENV)/bin/nbstripout --keep-id $(NOTEBOOKS)

clean:
	rm -rf _build .pytest_cache .hypothesis
