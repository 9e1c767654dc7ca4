# Two entry points for a fresh machine: `make book` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup lint calibrate power-curves seed-record book book-smoke check-book check-colab check-models check-random test test-fast test-calibration benchmark gpu-check across-models antiberty clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Executes every notebook with the bundled model (glauber_core.DEFAULT_MODEL_DIR, named only there) at BOOK_PROFILE (`quick` by default; `make book-smoke` is the
# CI variant) and builds _build/html. The chapters write their CSVs to the build's own results folder,
# _build/results/<profile>/, which only this target writes: hand runs, tests and sweeps write to results/ (or
# $GLAUBER_RESULTS) and never change what a cached chapter page or the summary pages show. The execution cache is
# keyed on notebook code only, so all notebooks are re-executed (cache, Sphinx environment and the build's
# results dropped) when the core, the chapter modules, book_tools, the paper's side (book/paper_claims.csv,
# profiles.py) or the models changed, or when the profile
# differs from the one the cache was built with. The summary pages (book/reproduction, book/performance) run on
# every build (tools/book_sphinx.py) and refuse a results row of another profile, model or code version.
BOOK_PROFILE ?= quick
CACHE := _build/.jupyter_cache
BUILT_PROFILE := _build/.book-profile
BOOK_RESULTS := $(CURDIR)/_build/results/$(BOOK_PROFILE)
book: setup
	@fresh=""; \
	if [ -d $(CACHE) ] && [ -n "$$(find glauber_core.py book_tools.py verdicts.py profiles.py book/paper_claims.csv chapters models results/model -newer $(CACHE) -print -quit)" ]; then \
		echo "core, chapters or models changed: re-executing all notebooks"; fresh=1; fi; \
	if [ "$$(cat $(BUILT_PROFILE) 2>/dev/null)" != "$(BOOK_PROFILE)" ]; then \
		echo "building at the $(BOOK_PROFILE) profile: re-executing all notebooks"; fresh=1; fi; \
	if [ -n "$$fresh" ]; then rm -rf $(CACHE) _build/.doctrees $(BOOK_RESULTS); fi
	mkdir -p _build && echo "$(BOOK_PROFILE)" > $(BUILT_PROFILE)
	GLAUBER_PROFILE=$(BOOK_PROFILE) GLAUBER_RESULTS=$(BOOK_RESULTS) HF_HUB_OFFLINE=1 \
		$(BIN)/jupyter-book build . -W -n --keep-going
	touch $(CACHE)

book-smoke:
	$(MAKE) --no-print-directory book BOOK_PROFILE=smoke

# Opens every page of _build/html in headless Chromium (Debian's `chromium` + `chromium-driver`, installed
# here when missing) and fails on an error or traceback on a page, a broken or empty image, unrendered math,
# a broken internal link or anything loaded from another host. Screenshots: _build/screenshots/.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
check-book: setup
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; fi
	$(BIN)/python tools/check_book.py _build/html --screenshots _build/screenshots

# Core unit tests plus every notebook at the `smoke` profile (nbmake); the calibrations (tests marked
# `calibration`) are `make test-calibration`, which CI runs beside it, so that this suite stays within 6 minutes of
# pytest (the marker expression repeats addopts' own, which a command-line -m replaces). The notebooks' CSVs go to
# _build/test-results/, so that smoke runs never replace the numbers the book shows (results/). The tests run as a
# new user would: HOME, the user cache and matplotlib's config point at an empty folder, so a dependency's
# first-run effect (a daily notice, a font cache, a stamp) shows up here rather than on a reader's machine.
TEST_HOME := $(CURDIR)/_build/test-home
TEST_WORKERS ?= 2  # pytest-xdist workers, one torch thread each (each test file on one worker, so that its module fixtures are built once)
# make test keeps the collection order (--no-loadscope-reorder): tests/conftest.py puts the longest files, the notebooks
# among them, first; xdist's default order (most tests first) would leave the one-test notebooks to the end.
TEST_ENV := HOME=$(TEST_HOME) XDG_CACHE_HOME=$(TEST_HOME)/.cache MPLCONFIGDIR=$(TEST_HOME)/.config/matplotlib \
	GLAUBER_PROFILE=smoke GLAUBER_RESULTS=$(CURDIR)/_build/test-results HF_HUB_OFFLINE=1
test: setup
	rm -rf _build/test-results $(TEST_HOME) && mkdir -p $(TEST_HOME)
	$(TEST_ENV) OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 \
		-m "not calibration and not quick_profile and not any_model"

# tests/ without nbmake, in a fresh test home; the targets below add the marker expression to select
PYTEST_TESTS = rm -rf _build/test-results $(TEST_HOME) && mkdir -p $(TEST_HOME) && $(TEST_ENV) OMP_NUM_THREADS=1 \
	$(BIN)/python -m pytest tests -o addopts="-p no:cacheprovider" -p no:nbmake -n $(TEST_WORKERS) --dist loadfile \
	--durations=10

# The inner loop: the unit tests without any notebook run or calibration (tests marked `notebook` or `calibration`,
# and the nbmake items, skipped).
test-fast: setup
	$(PYTEST_TESTS) -m "not notebook and not calibration"

# After changing a verdict rule: the calibrations alone (tests/test_calibration_*.py, marker `calibration`).
test-calibration: setup
	$(PYTEST_TESTS) -m calibration

