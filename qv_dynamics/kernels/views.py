"""Index arrays the kernels read, built from a Pinocchio model in numpy (no numba: the callers build them at
construction, whether or not the compiled path then serves)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin


def tree_of(model: pin.Model) -> np.ndarray:
    """(joints × 3) int64: first velocity column, velocity size and parent of each joint (row 0 the universe)."""
    return np.array([[j.idx_v if j.idx_v >= 0 else 0, j.nv, model.parents[i]] for i, j in enumerate(model.joints)],
                    np.int64).reshape(-1, 3)


def support_mask(model, fids) -> np.ndarray:
    """(slots × nv) int64: 1 on the velocity columns of the joints supporting each frame."""
    sup = np.zeros((max(len(fids), 1), model.nv), np.int64)
    for s, fid in enumerate(fids):
        for j in model.supports[model.frames[fid].parentJoint]:
            if j > 0:
                jm = model.joints[j]
                sup[s, jm.idx_v:jm.idx_v + jm.nv] = 1
    return sup
