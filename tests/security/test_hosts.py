"""Hosts that cannot box, and hosts where assay is not root: refusal in one line, or the same confinement."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import assay
from assay.errors import ConfinementError
from assay.sandboxes import box
from assay.sandboxes.runner import mask_timings


def test_a_host_without_bubblewrap_refuses_the_boxed_stages_in_one_line(cli, tmp_path, monkeypatch):
    # Unit-test double: this machine has bubblewrap, so its absence is simulated where assay looks for it.
    monkeypatch.setattr(box, "bwrap_path", lambda: None)
    for stages in ("trajectory", "permission", "exec"):
        result = cli(
            "run", "--pack", "example", "--endpoint", "scripted:comply", "--stages", stages,
            "--out", str(tmp_path / stages),
        )  # fmt: skip
        assert result.returncode == 1, result.stderr
        assert result.stderr.count("\n") == 1 and "bubblewrap is not installed" in result.stderr
        assert not (tmp_path / stages / "bundle").exists()


def test_a_host_without_landlock_refuses_in_one_line(monkeypatch):
    monkeypatch.setattr(box.landlock, "abi_version", lambda: 0)  # test double, as above
    with pytest.raises(ConfinementError, match="no Landlock"):
        box.check_box()


def test_a_box_never_runs_as_host_root(monkeypatch):
    monkeypatch.setenv(box.SANDBOX_UID_ENV, "0")
    if os.geteuid() != 0:
        pytest.skip("only root picks a box uid")
    with pytest.raises(ConfinementError, match="must not be 0"):
        box.sandbox_ids()


def test_boxes_work_when_assay_is_not_root(confinement, children, tmp_path):
    """The same confinement for an unprivileged user: the box's user namespace maps that user's own uid."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not Path(box.SYSTEM_PYTHON).exists():
        pytest.skip("needs root (to become an unprivileged user), setpriv and the system Python")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.chown(workspace, 65534, 65534)
    tmp_path.chmod(0o711)
    tmp_path.parent.chmod(0o711)
    tmp_path.parent.parent.chmod(0o711)
    package_parent = str(Path(assay.__file__).resolve().parents[1])
    site = [p for p in sys.path if p.endswith("site-packages")]
    probe = (
        "from pathlib import Path; from assay.sandboxes.runner import run_confined\n"
        f"code, out = run_confined(Path({str(workspace)!r}), ['/bin/sh', '-c', "
        "'id -u; cat /etc/shadow 2>&1 | head -1; echo x > /proc/sys/kernel/core_pattern 2>&1; echo made > f'], "
        "timeout_s=30)\n"
        "print('EXIT', code); print(out)\n"
    )
    result = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", box.SYSTEM_PYTHON, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([package_parent, *site]), "HOME": "/tmp"},
    )
    if "No module named" in result.stderr:
        pytest.skip(f"the engine's dependencies cannot be imported by an unprivileged user here: {result.stderr}")
    assert "EXIT 0" in result.stdout, result.stdout + result.stderr
    assert (workspace / "f").read_text() == "made\n"
    assert "root:" not in result.stdout


def test_test_runner_durations_are_masked_for_reproducible_rows():
    assert mask_timings("..\n---\nRan 2 tests in 0.004s\n\nOK\n") == "..\n---\nRan 2 tests in <time>s\n\nOK\n"
    assert mask_timings("=== 3 passed in 1.20s ===") == "=== 3 passed in <time>s ==="
    assert mask_timings("took 0.5s to warm up") == "took 0.5s to warm up"  # only the runners' own summary lines


def test_a_killed_engines_box_directory_is_swept_by_the_next_engine(children, tmp_path):
    """A tmpfs left mounted by an engine killed mid-run is unmounted by the next one; live engines' are kept."""
    if os.geteuid() != 0:
        pytest.skip("box directories are tmpfs mounts only when assay runs as root")
    engine = subprocess.Popen(
        [sys.executable, "-c", "from assay.sandboxes.box import box_dir; print(box_dir('assay-swept-'), flush=True); "
         "import time; time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert engine.stdout is not None
    orphan = Path(engine.stdout.readline().strip())
    live = box.box_dir("assay-live-")
    try:
        assert os.path.ismount(orphan)
        box._sweep_orphans.__wrapped__()
        assert os.path.ismount(orphan), "a running engine's directory was swept"
        engine.kill()
        engine.wait()
        box._sweep_orphans.__wrapped__()
        assert not orphan.exists()
        assert os.path.ismount(live), "this engine's own directory was swept"
    finally:
        engine.kill()
        box.remove_box_dir(live)
        if orphan.exists():
            box.remove_box_dir(orphan)


def test_the_helper_bundle_is_shared_and_never_taken_from_someone_else(tmp_path, monkeypatch):
    """One bundle per user and version (nothing piles up in /tmp); a planted one that differs is not used."""
    first = box._helper_bundle.__wrapped__()
    assert box._helper_bundle.__wrapped__() == first
    assert box._holds(Path(first), box._helper_files())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = Path(first.replace(os.path.dirname(first), str(tmp_path)))
    planted.mkdir()
    (planted / "empty").write_text("not empty")
    (planted / "assay").mkdir()
    chosen = box._helper_bundle.__wrapped__()
    assert chosen != str(planted) and box._holds(Path(chosen), box._helper_files())
    assert (planted / "empty").read_text() == "not empty"
