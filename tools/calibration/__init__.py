"""Known-answer cases for make calibrate (tools/calibrate.py), one module a chapter: each module's CASES pairs a
general claim with a chain whose answer is known by mathematics, at the quick profile's sizes, or at `scale` times
the sizes its module's SIZES names for the claim (the power curves: pairs, chains or steps, never the rule).

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
    """One known-answer chain for one claim: `run(seed, scale)` returns the rule's verdict on it at the book's size
    (scale 1, the default) or with the claim's scaled sizes (`sizes`) times `scale`. `source` is the file that
    defines it (its text is part of the case's version)."""

    claim: str
    name: str
    truth: str  # "holds" or "fails"
    chapter: str  # the notebook whose code version the case depends on
    run: Callable[..., str]
    source: Path | None = None
    sizes: tuple[str, ...] = ()  # the settings that `scale` multiplies


def cases(source: str, rows, sizes: dict[str, tuple[str, ...]]) -> tuple[Case, ...]:
    """The Case of each (claim, name, truth, chapter, run) row, defined in the file `source` (pass __file__), with
    the sizes its claim scales (`sizes[claim]`: every claim of the module must have them)."""
    return tuple(Case(*row, source=Path(source), sizes=sizes[row[0]]) for row in rows)


def quick_sizes(chapter, claim_sizes: tuple[str, ...], scale: int = 1, cond=None):
    """`chapter.settings("quick", cond)` with each setting named in `claim_sizes` multiplied by `scale`."""
    base = chapter.settings("quick", cond)
    if scale == 1:
        return base
    return chapter.settings("quick", cond, **{name: getattr(base, name) * scale for name in claim_sizes})


def all_cases() -> tuple[Case, ...]:
    """Every module's CASES, in MODULES order."""
    return tuple(case for name in MODULES for case in importlib.import_module(f"{__name__}.{name}").CASES)
