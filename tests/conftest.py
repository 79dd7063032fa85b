"""Shared fixtures: the plugin host, the example pack, and synthetic bundles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assay.packs import Pack
from assay.plugins import load_plugins
from assay.synthetic import SyntheticPlan, build_bundle

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_DIST = REPO / "plugins" / "assay-pack-example"
EXAMPLE_PACK = EXAMPLE_DIST / "src" / "assay_pack_example" / "pack"


@pytest.fixture(scope="session")
def host():
    """Built-ins plus installed entry points (the example pack is installed by `make test`)."""
    return load_plugins()


@pytest.fixture(scope="session")
def builtins_host():
    """Built-in plugins only, so tests do not depend on what else is installed."""
    return load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def pack_copy(tmp_path: Path) -> Path:
    """A private copy of the example pack directory, safe to tamper with."""
    target = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, target)
    return target


def make_bundle(out: Path, registry, pack_root: Path = EXAMPLE_PACK, **plan_options) -> Path:
    """Write a synthetic (scripted, labelled) bundle for the example pack."""
    pack = Pack.from_directory(pack_root)
    families = {name: family.kind for name, family in registry.items("families").items()}
    options = {"endpoints": ["alpha", "beta"], "conditions": ["D0"], "seeds": [0, 1]}
    options.update(plan_options)
    plan = SyntheticPlan(cases=pack.case_index(), family_kinds=families, **options)
    build_bundle(out, plan, {"name": pack.name, "version": pack.version, "digest": pack.claimed_digest}, registry)
    return out


@pytest.fixture
def bundle_dir(tmp_path: Path, builtins_host) -> Path:
    """A fresh, valid synthetic bundle for the example pack."""
    return make_bundle(tmp_path / "bundle", builtins_host.registry)


def run_cli(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Run the real `assay` command line in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )
