"""Shared test set-up: import the package from the source tree; keep ROS traffic on this machine."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# DDS discovery stays on loopback; each test run gets its own domain so parallel runs do not cross-talk
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(100 + os.getpid() % 100))
os.environ.setdefault("MPLBACKEND", "Agg")
# small matrices: a multi-threaded BLAS only adds latency (and stalls badly on a loaded 2-core machine)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def panda():
    """The Panda with a 3-D point contact at ``panda_hand`` (one per test module)."""
    from qv_dynamics import ConstrainedSystem

    return ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
