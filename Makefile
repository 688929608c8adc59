# Two entry points for a fresh machine: `make demo` (the runtime only, no Node) and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: runtime install browser demo test wheel-check

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# What the demo needs and nothing more: torch and the package's own dependencies. No test
# extras, no Node: SKIP_JUPYTER_BUILDER (hatch-jupyter-builder) leaves the JupyterLab extension
# unbuilt, which the command line and the text/HTML reports do not use.
runtime: $(BIN)/python
	# torch pinned: the CPU wheel; an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	SKIP_JUPYTER_BUILDER=1 $(BIN)/python -m pip install --quiet -e .

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==2.13.0
	# Builds the JupyterLab extension too (Node + jlpm, through hatch-jupyter-builder).
	$(BIN)/python -m pip install --quiet -e ".[test]"

# Debian's Chromium for the browser tests (no test tool downloads a browser of its own).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "browser tests need Chromium: sudo apt-get install chromium"; fi; }

demo: runtime
	$(BIN)/python -m gpu_notebook demo --html demo-reports
	@echo "Open the HTML reports in demo-reports/. Next: . $(BIN)/activate puts gpucheck on PATH."

# The built wheel, installed where no Node exists, still lists the labextension "enabled OK" (~25 s).
wheel-check: install
	bash labextension/scripts/check-wheel.sh $(BIN)/python

test: install browser wheel-check
	$(BIN)/jupyter labextension list 2>&1 | grep -E "gpu-notebook.*enabled.*OK"
	cd labextension && PATH="$(CURDIR)/$(BIN):$$PATH" jlpm install --immutable && PATH="$(CURDIR)/$(BIN):$$PATH" jlpm test
	# The layers (pyproject [tool.importlinter]): a broken contract prints the import that broke it.
	$(BIN)/lint-imports
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/mypy
	GPU_NOTEBOOK_REQUIRE_BROWSER=1 $(BIN)/python -m pytest -q
