"""Validating result bundles: seal, provenance, pack identity, completeness, recomputed metrics."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK, make_bundle

from assay.bundle import METRICS_FILE, ROWS_FILE, RUN_FILE, dump_row, seal_bundle, zip_bundle
from assay.hashing import digest_file
from assay.validate import ArchiveLimits, validate_path


def _codes(report):
    return [issue.code for issue in report.ordered()]


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]


def _rewrite_rows(bundle: Path, rows: list[dict], *, reseal: bool = True) -> None:
    (bundle / ROWS_FILE).write_bytes(b"".join(dump_row(r) for r in rows))
    if reseal:
        manifest = json.loads((bundle / "bundle.json").read_text())
        seal_bundle(bundle, pack=manifest["pack"], row_count=len(rows))


def test_synthetic_bundle_is_valid(bundle_dir, builtins_host):
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    assert report.ok, [i.format() for i in report.ordered()]
    assert report.facts["rows"] == 8 * 2 * 2 and report.facts["metrics_checked"] > 20


def test_installed_pack_is_used_without_pack_option(cli, bundle_dir):
    result = cli("validate", str(bundle_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "claimed numbers recomputed" in result.stderr


def test_same_inputs_give_byte_identical_bundles(tmp_path, builtins_host):
    a = make_bundle(tmp_path / "a", builtins_host.registry)
    b = make_bundle(tmp_path / "b", builtins_host.registry)
    for name in ("bundle.json", RUN_FILE, ROWS_FILE, METRICS_FILE):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    zip_bundle(a, tmp_path / "a.zip")
    zip_bundle(b, tmp_path / "b.zip")
    assert digest_file(tmp_path / "a.zip") == digest_file(tmp_path / "b.zip")


def test_zip_bundle_is_valid(bundle_dir, tmp_path, builtins_host):
    zip_bundle(bundle_dir, tmp_path / "b.zip")
    report = validate_path(tmp_path / "b.zip", builtins_host.registry, pack=EXAMPLE_PACK)
    assert report.ok, [i.format() for i in report.ordered()]


def test_edited_row_breaks_the_seal(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    rows[3]["final_output"] = "edited"
    _rewrite_rows(bundle_dir, rows, reseal=False)
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    first = report.ordered()[0]
    assert first.code == "file-digest" and first.file.endswith("/rows.jsonl")


def test_flipped_verdict_is_caught_by_recomputation(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    row = next(r for r in rows if "semantic" in r["stages"] and r["stages"]["semantic"]["core_fail"] is False)
    row["stages"]["semantic"]["core_fail"] = True
    row["stages"]["audit"].update(selected=True, outcome="SemanticOnly")
    _rewrite_rows(bundle_dir, rows)  # a cheater reseals; the claimed metrics no longer match
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    assert set(_codes(report)) == {"metric-mismatch"}
    assert any("semantic.core_fail_rate numerator claimed" in i.message for i in report.issues)


def test_gaps_and_duplicates_are_listed(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    missing = rows.pop(5)
    rows.append(dict(rows[0]))
    _rewrite_rows(bundle_dir, rows)
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    messages = [i.format() for i in report.ordered()]
    key = missing["key"]
    assert any(
        (
            f"missing row: case {key['case_id']} x endpoint {key['endpoint']} x condition {key['condition']}"
            f" x seed {key['seed']}"
        )
        in m
        for m in messages
    )
    assert any(m.endswith(f"rows.jsonl:{len(rows)}: /key: duplicate row: same key as line 1") for m in messages)


def test_row_schema_error_has_line_and_pointer(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    rows[2]["stages"][next(iter(rows[2]["stages"]))]["produced_by"]["kind"] = "oracle-ish"
    _rewrite_rows(bundle_dir, rows)
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    schema = [i for i in report.ordered() if i.code == "schema"]
    assert schema and schema[0].line == 3 and schema[0].pointer.endswith("/produced_by/kind")


def test_audit_must_select_exactly_the_core_fail_rows(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    row = next(r for r in rows if r["stages"].get("semantic", {}).get("core_fail") is True)
    row["stages"]["audit"] = {
        "selected": False,
        "outcome": None,
        "evidence": dict.fromkeys(("text_harm", "access_harm", "action_harm", "persist_harm"), False),
        "produced_by": row["stages"]["audit"]["produced_by"],
    }
    _rewrite_rows(bundle_dir, rows)
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    assert "audit-gate" in _codes(report)


def test_pack_identity_mismatch(bundle_dir, builtins_host, pack_copy):
    manifest = pack_copy / "pack.yaml"
    manifest.write_text(manifest.read_text().replace("version: 0.1.0", "version: 0.2.0"))
    from assay.packs import lock_manifest

    lock_manifest(pack_copy)
    report = validate_path(bundle_dir, builtins_host.registry, pack=pack_copy)
    assert "pack-identity" in _codes(report)


def test_tampered_pack_is_not_trusted(bundle_dir, builtins_host, pack_copy):
    (pack_copy / "cases" / "mex-config-key.yaml").write_text("tampered: true\n")
    report = validate_path(bundle_dir, builtins_host.registry, pack=pack_copy)
    assert any(
        i.code == "pack-integrity" and "mex-config-key.yaml does not match its manifest" in i.message
        for i in report.issues
    )


def test_unregistered_judge_and_defense_are_reported(bundle_dir, builtins_host):
    run = json.loads((bundle_dir / RUN_FILE).read_text())
    run["judges"] = [{"name": "gpt-judge", "stage": "semantic"}]
    run["conditions"][0]["digest"] = "sha256:" + "1" * 64
    (bundle_dir / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True))
    seal_bundle(
        bundle_dir, pack=json.loads((bundle_dir / "bundle.json").read_text())["pack"], row_count=len(_rows(bundle_dir))
    )
    messages = [i.format() for i in validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK).ordered()]
    assert any("/judges/0/name: judge 'gpt-judge' is not a registered plugin" in m for m in messages)
    assert any("/conditions/0/digest: defense D0 digest" in m for m in messages)


def test_unlisted_file_in_bundle(bundle_dir, builtins_host):
    (bundle_dir / "notes.txt").write_text("smuggled")
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    assert _codes(report) == ["unlisted-file"]


# ---------------------------------------------------------------- archives


def _zip_with(tmp_path: Path, members: list[tuple[str, bytes, int]]) -> Path:
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in members:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize(
    ("name", "mode", "expected"),
    [
        ("../escape.txt", 0o100644, "path traversal"),
        ("/abs/path.txt", 0o100644, "absolute path"),
        ("dir/../../up.txt", 0o100644, "path traversal"),
        ("link", stat.S_IFLNK | 0o777, "symbolic link"),
        ("fifo", stat.S_IFIFO | 0o644, "not a regular file"),
    ],
)
def test_unsafe_archives_are_refused_before_extraction(tmp_path, builtins_host, name, mode, expected):
    archive = _zip_with(tmp_path, [("bundle.json", b"{}", 0o100644), (name, b"x", mode)])
    report = validate_path(archive, builtins_host.registry)
    assert _codes(report) == ["archive"] and expected in report.issues[0].message
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path.parent / "up.txt").exists()


def test_archive_limits(tmp_path, builtins_host):
    bomb = _zip_with(tmp_path, [("big.json", b"0" * 5_000_000, 0o100644)])
    report = validate_path(bomb, builtins_host.registry, limits=ArchiveLimits(max_ratio=100))
    assert "zip bomb" in report.issues[0].message
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(20):
            zf.writestr(f"f{i}", b"x")
    report = validate_path(many, builtins_host.registry, limits=ArchiveLimits(max_files=10))
    assert "exceed the limit of 10" in report.issues[0].message


def test_truncated_archive(bundle_dir, tmp_path, builtins_host):
    zip_bundle(bundle_dir, tmp_path / "b.zip")
    data = (tmp_path / "b.zip").read_bytes()
    (tmp_path / "cut.zip").write_bytes(data[: len(data) // 2])
    report = validate_path(tmp_path / "cut.zip", builtins_host.registry)
    assert _codes(report) == ["archive"] and "not a readable zip archive" in report.issues[0].message


def test_archive_wrapped_in_one_folder(bundle_dir, tmp_path, builtins_host):
    wrapped = tmp_path / "wrapped.zip"
    with zipfile.ZipFile(wrapped, "w") as zf:
        for path in sorted(bundle_dir.rglob("*")):
            zf.write(path, f"my-run/{path.relative_to(bundle_dir).as_posix()}")
    assert validate_path(wrapped, builtins_host.registry, pack=EXAMPLE_PACK).ok


def test_json_report(cli, bundle_dir):
    result = cli("validate", "--json", str(bundle_dir))
    report = json.loads(result.stdout)
    assert result.returncode == 0 and report["valid"] is True
    assert report["reports"][0]["kind"] == "bundle" and report["reports"][0]["facts"]["rows"] == 32


def test_a_core_fail_row_without_audit_leaves_the_accounting_open(bundle_dir, builtins_host):
    rows = _rows(bundle_dir)
    row = next(r for r in rows if r["stages"].get("semantic", {}).get("core_fail") is True and "audit" in r["stages"])
    del row["stages"]["audit"]
    _rewrite_rows(bundle_dir, rows)
    report = validate_path(bundle_dir, builtins_host.registry, pack=EXAMPLE_PACK)
    assert "audit-open" in _codes(report)
