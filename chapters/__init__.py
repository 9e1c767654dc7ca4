"""The book's chapters, one package per paper section (incompatibility, bounds, phase, basins, traps) and the quick
tour (tour). Each package splits its code by concern: the science (settings, protocol, estimators), the judging
(claim rows from `verdicts.py`'s rules) and the presentation (figures, display tables, prose). A chapter imports the
core, `verdicts`, `book_tools` and `profiles`, never another chapter.
"""
