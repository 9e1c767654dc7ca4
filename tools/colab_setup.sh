#!/bin/sh
# What a notebook's Colab set-up installs (its one hidden cell clones the repository and runs this): the companion
# itself (pyproject.toml: the core, chapters, book tools and their run-time packages) and the packages installed
# without their dependencies (requirements-nodeps.txt: the causal-LM control's weights). `make check-colab` runs
# every chapter in a fresh virtual environment made by this script alone.
# Usage: sh tools/colab_setup.sh [PYTHON]   (the notebook passes its own interpreter, sys.executable)
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python3}"  # the notebook passes sys.executable
"$python" -m pip install -q -e "$here"
"$python" -m pip install -q --no-deps -r "$here/requirements-nodeps.txt"
