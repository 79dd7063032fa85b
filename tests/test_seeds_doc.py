"""docs/seeds.md: every command it gives for reproducing the seeds' tables runs, in order, and succeeds.

The page maps each table and figure of the three seeds to an assay command and report section; its console
blocks are the commands (with scripted endpoints on small samples). They run here as a user would type them,
in a scratch directory that has the repository's ``plugins/`` beside it, and each must exit 0.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "seeds.md"


def commands() -> list[str]:
    """The ``$ assay ...`` lines of the page's console blocks, in page order."""
    blocks = re.findall(r"^```console\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ assay ")]


def test_the_page_gives_commands_for_every_seed():
    text = PAGE.read_text(encoding="utf-8")
    for heading in ("## SafeClawBench", "## Security agents", "## AuthBench"):
        assert heading in text
    packs = {shlex.split(c)[shlex.split(c).index("--pack") + 1] for c in commands() if "--pack" in c}
    assert packs == {"safeclaw", "secagent", "authbench"}


def test_every_command_of_the_page_runs(confinement, strace, cli, tmp_path):
    (tmp_path / "plugins").symlink_to(REPO / "plugins")
    for command in commands():
        result = cli(*shlex.split(command)[1:], cwd=tmp_path)
        assert result.returncode == 0, f"docs/seeds.md: `{command}` exited {result.returncode}: {result.stderr}"
    # What the page says each produces is there.
    report = (tmp_path / "out" / "safeclaw" / "report.md").read_text()
    for section in (
        "CoreFail@N by endpoint and defense",
        "Core-gated harm-evidence audit accounting",
        "Exec outcomes by endpoint and defense",
        "Core-exec join",
        "Paired tests against D0",
        "semantic.core_fail_rate_by_family",
        "audit.evidence_given_core_fail",
    ):
        assert section in report, section
    assert (tmp_path / "out" / "safeclaw" / "report.html").read_text().count("<svg") >= 2
    trajectory = (tmp_path / "out" / "secagent" / "report.md").read_text()
    assert "trajectory.success_rate_by_family" in trajectory and "trajectory.mean_grounding_by_family" in trajectory
    permission = (tmp_path / "out" / "authbench" / "report.md").read_text()
    assert "Permission-caused failures by category" in permission and "| perm.standard |" in permission
