"""Chapter 5: metastable traps (section 5.3, Theorem 8; appendix A.1, Table 4, C.1-C.3).

Glauber chains on a masked LM fall into stretches where the text stops moving; appendix A.1 flags them by a rolling
embedding drift, classes each held state as a perfect or an approximate trap by its score gaps, and C.2-C.3 follow
how traps end and how far cold chains lie from their start against warm ones. The package splits that by concern:

- `protocol`: the profiles (`SETTINGS`, `settings`), the chains at every temperature in one batch, the recorded
  states as vectors, and a protein model's germline seeds with their gaps;
- `science`: the estimators (the drift and the trap detector, the catalogue, escapes and departures, the summary,
  the cold distances, the surrogate without collective persistence) and the frames the chapter saves;
- `judging`: each claim's estimate handed to its `verdicts.py` rule (nothing here decides a verdict), and the
  claims rows;
- `presentation`: figures (`*_figure`), display tables (`*_view`) and glued prose (`*_text`); nothing a saved number
  or a verdict depends on.

Imports the core, `verdicts` and `book_tools`; never another chapter. `from chapters import traps as ch` gives every
name below.
"""

from .judging import (
    COLD_FACTOR,
    DURATION_FACTOR,
    TIE_TOLERANCE,
    TRAP_CLAIMS,
    claim_rows,
    cold_parts,
    cold_row,
    correlation_row,
    duration_row,
    final_escapes,
    split_row,
    weakest_row,
)
from .presentation import (
    catalogue_view,
    cold_view,
    correlation_view,
    counts_view,
    distance_text,
    drift_figure,
    escape_view,
    gap_figure,
    germline_family_view,
    germline_figure,
    germline_text,
    profiles_view,
    run_text,
    setup_text,
    theorem8_view,
    weakest_view,
)
from .protocol import (
    COLD_PROTOCOL,
    PAPER_TAU,
    SETTINGS,
    TABLE4,
    chains_at_temperatures,
    claims_setup,
    germline_gaps,
    germline_section,
    germline_seeds,
    hamming_vectors,
    paper_counts,
    seed_source,
    settings,
    site_embeddings,
    start_distances,
    state_vectors,
    with_context,
)
from .science import (
    TRAP_COLUMNS,
    cold_frame,
    departure_counts,
    detect_traps,
    distance_at,
    distinct_held_states,
    escape_events,
    held_states,
    kernel_chance,
    kernel_weakest_share,
    movement,
    null_durations,
    persistence_surrogate,
    site_frame,
    summary_frame,
    trap_catalogue,
    trap_frame,
    trap_summary,
    weakest_site_chance,
    window_distances,
    window_drift,
)

__all__ = [
    # protocol
    "COLD_PROTOCOL",
    "PAPER_TAU",
    "SETTINGS",
    "TABLE4",
    "chains_at_temperatures",
    "claims_setup",
    "germline_gaps",
    "germline_section",
    "germline_seeds",
    "hamming_vectors",
    "paper_counts",
    "seed_source",
    "settings",
    "site_embeddings",
    "start_distances",
    "state_vectors",
    "with_context",
    # science
    "TRAP_COLUMNS",
    "cold_frame",
    "departure_counts",
    "detect_traps",
    "distance_at",
    "distinct_held_states",
    "escape_events",
    "held_states",
    "kernel_chance",
    "kernel_weakest_share",
    "movement",
    "null_durations",
    "persistence_surrogate",
    "site_frame",
    "summary_frame",
    "trap_catalogue",
    "trap_frame",
    "trap_summary",
    "weakest_site_chance",
    "window_distances",
    "window_drift",
    # judging
    "COLD_FACTOR",
    "DURATION_FACTOR",
    "TIE_TOLERANCE",
    "TRAP_CLAIMS",
    "claim_rows",
    "cold_parts",
    "cold_row",
    "correlation_row",
    "duration_row",
    "final_escapes",
    "split_row",
    "weakest_row",
    # presentation
    "catalogue_view",
    "cold_view",
    "correlation_view",
    "counts_view",
    "distance_text",
    "drift_figure",
    "escape_view",
    "gap_figure",
    "germline_family_view",
    "germline_figure",
    "germline_text",
    "profiles_view",
    "run_text",
    "setup_text",
    "theorem8_view",
    "weakest_view",
]
