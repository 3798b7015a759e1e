"""Control laws (SPEC §4): one class per law on numpy arrays, built by name with :func:`make_law`."""
from .registry import ALIASES, LAWS, make_law, scale_inertias

__all__ = ["make_law", "LAWS", "ALIASES", "scale_inertias"]
