"""The compiled numerics live in one room per package (``qv_dynamics/kernels``, ``qv_control/kernels``), each
kernel paired with the numpy reference it must equal and the test that holds them together; numba is optional.

- numba is imported (module or function level) only by files in those two folders;
- every module of a room but its support modules (``SUPPORT``) is listed in the room's ``PAIRS``: its reference
  resolves to a Python object and its test file exists and names the kernel module;
- with numba blocked at import (a ``sys.meta_path`` finder installed by a ``sitecustomize`` on PYTHONPATH in a
  subprocess, not a mock of any math), ``import qv_control`` works, a quasi-velocity law, a projection law and the
  impedance baseline compute torques along a short motion of the Panda on its table, and the simulator steps; the
  torques equal those of the compiled path in this process to 1e-9 (relative).
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = {"qv_dynamics": ROOT / "qv_dynamics" / "kernels", "qv_control": ROOT / "qv_control" / "kernels"}


def _imports_numba(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        if any(n == "numba" or n.startswith("numba.") for n in names):
            return True
    return False


def test_numba_is_imported_only_in_the_kernel_rooms():
    outside = [str(p.relative_to(ROOT)) for pkg, room in ROOMS.items() for p in (ROOT / pkg).rglob("*.py")
               if room not in p.parents and _imports_numba(p)]
    assert outside == []


def _resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("package", sorted(ROOMS))
def test_every_kernel_module_is_paired_with_its_reference_and_a_test(package):
    room = importlib.import_module(f"{package}.kernels")
    compiled = sorted(f"{package}.kernels.{p.stem}" for p in ROOMS[package].glob("*.py")
                      if p.stem not in ("__init__", *room.SUPPORT))
    assert sorted(room.PAIRS) == compiled
    for module, (reference, test) in room.PAIRS.items():
        assert callable(_resolve(reference)), reference
        text = (ROOT / "test" / test).read_text(encoding="utf-8")
        assert module.rsplit(".", 2)[-2] + "." + module.rsplit(".", 1)[-1] in text, (module, test)
    assert set(room.KERNEL_MODULES) <= set(room.PAIRS)


_BLOCK = """
import sys


class RefuseNumba:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("numba", "llvmlite"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, RefuseNumba())
"""

_RUN = """
import json, sys
import numpy as np
import qv_control
from qv_control import State, Reference, make_law
from qv_dynamics import ConstrainedSystem
from qv_dynamics.sim import Stepper
from qv_dynamics.sim.scenarios import slider_crank

COORDS = ["panda_hand_tcp.x", "panda_hand_tcp.y", "panda_hand_tcp.rx", "panda_hand_tcp.ry", "panda_hand_tcp.rz",
          "panda_joint3"]
system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand_tcp",
                                                           "axes": ["z"]}])
q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.8])
out = {}
for name, gains in (("quasi_tracking", dict(kp=60.0, kd=120.0, kf=0.3, ki=30.0)), ("pidc", dict(kp=400.0, kd=40.0))):
    law = make_law(name, system, coordinates=COORDS, **gains)
    taus = []
    for k in range(4):
        q = q0 + 0.01 * k * np.arange(7) / 7
        qdot = 0.05 * np.cos(np.arange(7) + k)
        theta = law.coords.evaluate(q0, np.zeros(7)).theta
        taus.append(law.compute(State(0.001 * k, q, qdot), Reference(theta=theta, lambda_=np.array([-10.0]))).tolist())
    out[name] = taus
law = make_law("impedance", system, frame="panda_hand_tcp", contact=system.constraints[0].name, force_ki=5.0)
out["impedance"] = [law.compute(State(0.001 * k, q0 + 0.01 * k, 0.05 * np.cos(np.arange(7) + k), np.array([-9.0])),
                                Reference(theta=np.array([0.4, 0.1, 0.3]), lambda_=np.array([-10.0]))).tolist()
                    for k in range(4)]
st = Stepper(slider_crank().system)
out["stepper_compiled"] = st.compiled
out["numba_loaded"] = "numba" in sys.modules
print(json.dumps(out))
"""


def test_without_numba_the_laws_and_simulator_run_and_equal_the_compiled_path(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(_BLOCK)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_RUN)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocked = json.loads(proc.stdout.splitlines()[-1])
    assert blocked["numba_loaded"] is False and blocked["stepper_compiled"] is False
    here = {}
    exec(compile(textwrap.dedent(_RUN).replace("print(json.dumps(out))", ""), "<run>", "exec"), here)
    from qv_dynamics.kernels.loader import STATUS
    assert STATUS.get("qv_control.kernels.tick") == "compiled", STATUS  # here: the compiled path (warmed cache)
    assert STATUS.get("qv_control.kernels.impedance") == "compiled", STATUS
    for name in ("quasi_tracking", "pidc", "impedance"):
        a, b = np.array(blocked[name]), np.array(here["out"][name])
        assert np.all(np.isfinite(a)) and np.abs(a).max() > 1.0
        assert np.abs(a - b).max() <= 1e-9 * np.abs(b).max(), (name, np.abs(a - b).max())
