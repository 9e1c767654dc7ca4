"""The book's run sizes: the profile names every chapter's ``SETTINGS`` is keyed by, and how a chapter reads its
settings at a profile. Standard library only, so that sweep.py checks a command line without importing torch."""

from types import SimpleNamespace

PROFILES = ("smoke", "quick", "paper")
"""The run sizes every chapter's ``SETTINGS`` is keyed by: ``smoke`` (CI, seconds a notebook), ``quick`` (the book
on 2 CPU cores, minutes) and ``paper`` (the paper's sizes, a GPU)."""


def profile_settings(profile: str, table: dict, **overrides) -> SimpleNamespace:
    """A chapter's settings (its module's `settings`): the profile's row of `table`, then each override that
    is not None, 0, "" or [] in place of the profile's value. The profile is the notebook's parameter as it
    stands: the parameters cell reads $GLAUBER_PROFILE there, visibly, never here."""
    if profile not in table:
        raise ValueError(f"profile must be one of {sorted(table)}, got {profile!r}")
    settings = dict(table[profile])
    for name, value in overrides.items():
        if not _unset(value):
            settings[name] = _as_list(value, name) if isinstance(settings.get(name), list) else value
    return SimpleNamespace(profile=profile, **settings)


def _as_list(value, name: str) -> list:
    """A list setting given as one number or as text ("0.5 1 2", "[0.5, 1]": how `papermill -p` and sweep.py
    pass a list parameter) as a list of numbers; a list as it is."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        try:
            return [float(v) for v in value.replace("[", " ").replace("]", " ").replace(",", " ").split()]
        except ValueError:
            raise ValueError(f"{name} must be numbers, got {value!r}") from None
    return [value]


def _unset(value) -> bool:
    """A parameter left at "the profile's": None, 0, "" or an empty list."""
    return value is None or (isinstance(value, (int, float, str, list, tuple)) and not value)
