"""One version number: pyproject.toml's `version` is the newest version of CHANGELOG.md."""

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_version_is_the_changelog_newest():
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    headings = re.findall(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert headings, "CHANGELOG.md has no '## X.Y.Z' heading"
    assert version == headings[0], f"pyproject.toml says {version}, CHANGELOG.md's newest is {headings[0]}"
