"""Start-up: the command line imports heavy libraries only when a command uses them, and loads plugins once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assay.documents import load_document, top_level_string
from assay.errors import PackError
from assay.packs import Pack

# What `assay --help` must not import: each costs tens to hundreds of milliseconds.
HEAVY = ("scipy", "numpy", "rich", "aiohttp", "httpx", "jsonschema", "jsonschema_rs", "llama_cpp", "ray")


@pytest.mark.parametrize("arguments", [["--help"], ["schema", "case"], ["plugins", "--json"]])
def test_light_commands_import_no_heavy_library(children, arguments):
    probe = (
        "import sys, contextlib, io\n"
        "from assay.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({arguments!r})\n"
        f"print(code, sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0 []", result.stdout


def test_a_run_loads_plugins_once(cli, tmp_path, monkeypatch):
    # Looked up now: another test reloads assay.plugins, which makes a new class.
    from assay.plugins import PluginHost

    made = []
    init = PluginHost.__init__

    def counting_init(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(PluginHost, "__init__", counting_init)
    result = cli(
        "run", "--pack", "example", "--endpoint", "scripted:mixed", "--stages", "semantic,audit",
        "--out", str(tmp_path / "out"), "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(made) == 1


# -- reading a pack's name without loading its whole manifest ----------------------------------------------------

NAMES = [
    ("name: safeclaw\nversion: 1.0.0\n", "safeclaw"),
    ("# comment\nspec_version: '1.0'\nname: my-pack\ncases: []\n", "my-pack"),
    ("families: [A, B]\nsplits:\n  x: {name: inner}\nname: outer\n", "outer"),
    ("description: |\n  name: not-this\nname: this\n", "this"),
    ("name: 'quoted name'\n", "quoted name"),
    ('name: "1.0"\n', "1.0"),
    ("meta:\n  name: nested\n", None),  # only the top level counts; the loader decides when it is absent
    ("name: 1.0\n", None),  # a number to the loader
    ("name: true\n", None),
    ("name: [a, b]\n", None),
    ("name: !custom tag\n", None),
    ("- name: x\n", None),
    ("name: a\nname: b\n", "a"),  # a duplicate key: the validator rejects the manifest anyway
    ("name: [unclosed\n", None),
    ("{name: flow, version: 1}\n", "flow"),
]


@pytest.mark.parametrize(("text", "expected"), NAMES)
def test_top_level_string_reads_only_a_plain_top_level_name(tmp_path: Path, text, expected):
    path = tmp_path / "pack.yaml"
    path.write_text(text, encoding="utf-8")
    assert top_level_string(path, "name") == expected
    if expected is not None and "name: b" not in text:
        # Whenever it answers, the answer is what loading the whole document gives.
        assert load_document(path).data["name"] == expected


def test_top_level_string_leaves_json_and_unreadable_files_to_the_loader(tmp_path: Path):
    manifest = tmp_path / "pack.json"
    manifest.write_text(json.dumps({"name": "x"}), encoding="utf-8")
    assert top_level_string(manifest, "name") is None
    binary = tmp_path / "pack.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    assert top_level_string(binary, "name") is None


def test_a_packs_name_is_read_without_loading_its_manifest(tmp_path: Path):
    root = tmp_path / "pack"
    root.mkdir()
    (root / "pack.yaml").write_text("name: quick\nversion: 1.0.0\ncases: [{broken\n", encoding="utf-8")
    pack = Pack.from_directory(root)
    assert pack.name == "quick"
    assert "manifest_document" not in pack.__dict__
    # A manifest the loader cannot read still fails where it is used, with its line.
    with pytest.raises(PackError, match=r"pack\.yaml"):
        pack.version  # noqa: B018 - the property read is the assertion


def test_every_installed_pack_keeps_its_name(host):
    for name, pack in host.registry.items("packs").items():
        fresh = Pack.from_directory(pack.root)
        assert fresh.manifest["name"] == name
