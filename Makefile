# Two entry points for a fresh machine: `make book` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup book test benchmark clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Executes every notebook at the `quick` profile with the bundled model and builds _build/html.
# The execution cache is keyed on notebook code only: drop it when the core or the model changed.
CACHE := _build/.jupyter_cache
book: setup
	@if [ -d $(CACHE) ] && [ -n "$$(find glauber_core.py models results/model -newer $(CACHE) -print -quit)" ]; then \
		echo "core or model changed: re-executing all notebooks"; rm -rf $(CACHE); fi
	GLAUBER_PROFILE=quick HF_HUB_OFFLINE=1 $(BIN)/jupyter-book build . -W -n --keep-going
	touch $(CACHE)

# Core unit tests plus every notebook at the `smoke` profile (nbmake).
test: setup
	GLAUBER_PROFILE=smoke HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

benchmark: setup
	$(BIN)/python benchmarks/glauber_speed.py

clean:
	rm -rf _build results/*/checkpoints
