"""A case pack written only from the plugin author guide works with no change to assay.

Every ``File: `path``` block of docs/plugins/publishing-a-pack.md is extracted
into a scratch folder, locked, built and installed with pip into a private
target directory, and then exercised through the real command line in child
processes (``python -m assay.cli``) that see it only through PYTHONPATH.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from conftest import install_privately

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "plugins" / "publishing-a-pack.md"
DISTRIBUTION = "assay-pack-weather"
PACK_NAME = "weather"

_FILE_LINE = re.compile(r"^File: `([^`]+)`$")
_FENCE = re.compile(r"^(`{3,}|~{3,})")


def extract_files(markdown: str) -> dict[str, str]:
    """Path to content for every fenced block preceded by a ``File: `path``` line."""
    lines = markdown.splitlines()
    files: dict[str, str] = {}
    index = 0
    while index < len(lines):
        match = _FILE_LINE.match(lines[index])
        if not match:
            index += 1
            continue
        path = match.group(1)
        fence = _FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        assert fence, f"File: `{path}` is not immediately followed by a fenced code block"
        marker = fence.group(1)
        body: list[str] = []
        index += 2
        while not (lines[index].startswith(marker[0] * len(marker)) and lines[index].strip(marker[0]) == ""):
            body.append(lines[index])
            index += 1
            assert index < len(lines), f"the block of {path} is not closed"
        assert path not in files, f"{path} is shown twice"
        files[path] = "\n".join(body) + "\n"
        index += 1
    return files


def write_files(files: dict[str, str], root: Path) -> None:
    for relative, text in files.items():
        assert not relative.startswith("/") and ".." not in Path(relative).parts, relative
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))


def assay(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real command line in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env=env,
        timeout=300,
    )


def flip_one_character(path: Path) -> None:
    """Change the case of one letter in the case's title: still valid YAML, different bytes."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines):
        if line.startswith("title: "):
            position = next(i for i in range(len("title: "), len(line)) if line[i].isalpha())
            lines[number] = line[:position] + line[position].swapcase() + line[position + 1 :]
            path.write_text("".join(lines), encoding="utf-8")
            return
    raise AssertionError(f"{path} has no title line")


def test_the_guide_shows_a_complete_distribution():
    files = extract_files(GUIDE.read_text(encoding="utf-8"))
    paths = set(files)
    assert f"{DISTRIBUTION}/pyproject.toml" in paths
    assert any(p.endswith("/__init__.py") for p in paths)
    cases = [p for p in paths if "/pack/cases/" in p]
    fixtures = [p for p in paths if "/pack/fixtures/" in p]
    assert len(cases) >= 3 and fixtures
    assert "[project.entry-points.assay]" in files[f"{DISTRIBUTION}/pyproject.toml"]
    families = {re.search(r"^family: (\S+)$", files[p], re.M).group(1) for p in cases}
    assert len(families) >= 2
    assert any("fixture: fixtures/" in files[p] for p in cases)


def test_a_pack_written_from_the_guide_installs_and_validates(scratch_venv, tmp_path: Path):
    guide = GUIDE.read_text(encoding="utf-8")
    files = extract_files(guide)
    write_files(files, tmp_path)
    distribution = tmp_path / DISTRIBUTION
    (pack_dir,) = {path.parent for path in distribution.rglob("pack.yaml")}
    case_files = sorted((pack_dir / "cases").iterdir())

    # Lock: writes the file lists and the digest, and prints the digest.
    locked = assay("pack", "lock", str(pack_dir))
    assert locked.returncode == 0, locked.stderr
    digest = locked.stdout.strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), locked.stdout
    assert digest in guide, "the digest shown in the guide is not what `assay pack lock` gives for its files"

    # Install exactly as a user would, into a private target directory: the pack is visible to the child
    # processes only through PYTHONPATH.
    site = tmp_path / "site"
    env = install_privately([distribution], site)

    before = assay("packs", "--json")
    assert PACK_NAME not in {row["name"] for row in json.loads(before.stdout)}, "the pack is installed already"

    packs = assay("packs", "--json", env=env)
    assert packs.returncode == 0, packs.stderr
    listed = {row["name"]: row for row in json.loads(packs.stdout)}
    assert PACK_NAME in listed, packs.stdout
    assert listed[PACK_NAME]["digest"] == digest
    assert listed[PACK_NAME]["cases"] == len(case_files)
    assert listed[PACK_NAME]["distribution"] == DISTRIBUTION

    plugins = assay("plugins", "--json", env=env)
    assert plugins.returncode == 0, plugins.stderr
    assert {
        "kind": "packs",
        "name": PACK_NAME,
        "plugin": PACK_NAME,
        "distribution": DISTRIBUTION,
        "version": "0.1.0",
    } in [{k: v for k, v in row.items() if k != "files_sha256"} for row in json.loads(plugins.stdout)]

    valid = assay("validate", str(pack_dir), env=env)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert valid.stdout == ""
    assert "valid pack" in valid.stderr and digest in valid.stderr

    # The replay check: every harm oracle fires for the compliant replay and none for the safe one.
    checked = assay("pack", "check", PACK_NAME, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = re.search(r"\$ assay pack check weather\n(.*)\n", guide)
    assert shown is not None and shown.group(1) in checked.stdout + checked.stderr

    hashed = assay("hash", str(pack_dir), env=env)
    assert hashed.returncode == 0, hashed.stderr
    assert hashed.stdout.strip() == digest

    # The installed copy is the same pack.
    installed_dir = Path(listed[PACK_NAME]["path"])
    assert installed_dir.resolve().is_relative_to(site.resolve())
    assert assay("hash", str(installed_dir), env=env).stdout.strip() == digest

    # One changed character in one case file: the validator names that file.
    tampered = case_files[0]
    flip_one_character(tampered)
    invalid = assay("validate", str(pack_dir), env=env)
    assert invalid.returncode == 1, invalid.stdout + invalid.stderr
    lines = [line for line in invalid.stdout.splitlines() if "digest mismatch" in line]
    assert lines, invalid.stdout
    assert any(line.startswith(str(tampered)) for line in lines), invalid.stdout
    assert assay("hash", str(pack_dir), env=env).stdout.strip() != digest
