"""Known-answer cases for make calibrate (tools/calibrate.py), one module a chapter: each module's CASES pairs a
general claim with a chain whose answer is known by mathematics, at the quick profile's sizes.

A case's rows are remade when its chapter's code version (book_tools.code_version) or its module's text changes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MODULES = ("incompatibility", "bounds", "phase", "basins", "traps")


@dataclass(frozen=True)
class Case:
    """One known-answer chain for one claim: `run(seed)` returns the rule's verdict on it at the book's size.
    `source` is the file that defines it (its text is part of the case's version)."""

    claim: str
    name: str
    truth: str  # "holds" or "fails"
    chapter: str  # the notebook whose code version the case depends on
    run: Callable[[int], str]
    source: Path | None = None


def cases(source: str, rows) -> tuple[Case, ...]:
    """The Case of each (claim, name, truth, chapter, run) row, defined in the file `source` (pass __file__)."""
    return tuple(Case(*row, source=Path(source)) for row in rows)


def all_cases() -> tuple[Case, ...]:
    """Every module's CASES, in MODULES order."""
    return tuple(case for name in MODULES for case in importlib.import_module(f"{__name__}.{name}").CASES)
