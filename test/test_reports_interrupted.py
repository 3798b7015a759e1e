"""Reports never lie: a run that a signal ends leaves no report claiming success.

The commands write their summary last, each file renamed into place (qv_dynamics.runfiles): a signal during
the computation leaves no summary at all; one that lands after a report was written (a plot, an import, the
last prints) marks that report incomplete (``"ok": false, "complete": false, "interrupted": <signal>``, a
Markdown report's first line). Real signals, delivered to real processes once they report that they
started computing (the handshake: a line on stdout), or in-process from the run itself at a known point.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from qv_dynamics import runfiles

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 61) % 200


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(DOMAIN), PYTHONUNBUFFERED="1",
                MPLBACKEND="Agg")


def _interrupt_when_computing(args: list[str], sig: int, marker: str, timeout: float = 300.0) -> tuple[int, str]:
    """Start ``qv <args>`` as the installed executable starts, wait until it prints ``marker`` (it started
    computing), send ``sig``; (exit code, stderr)."""
    code = "import sys; from qv_entry import qv; sys.exit(qv())"
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        seen = []
        for line in proc.stdout:  # blocks until the line (or the end of the output: then the test fails)
            seen.append(line)
            if marker in line:
                break
        assert seen and marker in seen[-1], ("never started computing", "".join(seen), proc.poll())
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err


@pytest.mark.parametrize("args, marker, summary", [
    (["simulate", "particle_circle", "--t-final", "600", "--no-plot"], "computing particle_circle", "summary.json"),
    (["demo", "--short", "--no-ros", "--no-mass-error"], "computing the demo runs", "summary.json"),
    (["conditions", "--only", "nominal", "--controllers", "qv"], "computing 1 conditions", "conditions.json"),
])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_computing_leaves_no_summary(tmp_path, args, marker, summary, sig):
    """An earlier complete summary in --out is removed before the run (prepare_out_dir) or never written
    (conditions), the signal arrives while the run computes: one line saying the results are incomplete,
    exit code 128 + the signal, and no summary in the folder."""
    out = tmp_path / "out"
    out.mkdir()
    (out / summary).write_text(json.dumps({"ok": True, "from": "an earlier run"}))
    if args[0] == "conditions":  # qv conditions overwrites its files at the end: an older one stays as it was
        (out / summary).unlink()
    rc, err = _interrupt_when_computing(args + ["--out", str(out)], sig, marker)
    name = signal.Signals(sig).name
    assert rc == 128 + sig and err.strip().splitlines()[-1].endswith(f"interrupted ({name}); results of this run "
                                                                    "are incomplete"), (rc, err)
    assert "Traceback" not in err, err
    assert not (out / summary).exists(), (out / summary).read_text()


def test_reports_written_before_the_signal_are_marked_incomplete(tmp_path, capsys):
    """In-process, through the command's guard: the run writes summary.json (ok: true), a Markdown table and an
    npz, then a real SIGTERM arrives (sent by the run to itself): exit code 143, one line, the JSON report now
    says ok: false / complete: false / interrupted: SIGTERM, the table's first line says it is incomplete, the
    npz is untouched; a report of an earlier command in this process is left alone."""
    from qv_control.cli import guarded

    earlier = runfiles.write_json(tmp_path / "earlier.json", {"ok": True})
    runfiles.begin_run()

    def run() -> int:
        runfiles.write_json(tmp_path / "summary.json", {"ok": True, "force_rms": 0.01})
        runfiles.write_text(tmp_path / "table.md", "| a |\n|---|\n| 1 |\n")
        runfiles.savez(tmp_path / "trajectory.npz", t=[0.0, 1.0])
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10**7):  # the handler raises at the next bytecode
            pass
        return 0

    rc = guarded("qv probe", run)
    err = capsys.readouterr().err
    assert rc == 143 and err.strip() == "qv probe: interrupted (SIGTERM); results of this run are incomplete", err
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc == {"ok": False, "force_rms": 0.01, "complete": False, "interrupted": "SIGTERM"}
    assert (tmp_path / "table.md").read_text().startswith("> **Incomplete**") and "| 1 |" in (tmp_path /
                                                                                           "table.md").read_text()
    import numpy as np

    assert np.load(tmp_path / "trajectory.npz")["t"].tolist() == [0.0, 1.0]
    assert json.loads(Path(earlier).read_text()) == {"ok": True}
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_a_signal_during_an_import_after_the_summary_marks_it(tmp_path):
    """The path that ends the process at once (a signal inside an import, e.g. matplotlib loaded for the plot
    after summary.json was written): the report is marked before the process ends with 130."""
    (tmp_path / "late_import.py").write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                                             "time.sleep(30)\n")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from qv_control.cli import guarded
        from qv_dynamics import runfiles

        def run():
            runfiles.begin_run()
            runfiles.write_json({str(tmp_path / "summary.json")!r}, {{"ok": True}})
            import late_import  # noqa: F401
            return 0

        sys.exit(guarded("qv probe", run))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == "qv probe: interrupted (SIGINT); results of this run are incomplete", proc.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["ok"] is False


def test_bench_tables_are_written_as_reports(tmp_path):
    """bench --write-table writes through runfiles: renamed into place (whole or not at all), and known as a
    report of the run, so an interrupted run's table is marked incomplete like the commands' reports."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from timing import write_table
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "table.md"
    runfiles.begin_run()
    write_table(str(path), "T", "cmd", ["a"], [["1"]])
    assert "| 1 |" in path.read_text() and [p.name for p in tmp_path.iterdir()] == ["table.md"]
    assert runfiles.mark_interrupted("SIGINT") == [str(path.resolve())]
    assert path.read_text().startswith("> **Incomplete**: the run that wrote this report was interrupted (SIGINT)")
