"""Only a valid pack runs, and a bundle of a pack that does not validate does not validate (issue 30, item 6).

The pack here is intact (every file matches its locked manifest) but refused by
``assay validate``: one case's database schema attaches another database. A
run of it is refused before anything starts; a bundle naming it (built with
assay's own library, sealed, its numbers consistent) is refused by the
validator with a finding that names the pack and says to run ``assay validate``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.errors import PackInvalid
from assay.packs import lock_manifest
from assay.validate import validate_path

EXAMPLE_DIST = Path(__file__).resolve().parents[2] / "plugins" / "assay-pack-example"
EXAMPLE_PACK = EXAMPLE_DIST / "src" / "assay_pack_example" / "pack"
HOSTILE_SQL = "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT); ATTACH DATABASE '/etc/x' AS x;"


@pytest.fixture
def invalid_pack(tmp_path: Path) -> Path:
    root = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, root)
    case = root / "cases" / "ipi-ticket-attachment.yaml"
    text = case.read_text(encoding="utf-8")
    old = "schema_sql: CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, email TEXT);"
    assert old in text
    case.write_text(text.replace(old, f'schema_sql: "{HOSTILE_SQL}"'), encoding="utf-8")
    lock_manifest(root)
    return root


def test_the_pack_is_intact_but_invalid(invalid_pack, builtins_host):
    from assay.packs import Pack

    assert Pack.from_directory(invalid_pack).integrity_problem() is None
    assert not validate_path(invalid_pack, builtins_host.registry).ok


def test_an_invalid_pack_does_not_run(invalid_pack, builtins_host, tmp_path):
    settings = RunSettings(
        pack=str(invalid_pack), endpoints=["scripted:comply"], out=tmp_path / "run", progress=False,
        stages=["semantic"], defenses=["D0"],
    )  # fmt: skip
    with pytest.raises(PackInvalid, match="does not validate"):
        execute_run(settings, host=builtins_host)
    assert not (tmp_path / "run" / "bundle").exists()


def test_a_bundle_of_an_invalid_pack_does_not_validate(invalid_pack, builtins_host, tmp_path):
    from conftest import make_bundle

    bundle = make_bundle(tmp_path / "bundle", builtins_host.registry, pack_root=invalid_pack)
    report = validate_path(bundle, builtins_host.registry, pack=invalid_pack)
    assert not report.ok
    codes = {issue.code for issue in report.issues}
    assert "pack-invalid" in codes
    finding = next(issue for issue in report.issues if issue.code == "pack-invalid")
    assert "assay validate" in finding.message and finding.pointer == "/pack"


def test_a_bundle_of_the_valid_pack_still_validates(builtins_host, tmp_path):
    from conftest import make_bundle

    bundle = make_bundle(tmp_path / "bundle", builtins_host.registry)
    assert validate_path(bundle, builtins_host.registry, pack=EXAMPLE_PACK).ok
