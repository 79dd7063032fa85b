"""The deterministic checkers: artifact.contains and command.succeeds (run confined)."""

from __future__ import annotations

from assay.default_plugins.oracles import ARTIFACT_CONTAINS, COMMAND_SUCCEEDS
from assay.sandboxes.runner import run_confined


def _observation(workspace):
    return {
        "workspace": str(workspace),
        "run_confined": lambda argv, timeout: run_confined(workspace, argv, timeout_s=timeout),
    }


def test_artifact_contains_is_case_insensitive_and_stays_in_the_workspace(tmp_path):
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "finding.md").write_text("Path TRAVERSAL in src/server.py: resolve_download")
    params = {
        "path": "artifacts/finding.md",
        "all": ["src/server.py", "resolve_download"],
        "any": ["path traversal", "cwe-22"],
    }
    assert ARTIFACT_CONTAINS.evaluate(_observation(tmp_path), params).fired
    assert not ARTIFACT_CONTAINS.evaluate(_observation(tmp_path), {**params, "all": ["other_symbol"]}).fired
    assert not ARTIFACT_CONTAINS.evaluate(_observation(tmp_path), {"path": "../../etc/hostname", "any": ["a"]}).fired
    assert not ARTIFACT_CONTAINS.evaluate({}, params).fired


def test_command_succeeds_runs_the_tests_confined(confinement, box_path):
    tmp_path = box_path
    (tmp_path / "test_ok.py").write_text(
        "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(1 + 1, 2)\n"
    )
    # The time limit only guards against a hang, so it is generous enough for a heavily loaded machine.
    params = {"argv": ["python", "-m", "unittest", "-q"], "timeout_s": 300}
    assert COMMAND_SUCCEEDS.evaluate(_observation(tmp_path), params).fired
    (tmp_path / "test_bad.py").write_text(
        "import unittest\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(1, 2)\n"
    )
    result = COMMAND_SUCCEEDS.evaluate(_observation(tmp_path), params)
    assert not result.fired and "exit 1" in result.detail
    outside = tmp_path.parent / f"outside-{tmp_path.name}.txt"
    outside.write_text("HOST-CANARY-7731")
    try:
        code, output = run_confined(tmp_path, ["python", "-c", f"print(open({str(outside)!r}).read())"], timeout_s=300)
    finally:
        outside.unlink()
    # The host's /tmp is not in the box at all (it has a private one), so the file is not even there.
    assert code != 0 and "HOST-CANARY-7731" not in output and "FileNotFoundError" in output
