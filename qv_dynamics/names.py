"""Name look-ups of a Pinocchio model: joints, velocity entries and frames, with errors that suggest names."""
from __future__ import annotations

import difflib

import pinocchio as pin

from .errors import UnknownNameError


class ModelNames:
    """Mixin for a class holding a Pinocchio ``model``: joint/velocity/frame names to indices."""

    model: pin.Model

    @property
    def joint_names(self) -> list[str]:
        """Names of the 1-DoF joints in velocity order (the root free-flyer is left out)."""
        return [self.model.names[j] for j in range(1, self.model.njoints) if self.model.joints[j].nv == 1]

    def joint_v_index(self, name: str) -> int:
        """Index in q̇ (and τ) of a 1-DoF joint; UnknownNameError if absent."""
        if not self.model.existJointName(name):
            raise UnknownNameError(f"unknown joint '{name}'; the model has {self.joint_names}")
        j = self.model.getJointId(name)
        return self.model.joints[j].idx_v

    def joint_v_indices(self, name: str) -> list[int]:
        """Every velocity index of a joint: one for a 1-DoF joint, six for the free-flyer root."""
        i = self.joint_v_index(name)  # UnknownNameError if absent
        return list(range(i, i + self.model.joints[self.model.getJointId(name)].nv))

    @property
    def velocity_names(self) -> list[str]:
        """One name per entry of q̇ and τ: the joint's; a free-flyer gives ``root_joint.vx … wz`` (base frame)."""
        names: list[str] = []
        for jm, jn in zip(self.model.joints[1:], self.model.names[1:]):
            sub = ("vx", "vy", "vz", "wx", "wy", "wz") if jm.nv == 6 else [f"v{k}" for k in range(jm.nv)]
            names += [jn] if jm.nv == 1 else [f"{jn}.{a}" for a in sub]
        return names

    def joint_q_index(self, name: str) -> int:
        if not self.model.existJointName(name):
            raise UnknownNameError(f"unknown joint '{name}'; the model has {self.joint_names}")
        return self.model.joints[self.model.getJointId(name)].idx_q

    def frame_id(self, name: str) -> int:
        if not self.model.existFrame(name):
            frames = [f.name for f in self.model.frames]
            close = [f for f in frames if name.lower() in f.lower() or f.lower() in name.lower()][:8]
            close = close or difflib.get_close_matches(name, frames, n=5, cutoff=0.6)
            raise UnknownNameError(f"unknown frame '{name}'" + (f"; did you mean one of {close}?" if close else
                                                                   f"; the model has {len(frames)} frames"))
        return self.model.getFrameId(name)
