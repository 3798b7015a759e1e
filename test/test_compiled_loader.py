"""The one loader of the compiled kernels (qv_dynamics.kernels.loader): every kernel module is listed for ``qv warm``,
and a process whose numba cache is cold runs the numpy paths, says why, and compiles nothing at start (the
fallbacks' numbers are checked against the compiled paths in test_sim_compiled, test_quasi_compiled and
test_law_compiled)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qv_dynamics.kernels.loader import kernel_modules

ROOT = Path(__file__).resolve().parent.parent


def _defines_kernels(path: Path) -> bool:
    """Whether the module decorates a function with ``@kernel(...)`` (qv_dynamics.kernels.loader.kernel)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                f = d.func if isinstance(d, ast.Call) else d
                if isinstance(f, ast.Name) and f.id == "kernel":
                    return True
    return False


def test_every_kernel_module_is_listed_for_warming():
    """setup.py's entry-point group names exactly the modules that define kernels: none left cold by qv warm."""
    found = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts)
                   for pkg in ("qv_dynamics", "qv_control") for p in (ROOT / pkg).rglob("*.py") if _defines_kernels(p))
    assert found == kernel_modules() and len(found) == 10


_COLD = """
import numpy as np
from qv_control.laws import make_law
from qv_dynamics import ConstrainedSystem, quasi_decompose
from qv_dynamics.kernels.loader import STATUS, load
from qv_dynamics.sim import Stepper
from qv_dynamics.sim.scenarios import slider_crank
st = Stepper(slider_crank().system)
s = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
t = s.evaluate(s.random_configuration(np.random.default_rng(0)), np.zeros(7))
qs = quasi_decompose(t, prev=quasi_decompose(t))
law = make_law("pidc", s, coordinates=["panda_hand.x", "panda_hand.y", "panda_joint3", "panda_joint4"], kp=400.0,
               kd=40.0)
osc = make_law("osc", s, frame="panda_hand", contact=None)
body = make_law("osc_constrained", s, coordinates=["panda_hand.x", "panda_hand.y", "panda_joint3", "panda_joint4"])
print(not st.compiled, qs._V is None, law._kernel is None, load("qv_control.kernels.laws", "tracking") is None,
      law.coords._kernel is None, load("qv_control.kernels.tick", "projection_law_tick") is None,
      load("qv_control.kernels.quasi_tick", "quasi_law_tick") is None,
      load("qv_control.kernels.contact_qp", "solve_qp") is None, osc._fast is None, body._fast is None,
      make_law("impedance", s, frame="panda_hand", contact=None)._ct is None)
for m in sorted(STATUS):
    print(m, STATUS[m])
"""


def test_cold_cache_runs_the_numpy_paths_and_compiles_nothing(tmp_path):
    """numba pointed at an empty cache directory (as a fresh install that was not warmed): the stepper, the
    decomposition and the laws (a projection law, both operational-space laws) take their numpy paths, STATUS says
    why for each kernel module, and nothing was compiled (numba would have written its cache files there)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT), QV_COMPILED="1")
    out = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True, text=True, timeout=120,
                         check=True).stdout.splitlines()
    assert out[0] == "True True True True True True True True True True True"
    status = dict(line.split(" ", 1) for line in out[1:])
    assert sorted(status) == kernel_modules()
    assert all(s.startswith("numpy path (no compiled cache") for s in status.values()), status
    assert not any(tmp_path.rglob("*.nbc")) and not any(tmp_path.rglob("*.nbi"))


def test_kernel_sources_cover_every_jitted_helper_and_a_newer_one_makes_the_cache_stale():
    """numba keys a kernel's cache on its own file: the loader also watches the files of the jitted helpers
    and package constants a kernel module draws from. Reference: the helpers numba itself links (every
    dispatcher in the module's namespace defined in another module). A cache older than one of those files
    is not ready (the loader then takes the numpy path and ``qv warm`` recompiles)."""
    import importlib
    import time

    numba = pytest.importorskip("numba")
    from qv_dynamics.kernels.loader import cache_ready, kernel_sources, kernels_of

    for name in kernel_modules():
        mod = importlib.import_module(name)
        helpers = {sys.modules[v.py_func.__module__].__file__ for v in vars(mod).values()
                   if isinstance(v, numba.core.registry.CPUDispatcher)}
        sources = set(kernel_sources(mod))
        assert helpers <= sources and mod.__file__ in sources, (name, helpers - sources)
    tick = importlib.import_module("qv_control.kernels.tick")
    assert {"sim_linalg.py", "quasi_linalg.py", "laws.py", "coordinates.py"} <= {
        Path(f).name for f in kernel_sources(tick)}
    kernels = kernels_of(importlib.import_module("qv_dynamics.kernels.sim"))
    if not cache_ready(*kernels):
        pytest.skip("numba's cache is not warmed here (scripts/setup.sh warms it)")
    assert not cache_ready(*kernels, newest_source=time.time() + 60.0)


_FLUSH = """
import os
import numpy as np
from qv_control.kernels import integrals
from qv_dynamics.kernels.loader import flush_stale
import importlib
out = np.zeros(2)
integrals.clipped_step(np.ones(2), True, 0.0, 0.001, np.ones(2), 0.1, False, out, np.inf)
integrals.target_commit(2, np.zeros(2), np.zeros(2), np.ones(2))
old, fresh = integrals.clipped_step._cache._cache_file, integrals.target_commit._cache._cache_file
os.utime(old._index_path, (1.0, 1.0))   # written before every source it depends on
print(bool(old._load_index()), bool(fresh._load_index()))
flush_stale(importlib.import_module("qv_control.kernels.tick"))
print(bool(old._load_index()), bool(fresh._load_index()))
"""


def test_a_stale_kernel_module_flushes_the_helpers_it_draws_from(tmp_path):
    """numba keys every jitted function's cache on its own file: a helper whose file did not change but whose
    callee's did would load machine code with the old callee inlined. When ``qv warm`` finds a kernel module's
    cache stale it empties the cache of every jitted function of the module and of the modules it draws from:
    here a helper of qv_control.kernels.integrals (drawn from by the projection tick), compiled into a cache of
    its own and older than its sources, is emptied by flushing the tick; one written after them is kept."""
    pytest.importorskip("numba")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _FLUSH], env=env, capture_output=True, text=True, timeout=300,
                         check=True).stdout.split()
    assert out == ["True", "True", "False", "True"]
