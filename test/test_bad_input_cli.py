"""Bad input to the command line: usage errors with exit code 2 and one line, refusals before a run starts
(an unwritable or busy --out), failures reported as failures, signals answered in one line, and result files
that are atomic, never stale and follow the umask.

The commands run in this process through ``qv_control.cli.main`` (its return value is the exit code); a few
as real processes (exit code and stderr of the executable, real signals); each run is a fraction of a
simulated second, except the one a signal interrupts.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from qv_dynamics import runfiles

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 29) % 200


def qv(capfd, *args) -> SimpleNamespace:
    """``qv <args>`` in this process: returncode (main's return value or SystemExit code), stdout, stderr."""
    from qv_control.cli import main

    argv = list(args) + (["--domain-id", str(DOMAIN)] if args[0] == "bringup" else [])
    cwd = os.getcwd()
    os.chdir(ROOT)  # relative config paths, as from a shell in the checkout
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        os.chdir(cwd)
    out, err = capfd.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


# ------------------------------------------------------------------ item 6: numeric CLI values
@pytest.mark.parametrize("args", [
    ("simulate", "particle_circle", "--dt", "-1"),
    ("simulate", "particle_circle", "--dt", "0"),
    ("simulate", "particle_circle", "--t-final", "nan"),
    ("simulate", "particle_circle", "--t-final", "-1"),
    ("simulate", "particle_circle", "--record-every", "0"),
    ("simulate", "particle_circle", "--baumgarte", "inf", "1"),
    ("bringup", "config/planar_3link.yaml", "--duration", "nan"),
    ("bringup", "config/planar_3link.yaml", "--duration", "-1"),
    ("bringup", "config/planar_3link.yaml", "--duration", "0"),
])
def test_bad_numbers_are_usage_errors(args):
    from qv_control.cli import main

    with pytest.raises(SystemExit) as ei:
        main(list(args))
    assert ei.value.code == 2  # argparse's usage error, before anything runs


def test_bad_number_exit_code_and_message_from_a_process():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "qv_control.cli", "simulate", "particle_circle", "--dt", "-1"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert proc.returncode == 2 and "--dt" in proc.stderr and "must be > 0" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ items 1, 6: bringup refuses or reports failure
def _arm_config(tmp_path: Path, **controller) -> Path:
    doc = yaml.safe_load((ROOT / "config" / "planar_3link.yaml").read_text())
    for sec in doc.values():
        sec["ros__parameters"]["model_config"] = str(ROOT / "config" / "planar_3link_model.yaml")
    doc["qv_controller"]["ros__parameters"].update(controller)
    p = tmp_path / "arm.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize("change, words", [
    ({"lambda_desired": [5.0, 1.0]}, "wall.x"),
    ({"watchdog_timeout": -1.0}, "watchdog_timeout"),
    ({"watchdog_timout": 0.5}, "watchdog_timout (did you mean watchdog_timeout?)"),
])
def test_bringup_refuses_bad_controller_parameters(capfd, tmp_path, change, words):
    proc = qv(capfd, "bringup", str(_arm_config(tmp_path, **change)), "--duration", "0.05")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_bringup_reports_a_controller_that_cannot_compute_as_failure(capfd, tmp_path):
    law_params = yaml.safe_load((ROOT / "config" / "planar_3link.yaml").read_text())["qv_controller"][
        "ros__parameters"]["law_params"]
    cfg = _arm_config(tmp_path, law_params=dict(law_params, cond_max=1.0))  # cond(D) > 1: every tick fails
    proc = qv(capfd, "bringup", str(cfg), "--duration", "0.05")
    assert proc.returncode == 1, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "the control law failed" in proc.stderr and "cond" in proc.stderr


def test_bringup_good_run_still_succeeds(capfd, tmp_path):
    proc = qv(capfd, "bringup", str(_arm_config(tmp_path)), "--duration", "0.05", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").is_file()


# ------------------------------------------------------------------ item 4: result files
def test_rerun_clears_its_own_files_and_says_so(capfd, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # not a file of the run: left alone
    proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"notes.txt", "summary.json", "trajectory.npz", "figure.png"}
    proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out), "--no-plot")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"notes.txt", "summary.json", "trajectory.npz"}  # no stale figure
    assert "removed" in proc.stdout and "figure.png" in proc.stdout


