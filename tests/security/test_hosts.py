"""Hosts that cannot box, and hosts where assay is not root: refusal in one line, or the same confinement."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
