# Two commands for a fresh machine with only Python >= 3.11: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo demo-srs docs test test-slow lint bench clean

# uv (from PyPI) resolves and installs in parallel: ~10 s against pip's ~50 s here; pip is the
# fallback where uv cannot be installed.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv || $(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m uv pip install --quiet --python $(BIN)/python -e ".[dev]" || \
		$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/diffmbs fit data/mwsm/fit_demo.toml --out runs/demo

demo-srs: $(STAMP)
	$(BIN)/python -m diffmbs.app.demo --out runs/demo-srs

docs: $(STAMP)  # the site into site/, the notebooks executed (DIFFMBS_NOTEBOOK_QUICK=1: quick settings)
	NO_MKDOCS_2_WARNING=1 DIFFMBS_DOCS_EXECUTE=true $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/python -m pytest -q -n auto --dist loadgroup --max-worker-restart=0

test-slow: $(STAMP)  # only the checks `make test` leaves out for time
	DIFFMBS_SLOW_TESTS=1 $(BIN)/python -m pytest -q -n auto --dist loadgroup -m slow

bench: $(STAMP)
	$(BIN)/python benchmarks/srs.py
	$(BIN)/python benchmarks/mwsm.py

clean:
	rm -rf $(VENV) runs .pytest_cache build site *.egg-info