@pytest.mark.parametrize("args", [
    ("simulate", "particle_circle", "--t-final", "0.02"),
    ("bringup", "config/planar_3link.yaml", "--duration", "0.05"),
    ("demo", "--short"),
])
def test_unwritable_out_refused_before_the_run(capfd, tmp_path, args):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = qv(capfd, *args, "--out", str(blocker / "sub"))
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "not writable" in proc.stderr and "Traceback" not in proc.stderr
    assert "wall_time" not in proc.stdout  # nothing ran


def test_failed_write_leaves_previous_file_and_no_partial_file(tmp_path):
    target = tmp_path / "trajectory.npz"
    runfiles.savez(target, t=np.arange(3.0))
    good = target.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full (simulated by an object numpy cannot store)")

    with pytest.raises(RuntimeError):
        runfiles.savez(target, t=np.arange(5.0), bad=np.array([Unpicklable()], dtype=object))
    assert target.read_bytes() == good  # the earlier complete file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["trajectory.npz"]  # no temporary left behind
    np.testing.assert_array_equal(np.load(target)["t"], np.arange(3.0))
    runfiles.write_json(tmp_path / "summary.json", {"ok": True})
    assert yaml.safe_load((tmp_path / "summary.json").read_text()) == {"ok": True}


# ------------------------------------------------------------------ usage errors, one line, exit 2
def _model_with_unknown_frame(tmp_path: Path) -> Path:
    p = tmp_path / "model.yaml"
    p.write_text(f"robot: {{urdf: {ROOT / 'urdf' / 'planar_3link.urdf'}}}\n"
                 "constraints:\n  - {type: point_contact, name: wall, frame: tipp, axes: [x]}\n")
    return p


def _usage_error(proc, *words) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr and all(w in proc.stderr for w in words), proc.stderr[-1500:]
    assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("qv ") or ln.startswith("error")]) == 1


