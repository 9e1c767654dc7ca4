"""The README's first examples run as a new user runs them, in seconds, and print what the README shows."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# each ```python block followed by the ``` block of its output
EXAMPLES = re.findall(r"```python\n(.*?)```\n\n```\n(.*?)```", README, flags=re.S)


def test_the_readme_is_one_screen_and_names_no_commit():
    assert len(README.splitlines()) <= 150
    assert not re.search(r"\b[0-9a-f]{7}\b", README), "a commit id in the README: dated notes go to CHANGELOG.md"
    assert len(EXAMPLES) == 2, "the README shows an English and a protein example, each with its output"


@pytest.mark.notebook
@pytest.mark.parametrize("index", range(2), ids=["english", "protein"])
def test_each_example_prints_what_the_readme_shows(index, tmp_path):
    code, shown = EXAMPLES[index]
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout == shown
