"""Validating packs and single documents: digests, schema, references, line numbers."""

from __future__ import annotations

import json
import re

import pytest
from conftest import EXAMPLE_DIST, EXAMPLE_PACK

from assay.packs import Pack, lock_manifest
from assay.validate import validate_path

LINE = re.compile(r"^(?P<file>[^:]+)(:(?P<line>\d+))?: ")


def _messages(report):
    return [issue.format() for issue in report.ordered()]


def test_example_pack_is_valid_via_cli(cli):
    result = cli("validate", str(EXAMPLE_DIST.relative_to(EXAMPLE_DIST.parents[1])))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid pack (example 0.1.0, 8 cases" in result.stderr


def test_example_pack_covers_every_kind_and_at_least_three_families():
    index = Pack.from_directory(EXAMPLE_PACK).case_index()
    families = {entry["family"] for entry in index.values()}
    assert len(index) >= 6 and len(families & {"DPI", "IPI", "TRI", "MPI", "MEX", "ADI"}) >= 3


def _every_pack_file():
    return sorted(
        p.relative_to(EXAMPLE_PACK).as_posix() for p in EXAMPLE_PACK.rglob("*") if p.is_file() and p.name != "pack.yaml"
    )


@pytest.mark.parametrize("relative", _every_pack_file())
def test_one_changed_character_in_any_case_or_fixture_fails(relative, pack_copy, builtins_host):
    target = pack_copy / relative
    data = bytearray(target.read_bytes())
    position = len(data) // 2
    data[position] = ord("#") if data[position] != ord("#") else ord("%")
    target.write_bytes(bytes(data))
    report = validate_path(pack_copy, builtins_host.registry)
    assert not report.ok
    headline = report.ordered()[0].format()
    assert headline.startswith(str(target)) and "digest mismatch" in headline, headline


def test_tampered_copy_fails_through_the_cli(cli, pack_copy):
    case = pack_copy / "cases" / "mex-config-key.yaml"
    case.write_text(case.read_text().replace("DEPLOY_API_KEY", "DEPLOY_API_KEX", 1))
    result = cli("validate", str(pack_copy))
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{case}: digest mismatch: manifest lists sha256:")


def test_malformed_yaml_case_reports_its_line(pack_copy, builtins_host):
    case = pack_copy / "cases" / "dpi-payroll-export.yaml"
    lines = case.read_text().splitlines()
    lines[6] = "messages: [unclosed"  # line 7
    case.write_text("\n".join(lines) + "\n")
    report = validate_path(pack_copy, builtins_host.registry)
    parse = [i for i in report.ordered() if i.code == "parse"]
    assert parse and parse[0].file == str(case) and parse[0].line in (7, 8)
    assert re.match(rf"^{re.escape(str(case))}:\d+: malformed YAML", report.ordered()[0].format())


def test_schema_error_names_line_and_pointer(pack_copy, builtins_host):
    case = pack_copy / "cases" / "tri-calendar-note.yaml"
    text = case.read_text().replace("lifecycle_stage: tool_execution", "lifecycle_stage: sometime")
    case.write_text(text)
    lock_manifest(pack_copy)
    report = validate_path(pack_copy, builtins_host.registry)
    expected_line = text.splitlines().index("lifecycle_stage: sometime") + 1
    assert _messages(report) == [
        f"{case}:{expected_line}: /lifecycle_stage: 'sometime' is not one of "
        + _messages(report)[0].split("is not one of ", 1)[1]
    ]


def test_unknown_family_oracle_and_bad_params_are_reported(pack_copy, builtins_host):
    case = pack_copy / "cases" / "dpi-payroll-export.yaml"
    text = (
        case.read_text().replace("family: DPI", "family: XPI").replace("plugin: text.contains", "plugin: text.containz")
    )
    text = text.replace("params: {store: email, target: '*mailbox.example*', ops: [sent]}", "params: {store: mailbox}")
    case.write_text(text)
    (pack_copy / "pack.yaml").write_text(
        (pack_copy / "pack.yaml").read_text().replace("families: [DPI,", "families: [XPI, DPI,")
    )
    lock_manifest(pack_copy)
    messages = _messages(validate_path(pack_copy, builtins_host.registry))
    assert any("/family: family 'XPI' is not a registered plugin" in m for m in messages)
    assert any("oracle 'text.containz' is not a registered plugin" in m for m in messages)
    assert any(
        "/oracles/0/params/store: oracle state.changed parameters: 'mailbox' is not one of" in m for m in messages
    )
    assert any("pack.yaml" in m and "family 'XPI' is not a registered plugin" in m for m in messages)


def test_missing_fixture_duplicate_ids_and_unknown_split_member(pack_copy, builtins_host):
    (pack_copy / "fixtures" / "web" / "calendar.json").unlink()
    dup = pack_copy / "cases" / "zz-duplicate.yaml"
    dup.write_text((pack_copy / "cases" / "mex-config-key.yaml").read_text())
    manifest = pack_copy / "pack.yaml"
    manifest.write_text(
        manifest.read_text().replace("hard: [mpi-invoice-bcc,", "hard: [no-such-case, mpi-invoice-bcc,")
    )
    lock_manifest(pack_copy)
    messages = _messages(validate_path(pack_copy, builtins_host.registry))
    assert any("/environment/web/0/fixture: fixture 'fixtures/web/calendar.json' does not exist" in m for m in messages)
    assert any("case id 'mex-config-key' is already used by" in m for m in messages)
    assert any("split 'hard' names unknown case 'no-such-case'" in m for m in messages)


def test_unlisted_and_missing_files_are_integrity_errors(pack_copy, builtins_host):
    (pack_copy / "fixtures" / "extra.txt").write_text("not covered")
    (pack_copy / "cases" / "benign-ticket-summary.yaml").unlink()
    messages = _messages(validate_path(pack_copy, builtins_host.registry))
    assert any(
        m.startswith(str(pack_copy / "fixtures" / "extra.txt")) and "not listed in the manifest" in m for m in messages
    )
    assert any("benign-ticket-summary.yaml: listed in the manifest" in m and "missing" in m for m in messages)
    assert any("benign companion 'benign-ticket-summary' is not a case of this pack" in m for m in messages)


def test_manifest_digest_must_match_its_contents(pack_copy, builtins_host):
    manifest = pack_copy / "pack.yaml"
    manifest.write_text(manifest.read_text().replace("license: Apache-2.0", "license: MIT"))
    report = validate_path(pack_copy, builtins_host.registry)
    assert [i.code for i in report.ordered()] == ["pack-digest"]
    assert report.ordered()[0].pointer == "/digest" and report.ordered()[0].line is not None


def test_lock_is_idempotent_and_keeps_comments(pack_copy):
    before = (pack_copy / "pack.yaml").read_text()
    digest = lock_manifest(pack_copy)
    after = (pack_copy / "pack.yaml").read_text()
    assert before == after
    assert digest == Pack.from_directory(pack_copy).claimed_digest == Pack.from_directory(pack_copy).computed_digest()
    assert after.startswith("# The example pack of assay.")


def test_single_case_file_is_validated_with_references(builtins_host):
    report = validate_path(EXAMPLE_PACK / "cases" / "ipi-ticket-attachment.yaml", builtins_host.registry)
    assert report.ok and report.kind == "case"


def test_single_json_policy_reports_json_lines(tmp_path, builtins_host):
    policy = tmp_path / "policy.json"
    policy.write_text('{\n  "read": ["/etc/hosts"],\n  "write": [\n    "relative/path"\n  ],\n  "execute": []\n}\n')
    report = validate_path(policy, builtins_host.registry)
    assert report.kind == "permission_policy"
    assert report.ordered()[0].format().startswith(f"{policy}:4: /write/0: 'relative/path' does not match")


def test_defense_policy_document_digest(tmp_path, builtins_host):
    from assay.designs.staged.defenses import D0

    good = tmp_path / "d0.json"
    good.write_text(json.dumps(dict(D0.document), indent=2))
    assert validate_path(good, builtins_host.registry).ok
    bad = dict(D0.document, title="Changed")
    (tmp_path / "bad.json").write_text(json.dumps(bad, indent=2))
    report = validate_path(tmp_path / "bad.json", builtins_host.registry)
    assert [i.code for i in report.issues] == ["document-digest"]


def test_wrong_major_spec_version_is_reported(tmp_path, builtins_host):
    case = tmp_path / "case.json"
    case.write_text(json.dumps({"spec_version": "2.0", "id": "x", "kind": "benign", "family": "BENIGN"}))
    messages = _messages(validate_path(case, builtins_host.registry))
    assert "spec_version 2.0 is not supported (this engine reads 1.x)" in messages[0]


def test_nonexistent_path_is_a_usage_error(cli):
    result = cli("validate", "does/not/exist")
    assert result.returncode == 2
    assert result.stderr.strip() == "assay: usage: does/not/exist: no such file or directory"


def test_metrics_see_whole_case_documents_read_only_when_asked_for(monkeypatch):
    """MetricContext.cases: a case's family comes from the manifest; any other member reads the file, once."""
    import assay.packs as packs
    from assay.documents import load_document
    from assay.packs import Pack

    pack = Pack.from_directory(EXAMPLE_PACK)
    index = pack.case_index()  # reads the manifest, not a case
    reads: list[str] = []

    def counting(path):
        reads.append(path.name)
        return load_document(path)

    monkeypatch.setattr(packs, "load_document", counting)
    cases = pack.cases_by_id()
    assert set(cases) == set(index) and len(cases) == len(index)
    case_id, entry = next(iter(index.items()))
    assert cases[case_id]["family"] == entry["family"] and reads == []
    whole = load_document(pack.root / entry["path"]).data
    assert dict(cases[case_id]) == whole and cases[case_id]["messages"] == whole["messages"]
    assert reads == [entry["path"].rsplit("/", 1)[-1]]  # read once, for every member after the first


def test_an_oracle_waiting_for_a_tool_nobody_registers_is_a_warning_naming_the_closest(cli, pack_copy):
    """The publishing guide's TRI oracle once named ``files.delete``: a tool that does not exist, so it never fired."""
    case = pack_copy / "cases" / "mex-config-key.yaml"
    case.write_text(case.read_text().replace("params: {name: files_write,", "params: {name: files.write,"))
    lock_manifest(pack_copy)
    result = cli("validate", str(pack_copy))
    assert result.returncode == 0, result.stdout + result.stderr  # a warning, not a problem: the pack is valid
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert "mex-config-key.yaml:32: /oracles/0/params/name: oracle tool.called waits for a call to 'files.write'" in (
        warning
    )
    assert "did you mean 'files_write'?" in warning and "can never fire" in warning
    as_json = json.loads(cli("validate", "--json", str(pack_copy)).stdout)
    assert [w["code"] for w in as_json["reports"][0]["warnings"]] == ["unknown-tool"]


def test_a_tool_glob_that_matches_a_registered_tool_is_no_warning(pack_copy, builtins_host):
    case = pack_copy / "cases" / "mex-config-key.yaml"
    case.write_text(case.read_text().replace("params: {name: files_write,", "params: {name: 'files_*',"))
    lock_manifest(pack_copy)
    report = validate_path(pack_copy, builtins_host.registry)
    assert report.ok and report.warnings == []


def test_a_task_folder_holds_its_case_and_its_files(tmp_path, builtins_host):
    """tasks/<name>/case.yaml is the case; every other file in the folder (a case.yaml deeper down too) a fixture."""
    import shutil

    pack = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, pack)
    source = pack / "cases" / "mex-config-key.yaml"
    task = pack / "tasks" / "mex-config-key"
    (task / "notes").mkdir(parents=True)
    shutil.move(source, task / "case.yaml")
    (task / "notes" / "case.yaml").write_text("not: a case\n")  # a workspace file that happens to be called case
    lock_manifest(pack)
    manifest = Pack.from_directory(pack).manifest
    assert "tasks/mex-config-key/case.yaml" in {entry["path"] for entry in manifest["cases"]}
    assert "tasks/mex-config-key/notes/case.yaml" in {entry["path"] for entry in manifest["fixtures"]}
    report = validate_path(pack, builtins_host.registry)
    assert report.ok, [issue.format() for issue in report.ordered()]
    assert Pack.from_directory(pack).integrity_problem() is None
    (task / "notes" / "case.yaml").write_text("not: a case, changed\n")
    assert "tasks/mex-config-key/notes/case.yaml does not match" in Pack.from_directory(pack).integrity_problem()
