#!/bin/sh
# The Colab path, checked here: a fresh virtual environment with only what a Colab runtime already has (torch,
# Jupyter's kernel; papermill to run the notebooks) plus tools/colab_setup.sh, then every chapter at the smoke
# profile, offline. Fails on the first chapter that does not finish.
set -eu
cd "$(dirname "$0")/.."
venv=_build/colab-venv
rm -rf "$venv" _build/colab-results _build/colab-home
python3 -m venv "$venv"
export PATH="$PWD/$venv/bin:$PATH" HOME="$PWD/_build/colab-home" XDG_CACHE_HOME="$PWD/_build/colab-home/.cache"
mkdir -p "$HOME"
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0 ipykernel papermill   # what Colab has before the set-up runs
sh tools/colab_setup.sh python
export GLAUBER_PROFILE=smoke GLAUBER_RESULTS="$PWD/_build/colab-results" HF_HUB_OFFLINE=1
for notebook in notebooks/*.ipynb; do
    echo "colab path: $notebook"
    python -m papermill --no-progress-bar -k python3 --cwd notebooks "$notebook" "_build/colab-$(basename "$notebook")"
done
