# Set-up is part of every target: a fresh machine needs only Python 3.11 and make.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := $(VENV)/.torch
JOBS   ?= 2

.PHONY: book test unit notebooks outputs-check build-check lab bench clean strip

$(STAMP): requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# torch only for the GPU code, which CI runs on the CPU at tiny sizes (a CPU build; readers add it with requirements-gpu.txt)
$(TORCH): $(STAMP)
	$(PY) -m pip install --quiet torch==2.13.0
	touch $(TORCH)

book: $(STAMP)  ## execute every notebook and build the HTML into _build/html
	@# the execution cache is keyed on notebook text only: drop it when the library or data changed
	@if [ -d _build/.jupyter_cache ] && [ -n "$$(find lib data -type f -newer _build/.jupyter_cache | head -1)" ]; then \
		rm -rf _build/.jupyter_cache; fi
	$(VENV)/bin/jupyter-book build . -W -n --keep-going

test: $(STAMP) outputs-check unit build-check notebooks  ## every test (pytest closes the run)

unit: $(STAMP) $(TORCH)
	$(PY) -m pytest tests -m "not notebook" -n $(JOBS) -q

notebooks: $(STAMP)
	$(PY) -m pytest --nbmake --nbmake-timeout=300 -n $(JOBS) -q $(wildcard chapters/*.ipynb exercises/*.ipynb)

outputs-check: $(STAMP)
	$(PY) -m pytest tests/test_repo.py -q

build-check: $(STAMP)
	rm -rf _build
	$(VENV)/bin/jupyter-book build . -W -n --keep-going

lab: $(STAMP)
	$(VENV)/bin/jupyter lab

bench: $(STAMP)
	$(PY) benchmarks/run.py

strip: $(STAMP)  ## remove outputs from every notebook before committing
	$(VENV)/bin/nbstripout --keep-id $(wildcard chapters/*.ipynb exercises/*.ipynb)

clean:
	rm -rf _build .pytest_cache .hypothesis
