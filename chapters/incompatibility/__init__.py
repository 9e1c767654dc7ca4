"""Chapter 1: the rectangle test at scale (section 4, Table 1, Figs. 5-6).

Do a masked LM's conditionals fit one joint distribution? Four states that differ at two sites form a
rectangle; its delta, the difference of the log-ratios along its two paths, is 0 for the conditionals of
any joint (Proposition 4), so one rectangle whose |delta| exceeds the rounding floor certifies
incompatibility. The chapter runs the test on the masked LM, on a causal LM (the control, whose delta
telescopes to 0) and on two Potts references, through the core's one `rectangle_delta`.

Three modules, imported as one (`from chapters import incompatibility as ch`):

- `science`: the settings per profile (SETTINGS, read through `settings`), the causal control, the
  rectangle sampler, the influence measured apart from delta, each model's rounding floor, Table 1's
  summary, the rank correlations and the frames the chapter saves: everything a saved number depends on;
- `judging`: the claims rows and the checks rows, their verdicts from `verdicts` (one rule per
  statistical shape);
- `presentation`: the page's display tables (`*_view`), figures (`*_figure`) and prose (`*_text`), which
  change no saved number and no verdict.

Its modules import the core, `verdicts`, `book_tools` and one another; never another chapter.
"""

from .judging import RHO_SESOI, check_rows, claim_rows, mean_text, rho_text
from .presentation import (
    ZERO_AT,
    band_position_text,
    correlation_text,
    cut_versus_gene_figure,
    cut_versus_gene_text,
    distance_figure,
    ecdf_figure,
    floors_view,
    influence_figure,
    most_incompatible_text,
    prose_text,
    rectangle_corner_texts,
    rectangles_view,
    table_one_view,
    temperature_view,
)
from .science import (
    ASYMMETRIC,
    CAUSAL_LABEL,
    CHECK_TEMPERATURES,
    ROLES,
    SAFETY,
    SETTINGS,
    SYMMETRIC,
    Float64Scores,
    Rectangles,
    all_rectangles_frame,
    alternative_tokens,
    batching_jitter,
    causal_control,
    correlation_frame,
    cut_versus_gene,
    cut_versus_gene_run,
    floor_frame,
    incompatibility_summary,
    kind,
    pair_influence,
    potts_references,
    precision_gap,
    proposal_scores,
    random_rectangles,
    rank_correlation_ci,
    rectangle_delta_normalized,
    rectangle_frame,
    rectangle_influences,
    rectangle_scores,
    rounding_floor,
    sample_rectangles,
    settings,
    sign_test_above,
    table_one_frame,
    temperature_check_frame,
    token_influence,
)

__all__ = [
    # science
    "ASYMMETRIC",
    "CAUSAL_LABEL",
    "CHECK_TEMPERATURES",
    "ROLES",
    "SAFETY",
    "SETTINGS",
    "SYMMETRIC",
    "Float64Scores",
    "Rectangles",
    "all_rectangles_frame",
    "alternative_tokens",
    "batching_jitter",
    "causal_control",
    "correlation_frame",
    "floor_frame",
    "incompatibility_summary",
    "kind",
    "pair_influence",
    "potts_references",
    "precision_gap",
    "proposal_scores",
    "random_rectangles",
    "rank_correlation_ci",
    "rectangle_delta_normalized",
    "rectangle_frame",
    "cut_versus_gene",
    "cut_versus_gene_run",
    "cut_versus_gene_figure",
    "cut_versus_gene_text",
    "rectangle_influences",
    "rectangle_scores",
    "rounding_floor",
    "sample_rectangles",
    "settings",
    "sign_test_above",
    "table_one_frame",
    "temperature_check_frame",
    "token_influence",
    # judging
    "RHO_SESOI",
    "check_rows",
    "claim_rows",
    "mean_text",
    "rho_text",
    # presentation
    "ZERO_AT",
    "distance_figure",
    "correlation_text",
    "ecdf_figure",
    "floors_view",
    "influence_figure",
    "most_incompatible_text",
    "prose_text",
    "band_position_text",
    "rectangle_corner_texts",
    "rectangles_view",
    "table_one_view",
    "temperature_view",
]
