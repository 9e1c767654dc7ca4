# Two entry points for a fresh machine: `make book` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup book book-smoke check-book test benchmark clean

setup: $(STAMP)

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Executes every notebook with the bundled model at BOOK_PROFILE (`quick` by default; `make book-smoke` is the
# CI variant) and builds _build/html. The execution cache is keyed on notebook code only, so all notebooks are
# re-executed (cache and Sphinx environment dropped) when the core or the model changed, or when the profile
# differs from the one the cache was built with. The summary pages (book/reproduction, book/performance) run
# on every build (tools/book_sphinx.py): they read the CSVs the chapters write under results/.
BOOK_PROFILE ?= quick
CACHE := _build/.jupyter_cache
BUILT_PROFILE := _build/.book-profile
book: setup
	@fresh=""; \
	if [ -d $(CACHE) ] && [ -n "$$(find glauber_core.py models results/model -newer $(CACHE) -print -quit)" ]; then \
		echo "core or model changed: re-executing all notebooks"; fresh=1; fi; \
	if [ "$$(cat $(BUILT_PROFILE) 2>/dev/null)" != "$(BOOK_PROFILE)" ]; then \
		echo "building at the $(BOOK_PROFILE) profile: re-executing all notebooks"; fresh=1; fi; \
	if [ -n "$$fresh" ]; then rm -rf $(CACHE) _build/.doctrees; fi
	mkdir -p _build && echo "$(BOOK_PROFILE)" > $(BUILT_PROFILE)
	GLAUBER_PROFILE=$(BOOK_PROFILE) HF_HUB_OFFLINE=1 $(BIN)/jupyter-book build . -W -n --keep-going
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

# Core unit tests plus every notebook at the `smoke` profile (nbmake). The notebooks' CSVs go to
# _build/test-results/, so that smoke runs never replace the numbers the book shows (results/).
test: setup
	GLAUBER_PROFILE=smoke GLAUBER_RESULTS=$(CURDIR)/_build/test-results HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

# Writes results/benchmarks/glauber_speed.csv (committed; the book's performance appendix reads it).
benchmark: setup
	$(BIN)/python benchmarks/glauber_speed.py

clean:
	rm -rf _build results/*/checkpoints
