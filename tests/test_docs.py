"""The documentation stays in sync with the code: generated pages, hooks, commands, the site build."""

from __future__ import annotations

import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from assay import hookspecs
from assay.plugins import KINDS, load_plugins
from assay.schemas import spec_schemas

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
GENERATOR = DOCS / "generate.py"


def _hookspec_names() -> list[str]:
    marker = f"{hookspecs.hookspec.project_name}_spec"
    return sorted(
        name for name, function in inspect.getmembers(hookspecs, inspect.isfunction) if hasattr(function, marker)
    )


def test_generated_docs_are_fresh(children):
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--check"], capture_output=True, text=True, cwd=REPO, timeout=300
    )
    assert result.returncode == 0, (
        f"stale generated docs (run `python docs/generate.py`):\n{result.stdout}{result.stderr}"
    )


def test_generator_is_deterministic():
    spec = importlib.util.spec_from_file_location("assay_docs_generate", GENERATOR)
    generate = importlib.util.module_from_spec(spec)
    keep, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ inside docs/
    try:
        spec.loader.exec_module(generate)
    finally:
        sys.dont_write_bytecode = keep
    assert generate.outputs() == generate.outputs()


def test_every_schema_has_a_reference_page():
    for name in spec_schemas(1).raw:
        page = DOCS / "reference" / "spec" / f"{name}.md"
        assert page.is_file(), f"no reference page for {name}.schema.json"
        assert spec_schemas(1).schema(name)["$id"] in page.read_text(encoding="utf-8")


def test_mkdocs_build_is_strict_clean(children, tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_every_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"([\w/.-]+\.md)\s*$", nav, re.M))
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - listed == set(), "pages missing from the nav of mkdocs.yml"
    assert listed - pages == set(), "nav entries without a page"


def test_the_contract_has_hooks_to_document():
    names = _hookspec_names()
    assert names, "no hookspecs found; the marker detection is broken"
    assert set(names) >= {f"register_{kind}" for kind in KINDS}


@pytest.mark.parametrize("hook", _hookspec_names())
def test_every_hook_is_documented(hook: str):
    page = (DOCS / "plugins" / "index.md").read_text(encoding="utf-8")
    assert f"`{hook}`" in page or f"### {hook}" in page, f"{hook} is not documented in docs/plugins/index.md"


def test_every_command_is_in_the_cli_reference():
    page = (DOCS / "reference" / "cli.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^## (assay(?: [\w-]+)*)$", page, re.M))
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    commands = host.registry.items("commands")
    assert commands
    for name, command in commands.items():
        assert f"assay {name}" in headings, f"`assay {name}` is missing from docs/reference/cli.md"
        for sub in getattr(command, "commands", {}):
            assert f"assay {name} {sub}" in headings, f"`assay {name} {sub}` is missing from docs/reference/cli.md"


# Pages whose ```python blocks are whole programs; each block is run as it stands.
RUNNABLE_PAGES = ["development.md", "leaderboard.md"]
# The same, for pages whose programs start confined children (the jail tier).
CONFINED_PAGES = ["threat-model.md", "permissions-runtime.md"]


def _python_blocks(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```$", text, re.M | re.S)


@pytest.mark.parametrize("page", RUNNABLE_PAGES)
def test_python_examples_run(page: str):
    blocks = _python_blocks(page)
    assert blocks, f"docs/{page} has no python example"
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/{page} (example {number})", "exec"), {"__name__": "__docs__"})


@pytest.mark.parametrize("page", CONFINED_PAGES)
def test_confined_python_examples_run(confinement, strace, page: str):
    blocks = _python_blocks(page)
    assert blocks, f"docs/{page} has no python example"
    for number, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/{page} (example {number})", "exec"), {"__name__": "__docs__"})