# The Colab path: every chapter at the smoke profile in a fresh virtual environment made only from what Colab has
# plus the notebooks' set-up (tools/colab_setup.sh: `pip install -e .` and requirements-nodeps.txt). CI runs it.
check-colab:
	sh tools/check_colab.sh

# Every chapter at the smoke profile on tiny RoBERTa- and ModernBERT-style models and on AntiBERTy
# (tests/test_any_model.py, fifteen notebook runs; CI runs it after make test, which leaves them out).
check-models: setup
	rm -rf $(TEST_HOME) && mkdir -p $(TEST_HOME)
	$(TEST_ENV) OMP_NUM_THREADS=1 $(BIN)/python -m pytest tests/test_any_model.py -m "any_model and not quick_profile" \
		-o addopts="-p no:cacheprovider" -n $(TEST_WORKERS) --durations=5

# At the quick profile, chapters 4 and 5 on a random-weight MLM must reproduce nothing (CI runs it).
check-random: setup
	rm -rf $(TEST_HOME) && mkdir -p $(TEST_HOME)
	$(TEST_ENV) GLAUBER_PROFILE=quick $(BIN)/python -m pytest tests/test_any_model.py -m quick_profile \
		-o addopts="-p no:cacheprovider" --durations=5

# ruff (pinned in requirements.txt; rules, line length and excludes in pyproject.toml): lint and format check.
# `ruff format .` then `jupytext --sync notebooks/*.ipynb book/*.ipynb` formats (the pages as .ipynb).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The seed record (results/seeds/): every chapter at the quick profile with seed 1 and seed 2 (papermill, into
# _build/seeds/seed<k>/; a chapter whose claims there are at its current code version is skipped, so an interrupted
# record resumes), compared with seed 0, the `make book` build's _build/results/quick/ (run `make book` first).
SEED_RUNS := _build/seeds
CHAPTERS := $(sort $(wildcard notebooks/0*.ipynb))
seed-record: setup
	@for seed in 1 2; do for notebook in $(CHAPTERS); do \
		name=$$(basename $$notebook .ipynb); out=$(CURDIR)/$(SEED_RUNS)/seed$$seed; \
		code=$$($(BIN)/python -c "import book_tools as bt, sys; print(bt.code_version(sys.argv[1]))" $$name); \
		if grep -qs ",$$code," $$out/$$name/claims.csv; then echo "$$name seed $$seed: done"; continue; fi; \
		echo "$$name seed $$seed"; mkdir -p $$out; \
		GLAUBER_PROFILE=quick GLAUBER_RESULTS=$$out HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 \
			$(BIN)/papermill --no-progress-bar $$notebook $$out/$$name.ipynb -p seed $$seed -p profile quick || exit 1; \
	done; done
	$(BIN)/python tools/compare_verdicts.py _build/results/quick $(SEED_RUNS)/seed1 $(SEED_RUNS)/seed2 \
		--out results/seeds/quick_seeds.csv

# The verdict rules' operating characteristics at the book's own size (tools/calibrate.py): each case's verdict over
# 50 seeds (nlogn_fit 100: its wrong share is judged over at least 100), resumable, into results/calibration/
# (committed). Exits 1 when a case's wrong-decision share is over 10%.
calibrate: setup
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python tools/calibrate.py --jobs 2
	HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python tools/calibrate.py --jobs 2 --seeds 100 --claims nlogn_fit

# The power curves: every case again at 4 and 16 times the sizes its claim names (pairs, chains or steps; the cases'
# SIZES), 50 seeds each, resumable, into results/calibration/power/x4 and x16; results/calibration/power_curves.csv
# gathers them with the quick size's (the trust page draws it). A wrong share over 10% at a larger size is a finding
# to read there, so both sizes run whatever the first shows.
power-curves: setup
	status=0; for scale in 4 16; do HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 $(BIN)/python tools/calibrate.py --jobs 2 \
		--scale $$scale || status=1; done; exit $$status

# Writes results/benchmarks/glauber_speed.csv (committed; the book's performance appendix reads it).
benchmark: setup
	$(BIN)/python benchmarks/glauber_speed.py

# The one GPU check on a lent CUDA machine (benchmarks/gpu_check.py; what to carry and the one command:
# benchmarks/README.md): the CUDA tests, CPU against CUDA conditionals, the benchmark at B = 64 to 4096 on the bundled
# model and a bert-base-shaped one, one paper-profile Fig. 2 cell; CSVs under results/benchmarks/gpu/ (or GPU_OUT).
# No set-up: that machine has its own packages and no registry, so it runs the python it has (.venv's where there is
# one). `make gpu-check DRY_RUN=1` runs every step on the CPU at tiny sizes (the test suite runs it).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu-check:
	HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 $(GPU_PYTHON) benchmarks/gpu_check.py $(if $(DRY_RUN),--dry-run) \
		$(if $(GPU_OUT),--out $(GPU_OUT))

# Chapters 1, 2 and 4 at the quick profile on every bundled model (sweep.py; about 18 min on 2 cores). Writes
# results/across_models/ (committed; the book's "Across models" page reads it and names this command).
across-models: setup
	HF_HUB_OFFLINE=1 $(BIN)/python tools/across_models.py

# Every chapter on AntiBERTy, a protein MLM pretrained by others, in whole germline genes (69 min on 2 cores). Writes
# results/antiberty/ (committed; the book's "A pretrained MLM: AntiBERTy" page reads it and names this command).
antiberty: setup
	HF_HUB_OFFLINE=1 $(BIN)/python tools/across_models.py --set antiberty

clean:
	rm -rf _build results/*/checkpoints
