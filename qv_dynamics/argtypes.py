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


def positive_int(text: str) -> int:
    """An integer ≥ 1 (decimation factors, counts)."""
    try:
        k = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if k < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return k


__all__ = ["positive_float", "finite_float", "positive_int"]
