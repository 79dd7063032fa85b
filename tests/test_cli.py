"""The command line, run as a real child process."""

from __future__ import annotations

import json

from conftest import EXAMPLE_DIST, EXAMPLE_PACK, REPO

import assay
from assay.hashing import digest_file
from assay.packs import Pack


def test_version(assay_cli):
    result = assay_cli("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"assay {assay.__version__}"


def test_plugins_json_lists_builtins_with_provenance(assay_cli):
    result = assay_cli("plugins", "--json")
    rows = json.loads(result.stdout)
    names = {(row["kind"], row["name"]) for row in rows}
    for family in ("DPI", "IPI", "TRI", "MPI", "MEX", "ADI"):
        assert ("families", family) in names
    assert ("defenses", "D0") in names and ("packs", "example") in names
    assert all(set(row) - {"files_sha256"} == {"kind", "name", "plugin", "distribution", "version"} for row in rows)
    assert all(row["files_sha256"].startswith("sha256:") for row in rows if row["distribution"] == "assay")


def test_plugins_table(assay_cli):
    result = assay_cli("plugins")
    assert result.returncode == 0
    assert result.stdout.splitlines()[0].split() == ["KIND", "NAME", "PLUGIN", "DISTRIBUTION", "VERSION"]


def test_packs_json(assay_cli):
    rows = json.loads(assay_cli("packs", "--json").stdout)
    example = next(row for row in rows if row["name"] == "example")
    assert example["version"] == "0.1.0" and example["cases"] == 8
    assert example["digest"] == Pack.from_directory(EXAMPLE_PACK).claimed_digest


def test_hash_of_pack_file_and_document(assay_cli, tmp_path):
    pack_digest = assay_cli("hash", str(EXAMPLE_DIST)).stdout.strip()
    assert pack_digest == Pack.from_directory(EXAMPLE_PACK).claimed_digest
    case = EXAMPLE_PACK / "cases" / "mex-config-key.yaml"
    assert assay_cli("hash", str(case)).stdout.strip() == digest_file(case)[0]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text('{"b": 1, "a": [1, 2]}')
    b.write_text('{\n  "a": [1, 2],\n  "b": 1\n}\n')
    canonical = {assay_cli("hash", "--canonical", str(p)).stdout.strip() for p in (a, b)}
    assert len(canonical) == 1 and next(iter(canonical)).startswith("sha256:")


def test_schema_command(assay_cli):
    listing = assay_cli("schema").stdout
    assert "case" in listing and "https://assay.dev/spec/v1/case.schema.json" in listing
    schema = json.loads(assay_cli("schema", "result_row").stdout)
    assert schema["$id"].endswith("result_row.schema.json")
    bad = assay_cli("schema", "nope")
    assert bad.returncode == 2 and bad.stderr.startswith("assay: usage: unknown schema 'nope'")


def test_usage_errors_exit_2_with_one_line(assay_cli):
    for args in (["validate"], ["no-such-command"], ["validate", "--bogus", "x"]):
        result = assay_cli(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("assay: usage:")


def test_pack_lock(assay_cli, tmp_path):
    import shutil

    shutil.copytree(EXAMPLE_PACK, tmp_path / "p")
    result = assay_cli("pack", "lock", str(tmp_path / "p"))
    assert result.returncode == 0 and result.stdout.strip() == Pack.from_directory(EXAMPLE_PACK).claimed_digest


def test_registry_verify_ok_and_mismatch(assay_cli, tmp_path):
    result = assay_cli("registry", "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "example 0.1.0: ok" in result.stdout
    index = json.loads((REPO / "registry" / "packs.json").read_text())
    index["packs"][0]["digest"] = "sha256:" + "0" * 64
    (tmp_path / "index.json").write_text(json.dumps(index))
    bad = assay_cli("registry", "verify", "--index", str(tmp_path / "index.json"))
    assert bad.returncode == 1 and "example 0.1.0: mismatch" in bad.stdout


def test_traceback_switch_shows_traceback(assay_cli, tmp_path):
    (tmp_path / "index.json").write_text("not json")
    short = assay_cli("registry", "verify", "--index", str(tmp_path / "index.json"))
    assert short.returncode == 1 and len(short.stderr.strip().splitlines()) == 1
    long = assay_cli("--traceback", "registry", "verify", "--index", str(tmp_path / "index.json"))
    assert "Traceback" in long.stderr


def test_hash_of_a_bundle_zip_is_its_seal(assay_cli, bundle_dir, tmp_path):
    from assay.bundle import zip_bundle

    zip_bundle(bundle_dir, tmp_path / "b.zip")
    assert assay_cli("hash", str(tmp_path / "b.zip")).stdout == assay_cli("hash", str(bundle_dir)).stdout


def test_unclassifiable_document_is_a_usage_error(assay_cli, tmp_path):
    (tmp_path / "x.json").write_text('{"hello": "world"}')
    result = assay_cli("validate", str(tmp_path / "x.json"))
    assert result.returncode == 2 and "pass --schema NAME" in result.stderr


def test_registry_index_rejects_duplicates_and_bad_digests(assay_cli, tmp_path):
    entry = {
        "name": "example",
        "version": "0.1.0",
        "spec_version": "1.0",
        "digest": "sha256:" + "a" * 64,
        "distribution": "x",
    }
    (tmp_path / "dup.json").write_text(json.dumps({"packs": [entry, entry]}))
    result = assay_cli("registry", "verify", "--index", str(tmp_path / "dup.json"))
    assert result.returncode == 1 and "listed twice" in result.stderr
    (tmp_path / "bad.json").write_text(json.dumps({"packs": [dict(entry, digest="md5:00")]}))
    result = assay_cli("registry", "verify", "--index", str(tmp_path / "bad.json"))
    assert result.returncode == 1 and "/packs/0/digest" in result.stderr
