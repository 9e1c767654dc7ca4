"""Chapter 4's general claims on known-answer chains at the quick profile's sizes (make calibrate)."""

from __future__ import annotations

from . import cases

CASES = cases(__file__, [])
