"""argparse value types for the command-line tools: a bad number is a usage error (exit code 2) that
names the option, never a traceback or a silently changed value."""
from __future__ import annotations

import argparse
import math


def _float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return x


def positive_float(text: str) -> float:
    """A finite number > 0 (durations, time steps)."""
    x = _float(text)
    if x <= 0.0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return x


def finite_float(text: str) -> float:
    """Any finite number (gains that may be zero or negative)."""
    return _float(text)


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (stabilisation gains)."""
    x = _float(text)
    if x < 0.0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return x


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (random seeds)."""
    k = _int(text)
    if k < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return k


def int_in(low: int, high: int):
    """An argparse type: an integer in [low, high]."""
    def parse(text: str) -> int:
        k = _int(text)
        if not low <= k <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in [{low}, {high}], got {text}")
        return k

    parse.__name__ = f"integer in [{low}, {high}]"
    return parse


def positive_int(text: str) -> int:
    """An integer ≥ 1 (decimation factors, counts)."""
    k = _int(text)
    if k < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return k


__all__ = ["positive_float", "finite_float", "nonnegative_float", "nonnegative_int", "int_in", "positive_int"]
