"""The README's five-minute tour runs as written (issue 15, item 5).

Every ``$ assay ...`` line of the tour's console block runs in order, in a scratch directory that has the
repository's ``plugins/`` beside it, against assay's loopback test server, as the README says to start it; the
one change is the server's port (the README says 8000, the test takes a free one), and each command must exit
0. The lines before the block (``make demo``, activating the venv, starting the server) are the test's set-up.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from assay.testing.openai_server import LoopbackServer

REPO = Path(__file__).resolve().parents[1]


def tour() -> list[str]:
    """The ``$ assay`` lines of the README's tour, in order (a trailing ``# comment`` dropped)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A five-minute tour") : text.index("### Coming from Inspect AI")]
    blocks = re.findall(r"^```console\n(.*?)^```$", section, re.M | re.S)
    commands = []
    for line in (line for block in blocks for line in block.splitlines()):
        if line.startswith("$ assay "):
            words = shlex.split(line[2:], comments=True)
            commands.append(words)
    return commands


def test_the_tour_has_its_server_and_its_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "$ python -m assay.testing.openai_server --port 8000" in text
    assert len(tour()) >= 20 and all(words[0] == "assay" for words in tour())


def test_every_command_of_the_tour_runs(children, confinement, strace, cli, tmp_path):
    (tmp_path / "plugins").symlink_to(REPO / "plugins")
    with LoopbackServer() as server:
        port = server.base_url.rsplit(":", 1)[1]
        for words in tour():
            words = [word.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for word in words]
            result = cli(*words[1:], cwd=tmp_path)
            assert result.returncode == 0, (
                f"README tour: `{shlex.join(words)}` exited {result.returncode}: {result.stderr}"
            )
    assert (tmp_path / "out" / "run1" / "report.html").is_file()
    assert list((tmp_path / "out" / "run1" / "inspect").glob("*.json"))
    assert (tmp_path / "out" / "run1" / "bundle" / "signature.json").is_file()