def test_out_folder_of_every_report_command_checked_before_any_compute(capfd, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for args in (["conditions"], ["formulation"], ["demo", "anymal"], ["demo", "bimanual"]):
        for out in (["--out", str(blocker / "sub")], [f"--out={blocker / 'sub'}"]):
            proc = qv(capfd, *args, *out)
            _usage_error(proc, "not writable", str(blocker / "sub"))
            assert proc.stdout == ""  # refused before the command's module ran
    proc = qv(capfd, "formulation", "--out", str(tmp_path / "f"), "--write-table", str(blocker / "sub" / "t.md"))
    _usage_error(proc, "not writable", str(blocker / "sub"))   # the table's folder too, before any row runs
    assert "wall time" not in proc.stdout


def test_library_input_errors_of_the_commands_are_one_line(capfd, tmp_path):
    model = _model_with_unknown_frame(tmp_path)
    _usage_error(qv(capfd, "export-urdf", "--target", "mock", str(model), str(tmp_path / "r.urdf")),
                 "unknown frame 'tipp'")
    _usage_error(qv(capfd, "export-mjcf", str(model), str(tmp_path / "r.xml")), "unknown frame 'tipp'")
    broken = tmp_path / "broken.yaml"
    broken.write_text("effort_controller: [\n")
    arm = str(ROOT / "config" / "planar_3link_model.yaml")
    _usage_error(qv(capfd, "export-urdf", "--target", "mock", arm, str(tmp_path / "r.urdf"), "--controllers",
                    str(broken)), "controllers file", "does not parse as YAML")
    _usage_error(qv(capfd, "export-urdf", "--target", "mock", arm, str(tmp_path)), "is a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.yaml", "model.yaml"]  # no temporary left behind
    _usage_error(qv(capfd, "simulate", "particle_circle", "--t-final", "1e7", "--out", str(tmp_path / "s")), "GiB")
    _usage_error(qv(capfd, "simulate", "particle_circle", "--dt", "1e9", "--out", str(tmp_path / "s")), "no step")


@pytest.mark.parametrize("args, words", [
    (("simulate", "particle_circle", "--method", "kkt_baumgarte", "--baumgarte", "-5", "-5"), "must be >= 0"),
    (("simulate", "particle_circle", "--baumgarte", "5", "5"), "kkt_baumgarte only"),
    (("simulate", "slider_crank", "--redundant"), "--redundant applies to three_link_chain only"),
    (("simulate", "particle_circle", "--start", "singular"), "--start applies to slider_crank only"),
    (("inspect", "planar_3link", "--seed", "-1"), "must be an integer >= 0"),
    (("bringup", "planar_3link", "--domain-id", "-1"), "[0, 232]"),
    (("bringup", "planar_3link", "--domain-id", "999"), "[0, 232]"),
])
def test_bad_options_are_usage_errors(capfd, args, words):
    from qv_control.cli import main

    with pytest.raises(SystemExit) as ei:
        main(list(args))
    assert ei.value.code == 2
    assert words in capfd.readouterr().err


def test_bringup_refuses_a_sim_mode_the_node_would_refuse(capfd, tmp_path):
    cfg = _arm_config(tmp_path)
    doc = yaml.safe_load(cfg.read_text())
    doc["qv_sim"]["ros__parameters"]["mode"] = "turbo"
    cfg.write_text(yaml.safe_dump(doc))
    proc = qv(capfd, "bringup", str(cfg), "--duration", "0.05")
    assert proc.returncode == 2 and "mode" in proc.stderr and "turbo" in proc.stderr, proc.stderr[-1500:]


# ------------------------------------------------------------------ one run per folder, the umask
def test_a_folder_in_use_by_another_run_is_refused(capfd, tmp_path):
    out = tmp_path / "run"
    hold = f"runfiles.reserve(runfiles.check_writable({str(out)!r})); print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", "import time; from qv_dynamics import runfiles; " + hold],
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out))
        _usage_error(proc, "in use by another run")
        assert list(out.iterdir()) == []
    finally:
        holder.kill()
        holder.wait()
    proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out), "--no-plot")
    assert proc.returncode == 0, proc.stderr  # the folder is free once its holder ended


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_result_files_follow_the_umask(capfd, tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(tmp_path), "--no-plot")
    finally:
        os.umask(old)
    assert proc.returncode == 0, proc.stderr
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"summary.json": mode, "trajectory.npz": mode}


