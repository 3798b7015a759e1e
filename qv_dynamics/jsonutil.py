"""JSON for run summaries (summary.json of ``qv simulate``, the bring-up and the demo)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def jsonable(x: Any) -> Any:
    """``x`` with numpy arrays/scalars turned into lists/Python numbers, dict keys into strings, and non-finite
    floats into None (JSON has no NaN/Inf)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x
