"""docs/agentdojo.md: every command of its console blocks runs, in order, and succeeds.

The commands run as a user types them, in a scratch directory; the page's OpenAI-compatible server
(``http://127.0.0.1:8000/v1``) is the loopback test server, started here on a free port.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from assay.testing.openai_server import LoopbackServer

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "agentdojo.md"
PAGE_SERVER = "http://127.0.0.1:8000/v1"


def commands() -> list[str]:
    """The ``$ assay ...`` lines of the page's console blocks, in page order."""
    blocks = re.findall(r"^```console\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.M | re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ assay ")]


@pytest.mark.slow
def test_every_command_of_the_page_runs(cli, tmp_path):
    assert len(commands()) >= 7
    printed = {}
    with LoopbackServer() as server:
        for command in commands():
            argv = shlex.split(command.replace(PAGE_SERVER, server.openai_base_url))[1:]
            result = cli(*argv, cwd=tmp_path)
            assert result.returncode == 0, f"docs/agentdojo.md: `{command}` exited {result.returncode}: {result.stderr}"
            printed[argv[0]] = result.stdout
    assert re.search(r"^(\d+) of \1 rows agree$", printed["agentdojo-agreement"], re.M), printed["agentdojo-agreement"]
    report = (tmp_path / "out" / "agentdojo-defenses" / "report.md").read_text()
    for text in ("### AgentDojo", "utility under attack", "targeted ASR", "Exact McNemar", "repeat_user_prompt"):
        assert text in report, text