# ------------------------------------------------------------------ signals: one line, from the first instruction
def test_signals_end_commands_and_nodes_in_one_line(tmp_path):
    """Real processes started as the installed executables start (``from qv_entry import <entry>``): SIGINT
    during the imports and during a run gives one line and exit 130 for ``qv``, 0 for a node; and importing
    qv_entry installs the handlers before any package of the project is loaded. Each signal waits for a
    handshake: the process handles SIGINT and SIGTERM itself (the kernel's SigCgt: the entry module's first
    instruction ran, the imports follow), or the command printed that it started computing."""
    import signal

    from ros_helpers import wait_until_catching

    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(DOMAIN), PYTHONUNBUFFERED="1")
    probe = subprocess.run([sys.executable, "-c", "import signal, sys, qv_entry; print(signal.getsignal("
                            "signal.SIGINT).__module__, signal.getsignal(signal.SIGTERM).__module__, "
                            "sorted(m for m in sys.modules if m.split('.')[0] in ('qv_dynamics', 'qv_control')))"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert probe.stdout.split() == ["qv_entry", "qv_entry", "[]"], probe.stdout + probe.stderr

    def run(entry: str, args: list[str], marker: str | None) -> tuple[int, str]:
        code = f"import sys; from qv_entry import {entry}; sys.exit({entry}())"
        proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            if marker is None:  # in the imports: as soon as the entry module's handlers are in place
                wait_until_catching(proc, signal.SIGINT, signal.SIGTERM)
            else:  # in the run: once it says it computes
                for line in proc.stdout:
                    if marker in line:
                        break
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        return proc.returncode, err

    sim = ["simulate", "particle_circle", "--t-final", "600", "--no-plot", "--out"]
    for marker, out, words in ((None, "early", "while starting"), ("computing particle_circle", "running",
                                                                    "results of this run are incomplete")):
        rc, err = run("qv", sim + [str(tmp_path / out)], marker)
        assert rc == 130 and len(err.strip().splitlines()) == 1 and "SIGINT" in err and words in err, (out, rc, err)
    rc, err = run("dynamics_node", ["--ros-args", "--params-file", str(ROOT / "config" / "planar_3link.yaml")], None)
    assert rc == 0 and "Traceback" not in err and "while starting" in err, err


@pytest.mark.parametrize("domain", ["999", "-1", "abc"])
def test_bringup_refuses_a_bad_ros_domain_id_from_the_environment(capfd, monkeypatch, domain):
    from qv_control.cli import main

    monkeypatch.setenv("ROS_DOMAIN_ID", domain)
    with pytest.raises(SystemExit) as ei:
        main(["bringup", "planar_3link", "--duration", "0.05"])
    assert ei.value.code == 2 and "ROS_DOMAIN_ID" in capfd.readouterr().err


def test_a_signal_inside_a_node_callback_is_raised_outside_it():
    """``qv demo`` spins ROS nodes in-process: a KeyboardInterrupt raised inside a subscription callback would
    be logged by the executor with a traceback, so the guard's handler tells a callback (called from a spin)
    from the loop around the spin. A real rclpy executor and timer; the handler itself is called with the
    frames where a signal would land."""
    import signal
    import sys as _sys

    import rclpy
    from rclpy.context import Context

    from qv_control import cli
    from qv_dynamics.ros.runner import make_executor

    ctx = Context()
    rclpy.init(context=ctx, domain_id=DOMAIN, args=[])
    seen = []
    try:
        node = rclpy.create_node("qv_signal_probe", context=ctx)
        node.create_timer(0.001, lambda: seen.append(cli._inside_spin(_sys._getframe())))
        ex = make_executor(ctx)
        ex.add_node(node)
        while not seen:
            ex.spin_once(timeout_sec=0.1)
        outside = cli._inside_spin(_sys._getframe())
        ex.shutdown()
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    assert seen[0] is True and outside is False
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):  # outside a callback: raised where it lands
        cli._interrupted(signal.SIGTERM, _sys._getframe())


def test_the_out_defaults_the_guard_checks_are_the_commands_own(monkeypatch):
    """qv checks a report command's --out before importing its module: its table of default folders must be
    what each command's own parser says (read from the parser itself, the command never runs)."""
    import argparse
    import importlib

    from qv_control import cli

    class Parsed(Exception):
        pass

    def capture(self, args=None, namespace=None):
        raise Parsed({a.dest: a.default for a in self._actions})

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    for command, default in cli.OUT_DEFAULTS.items():
        words = command.split()
        module, func = cli.SUBCOMMANDS.get(tuple(words), cli.COMMANDS[words[0]][:2])
        argv = words[1:] if tuple(words) not in cli.SUBCOMMANDS else []
        with pytest.raises(Parsed) as ei:
            getattr(importlib.import_module(module), func)(argv)
        assert ei.value.args[0]["out"] == default, command


def test_a_signal_inside_an_import_ends_the_command_in_one_line(tmp_path):
    """A signal that lands while a module body runs (the command's imports): one line and 130. Raised there, the
    exception is the importing library's to handle: one that catches broadly loses the signal (the command runs
    on), and a half-imported numpy recursed in its ``__getattr__``."""
    (tmp_path / "slow_module.py").write_text(
        "import os, signal, time\ntry:\n    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(2)\n"
        "except BaseException:\n    pass\nRAN_ON = True\n")
    code = ("import sys; from qv_control.cli import guarded; import importlib\n"
            "sys.exit(guarded('qv probe', lambda: importlib.import_module('slow_module').RAN_ON and 0))")
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{tmp_path}")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip() == "qv probe: interrupted (SIGINT); results of this run are incomplete", proc.stderr
