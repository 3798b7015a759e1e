"""A kernel of the laws' numpy-side path, loaded at its first use."""
from __future__ import annotations

from qv_dynamics.kernels.loader import load


class LazyKernel:
    """A kernel of ``qv_control.kernels.laws`` that only a law's numpy-side path calls (the first sample's and the
    fallbacks' products), loaded at its first use (:func:`qv_dynamics.kernels.loader.load`) rather than when the law is
    built: a law whose ticks all go through its fused kernel never loads it (start-up time). None when the law
    runs the numpy path (``compiled=False``) or the kernel cannot be loaded."""

    def __init__(self, name: str):
        self.name = name

    def __set_name__(self, owner, attr: str) -> None:
        self.attr = f"_loaded{attr}"

    def __get__(self, law, owner=None):
        if law is None:
            return self
        fn = law.__dict__.get(self.attr, self)
        if fn is self:
            fn = law.__dict__[self.attr] = load("qv_control.kernels.laws", self.name) if law.compiled else None
        return fn


__all__ = ["LazyKernel"]
