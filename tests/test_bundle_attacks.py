"""Bundles a cheater builds with assay's own library: each is re-sealed consistently and must still be refused.

Every test takes an honest synthetic bundle, changes it the way someone
gaming a leaderboard would, re-seals it with :func:`assay.bundle.seal_bundle`
(so the digests agree), and asserts that ``assay validate`` refuses it with a
finding naming the file and the reason, never a traceback. The malformed and
oversized inputs are bounded: they must be refused, not parsed to the end.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK

from assay.bundle import BUNDLE_MANIFEST, METRICS_FILE, ROWS_FILE, RUN_FILE, seal_bundle, zip_bundle
from assay.documents import DocumentError, load_document
from assay.hashing import canonical_json, file_entry
from assay.validate import validate_path


def _codes(report) -> set[str]:
    return {issue.code for issue in report.issues}


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / BUNDLE_MANIFEST).read_text())


def _reseal(bundle: Path, edit=None) -> None:
    """Seal the directory again (as the cheater would), then apply ``edit`` to the manifest and write it back."""
    manifest = _manifest(bundle)
    rows = (bundle / ROWS_FILE).read_bytes().count(b"\n") if (bundle / ROWS_FILE).exists() else 0
    seal_bundle(bundle, pack=manifest["pack"], row_count=rows)
    if edit is not None:
        manifest = _manifest(bundle)
        edit(manifest)
        (bundle / BUNDLE_MANIFEST).write_text(json.dumps(manifest, indent=2))


def _validate(bundle, host, **options):
    return validate_path(bundle, host.registry, pack=EXAMPLE_PACK, **options)


# -- the three documents and the rows are required and sealed -----------------------------------------------------


@pytest.mark.parametrize("member", ["run_manifest", "rows", "metrics"])
def test_a_manifest_naming_a_missing_document_is_refused(bundle_dir, builtins_host, member):
    def point_away(manifest):
        manifest[member]["path"] = "nowhere.json"

    _reseal(bundle_dir, point_away)
    report = _validate(bundle_dir, builtins_host)
    assert "missing-document" in _codes(report)
    assert any(member in issue.message and "nowhere.json" in issue.message for issue in report.issues)


def test_a_bundle_of_junk_files_naming_no_real_pack_is_refused(bundle_dir, builtins_host):
    """bundle.json plus three junk files, sealed, naming a pack that does not exist and documents that are not there."""
    manifest = _manifest(bundle_dir)
    for entry in manifest["files"]:
        (bundle_dir / entry["path"]).unlink()
    for name in ("a.txt", "b.txt", "c.txt"):
        (bundle_dir / name).write_text(name)
    manifest["files"] = [file_entry(bundle_dir, bundle_dir / name) for name in ("a.txt", "b.txt", "c.txt")]
    manifest["pack"] = {"name": "no-such-pack", "version": "1.0.0", "digest": "sha256:" + "0" * 64}
    (bundle_dir / BUNDLE_MANIFEST).write_text(json.dumps(manifest))
    report = validate_path(bundle_dir, builtins_host.registry)
    assert not report.ok
    assert "missing-document" in _codes(report)


def test_fabricated_metrics_sealed_beside_the_claimed_path_are_refused(bundle_dir, builtins_host):
    """A sealed metrics.json with invented numbers, while metrics.path names a file that does not exist."""
    metrics = json.loads((bundle_dir / METRICS_FILE).read_text())
    for claim in metrics["metrics"]:
        claim["value"] = 1.0
    (bundle_dir / METRICS_FILE).write_text(json.dumps(metrics))

    def point_away(manifest):
        manifest["metrics"]["path"] = "elsewhere/metrics.json"

    _reseal(bundle_dir, point_away)
    assert "missing-document" in _codes(_validate(bundle_dir, builtins_host))


def test_a_document_the_seal_does_not_list_is_refused(bundle_dir, builtins_host):
    """The sealed metrics.json stays honest for show; metrics.path names an unsealed copy with other numbers."""
    metrics = json.loads((bundle_dir / METRICS_FILE).read_text())
    metrics["metrics"][0]["value"] = 1.0
    (bundle_dir / "metrics-real.json").write_text(json.dumps(metrics))

    def point(manifest):
        manifest["metrics"]["path"] = "metrics-real.json"

    _edit_manifest(bundle_dir, point)
    report = _validate(bundle_dir, builtins_host)
    assert "unsealed-document" in _codes(report)


def test_a_file_listed_many_times_is_refused_and_hashed_once(bundle_dir, builtins_host, monkeypatch):
    import assay.validate._bundle as bundle_module

    hashed: list[Path] = []
    real = bundle_module.digest_file

    def counting(path):
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(bundle_module, "digest_file", counting)

    def repeat(manifest):
        entry = next(e for e in manifest["files"] if e["path"] == ROWS_FILE)
        manifest["files"] += [dict(entry) for _ in range(20_000)]

    _reseal(bundle_dir, repeat)
    report = _validate(bundle_dir, builtins_host)
    assert "duplicate-file" in _codes(report)
    assert len(hashed) == len(set(hashed)) <= 4


# -- parsing is bounded and never a traceback ------------------------------------------------------------------------


def _write_run_manifest(bundle: Path, text: str) -> None:
    """Replace the run manifest with ``text`` and list its bytes in the seal (assay's sealer refuses to hash it)."""
    (bundle / RUN_FILE).write_text(text)

    def relist(manifest):
        manifest["files"] = [file_entry(bundle, bundle / e["path"]) for e in manifest["files"]]

    _edit_manifest(bundle, relist)


def _edit_manifest(bundle: Path, edit) -> None:
    manifest = _manifest(bundle)
    edit(manifest)
    (bundle / BUNDLE_MANIFEST).write_text(json.dumps(manifest, indent=2))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"spec_version": "1.1", "n": 9007199254740993}', "exact range"),
        ('{"spec_version": "1.1", "n": 1e400}', "finite"),
        ('{"spec_version": "1.1", "s": "\\udc80"}', "surrogate"),
        ("[" * 5_000 + "]" * 5_000, "deep"),
    ],
    ids=["integer-2^53", "float-overflow", "lone-surrogate", "deep-json"],
)
def test_json_outside_the_spec_domain_is_a_finding(bundle_dir, builtins_host, text, reason):
    _write_run_manifest(bundle_dir, text)
    report = _validate(bundle_dir, builtins_host)
    assert not report.ok
    assert any(reason in issue.message and issue.file.endswith(RUN_FILE) for issue in report.issues), [
        issue.format() for issue in report.issues
    ]


def _alias_bomb(levels: int = 10) -> str:
    """A few hundred bytes of YAML whose aliases expand to 9**levels strings (the "billion laughs")."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("".join(" " * i + "k:\n" for i in range(5_000)), "deep"),
        ("a: " + "[" * 40_000 + "]" * 40_000 + "\n", "deep"),
        (_alias_bomb(), "alias"),
    ],
    ids=["nested-5000", "flow-40000", "alias-bomb"],
)
def test_hostile_yaml_is_refused_before_it_is_built(tmp_path, text, reason):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(DocumentError, match=reason):
        load_document(path)


def test_canonical_json_refuses_what_it_cannot_encode_in_one_error():
    for value in (2**53, float("inf"), "\udc80"):
        with pytest.raises(DocumentError):
            canonical_json({"v": value})


def test_hash_canonical_on_out_of_range_numbers_is_one_line(cli, tmp_path):
    for text in ('{"n": 1e400}', '{"n": 9007199254740993}'):
        path = tmp_path / "doc.json"
        path.write_text(text)
        result = cli("hash", "--canonical", str(path))
        assert result.returncode == 1, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_blank_lines_in_the_rows_stop_early(children, bundle_dir, builtins_host):
    """A large rows file is also read by the re-derivation child: both stop early, and the child reports back."""
    with open(bundle_dir / ROWS_FILE, "ab") as handle:
        handle.write(b"\n" * 5_000_000)
    _reseal(bundle_dir)
    report = _validate(bundle_dir, builtins_host)
    assert "parse" in _codes(report)
    assert any("stopped reading" in issue.message for issue in report.issues)


def test_a_huge_row_is_refused_without_reading_it_whole(children, bundle_dir, builtins_host):
    with open(bundle_dir / ROWS_FILE, "ab") as handle:
        handle.write(b'{"x": "' + b"a" * (40 << 20) + b'"}\n')
    _reseal(bundle_dir)
    report = _validate(bundle_dir, builtins_host)
    assert any("row is larger than" in issue.message for issue in report.issues)


# -- archives ------------------------------------------------------------------------------------------------------


def test_an_honest_zip_from_plain_writestr_is_accepted(bundle_dir, tmp_path, builtins_host):
    archive = tmp_path / "plain.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(bundle_dir.rglob("*")):
            if path.is_file():
                zf.writestr(path.relative_to(bundle_dir).as_posix(), path.read_bytes())
    report = _validate(archive, builtins_host)
    assert report.ok, [issue.format() for issue in report.issues]


def test_an_encrypted_zip_is_a_finding(tmp_path, builtins_host):
    archive = tmp_path / "locked.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("bundle.json", b"{}")
    data = bytearray(archive.read_bytes())
    # Set the "encrypted" flag in the local and central headers, as a password-protected archive has.
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        data[at + offset] |= 1
    archive.write_bytes(bytes(data))
    report = validate_path(archive, builtins_host.registry)
    assert _codes(report) == {"archive"} and "encrypted" in report.issues[0].message


def test_extraction_stops_at_the_archives_byte_budget(tmp_path, builtins_host):
    """Many members, each compressing only ~300x (under the per-member ratio), together far beyond the budget."""
    import random

    draw = random.Random(0)
    archive = tmp_path / "wide.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bundle.json", b"{}")
        for index in range(60):
            block = bytearray(4 << 20)
            for at in range(0, len(block), 2000):
                block[at] = draw.randrange(256)
            zf.writestr(f"pad/{index}.txt", bytes(block))
    report = validate_path(archive, builtins_host.registry)
    assert _codes(report) == {"archive"}
    assert "budget" in report.issues[0].message, report.issues[0].message


def test_a_zip_of_the_bundle_written_by_assay_is_accepted(bundle_dir, tmp_path, builtins_host):
    zip_bundle(bundle_dir, tmp_path / "b.zip")
    assert _validate(tmp_path / "b.zip", builtins_host).ok


# -- provenance ------------------------------------------------------------------------------------------------------


def _edit_run(bundle: Path, edit) -> None:
    run = json.loads((bundle / RUN_FILE).read_text())
    edit(run)
    (bundle / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True))
    _reseal(bundle)


def _plugin_entry(run: dict, kind: str, name: str) -> dict:
    return next(entry for entry in run["plugins"] if entry["kind"] == kind and entry["name"] == name)


def test_a_look_alike_judge_under_a_registered_name_is_named(bundle_dir, builtins_host):
    def look_alike(run):
        run["judges"] = [{"name": "rule", "stage": "semantic"}]
        entry = _plugin_entry(run, "judges", "rule")
        entry.update(plugin="lookalike_judges", distribution="lookalike-judges")

    _edit_run(bundle_dir, look_alike)
    report = _validate(bundle_dir, builtins_host)
    issue = next(issue for issue in report.issues if issue.code == "provenance-mismatch")
    assert "judge 'rule'" in issue.message and "lookalike-judges" in issue.message and issue.line is not None


def test_a_bundle_naming_a_plugins_former_name_is_the_same_provenance_and_no_other_name_is(bundle_dir, builtins_host):
    """Bundles written before the designs became plugins name their old modules; that is not a look-alike."""

    def former(run):
        run["judges"] = [{"name": "rule", "stage": "semantic"}]  # the rule judge is used, so its provenance is read
        _plugin_entry(run, "judges", "rule").update(plugin="assay.default_plugins.judges")

    _edit_run(bundle_dir, former)
    assert not [issue for issue in _validate(bundle_dir, builtins_host).issues if issue.code.startswith("provenance")]

    def same_distribution_other_module(run):
        _plugin_entry(run, "judges", "rule").update(plugin="assay.default_plugins.backends")

    _edit_run(bundle_dir, same_distribution_other_module)
    issue = next(i for i in _validate(bundle_dir, builtins_host).issues if i.code == "provenance-mismatch")
    assert "assay.default_plugins.backends" in issue.message


def test_former_names_must_be_a_tuple_of_names():
    from assay.errors import PluginError
    from assay.plugins import load_plugins

    class Renamed:
        ASSAY_FORMER_NAMES = "old.name"  # a string, not a tuple

    with pytest.raises(PluginError, match="ASSAY_FORMER_NAMES must be a tuple"):
        load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"}).register(Renamed(), "renamed")


def test_a_metric_from_another_version_is_drift_stated_as_such(bundle_dir, builtins_host):
    metric = json.loads((bundle_dir / METRICS_FILE).read_text())["metrics"][0]["metric"]

    def older(run):
        _plugin_entry(run, "metrics", metric)["version"] = "0.0.1"

    _edit_run(bundle_dir, older)
    report = _validate(bundle_dir, builtins_host)
    assert [issue.code for issue in report.issues] == ["version-drift"]
    assert "0.0.1" in report.issues[0].message and metric in report.issues[0].message


def test_a_used_component_the_manifest_does_not_place_is_named(bundle_dir, builtins_host):
    metric = json.loads((bundle_dir / METRICS_FILE).read_text())["metrics"][0]["metric"]

    def forget(run):
        run["plugins"].remove(_plugin_entry(run, "metrics", metric))

    _edit_run(bundle_dir, forget)
    assert "provenance-missing" in _codes(_validate(bundle_dir, builtins_host))


def test_rows_and_manifest_must_agree_on_scripted(bundle_dir, builtins_host):
    def real_model(run):
        for endpoint in run["endpoints"]:
            endpoint["scripted"] = False
            endpoint["model"]["name"] = "gpt-4o"

    _edit_run(bundle_dir, real_model)
    report = _validate(bundle_dir, builtins_host)
    assert "scripted-mismatch" in _codes(report)
    assert any("scripted is true" in issue.message for issue in report.issues)


# -- signatures ------------------------------------------------------------------------------------------------------


def test_a_signed_bundle_names_its_signer(cli, bundle_dir, tmp_path):
    key = tmp_path / "key.pem"
    made = cli("keygen", str(key))
    assert made.returncode == 0 and oct(key.stat().st_mode & 0o777) == "0o600"
    fingerprint = made.stdout.split()[-1]
    signed = cli("sign", str(bundle_dir), "--key", str(key))
    assert signed.returncode == 0, signed.stderr
    result = cli("validate", "--pack", str(EXAMPLE_PACK), str(bundle_dir))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"signed by key {fingerprint}" in result.stderr
    zip_bundle(bundle_dir, tmp_path / "signed.zip")
    assert (
        f"signed by key {fingerprint}"
        in cli("validate", "--pack", str(EXAMPLE_PACK), str(tmp_path / "signed.zip")).stderr
    )


def test_an_unsigned_bundle_still_validates_and_says_so(cli, bundle_dir):
    result = cli("validate", "--pack", str(EXAMPLE_PACK), str(bundle_dir))
    assert result.returncode == 0 and "unsigned" in result.stderr


def test_a_bundle_changed_after_signing_is_refused(bundle_dir, builtins_host, tmp_path):
    from assay.signing import generate_key, load_private_key, sign_bundle

    generate_key(tmp_path / "key.pem")
    sign_bundle(bundle_dir, load_private_key(tmp_path / "key.pem"))
    metrics = json.loads((bundle_dir / METRICS_FILE).read_text())
    metrics["metrics"].pop()  # claim less, re-seal consistently: the signature no longer covers it
    (bundle_dir / METRICS_FILE).write_text(json.dumps(metrics))
    _reseal(bundle_dir)
    report = _validate(bundle_dir, builtins_host)
    assert [issue.code for issue in report.issues] == ["signature"]
    assert "the signature is for bundle" in report.issues[0].message


def test_a_forged_signature_is_refused(bundle_dir, builtins_host, tmp_path):
    """A signature made with one key, presented under another key's identity (say, a trusted lab's)."""
    import base64

    from cryptography.hazmat.primitives import serialization

    from assay.signing import SIGNATURE_FILE, fingerprint, generate_key, load_private_key, sign_bundle

    generate_key(tmp_path / "mine.pem")
    generate_key(tmp_path / "theirs.pem")
    forged = sign_bundle(bundle_dir, load_private_key(tmp_path / "mine.pem"))
    theirs = load_private_key(tmp_path / "theirs.pem").public_key()
    raw = theirs.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    forged.update(public_key=base64.b64encode(raw).decode(), key_fingerprint=fingerprint(raw))
    (bundle_dir / SIGNATURE_FILE).write_text(json.dumps(forged))
    report = _validate(bundle_dir, builtins_host)
    assert [issue.code for issue in report.issues] == ["signature"]
    assert "does not verify" in report.issues[0].message


@pytest.mark.parametrize("content", [b"not a key", b"-----BEGIN OPENSSH PRIVATE KEY-----\nxx\n", b"\x00" * 70_000])
def test_a_bad_key_is_one_line(cli, bundle_dir, tmp_path, content):
    key = tmp_path / "bad.pem"
    key.write_bytes(content)
    result = cli("sign", str(bundle_dir), "--key", str(key))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_rsa_key_is_refused_by_name(cli, bundle_dir, tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path / "rsa.pem"
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    result = cli("sign", str(bundle_dir), "--key", str(path))
    assert result.returncode == 2 and "RSA key; assay signs with Ed25519" in result.stderr


def test_keygen_never_overwrites(cli, tmp_path):
    key = tmp_path / "key.pem"
    key.write_text("someone's key")
    result = cli("keygen", str(key))
    assert result.returncode == 2 and key.read_text() == "someone's key"


# -- re-derivation: verdicts that contradict the row's own record ---------------------------------------------------


def _real_run(tmp_path_factory, name: str, **settings) -> Path:
    """A real run's bundle of the example pack with scripted agents (the stages and options given)."""
    from assay.engine.run import RunSettings, execute_run
    from assay.plugins import load_plugins

    options = {"pack": "example", "endpoints": ["scripted:mixed"], "progress": False, "seeds": [0], **settings}
    return execute_run(RunSettings(out=tmp_path_factory.mktemp(name), **options), host=load_plugins()).bundle


def _fresh_copy(bundle: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    return copy


@pytest.fixture(scope="module")
def run_bundle(tmp_path_factory) -> Path:
    """A real run's bundle (scripted agent, rule judge, semantic and audit stages)."""
    return _real_run(tmp_path_factory, "run", seeds=[0, 1], stages=["semantic", "audit"])


@pytest.fixture
def honest(run_bundle, tmp_path) -> Path:
    return _fresh_copy(run_bundle, tmp_path)


def _recompute_and_reseal(bundle: Path, rows: list[dict], registry) -> None:
    """What a careful cheater does after editing rows: recompute every metric with assay's own plugins, re-seal."""
    from assay.bundle import dump_row, write_json_atomic
    from assay.components import MetricContext
    from assay.packs import Pack
    from assay.summary import compute_metrics, summary_document

    (bundle / ROWS_FILE).write_bytes(b"".join(dump_row(row) for row in rows))
    run = json.loads((bundle / RUN_FILE).read_text())
    index = Pack.from_directory(EXAMPLE_PACK).case_index()
    context = MetricContext(
        plan=run["plan"], cases={case: {"family": index[case]["family"]} for case in run["plan"]["cases"]}
    )
    write_json_atomic(bundle / METRICS_FILE, summary_document(compute_metrics(rows, context, registry)))
    _reseal(bundle)


def _run_rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]


def test_the_honest_run_bundle_is_valid_and_its_verdicts_rederived(honest, host):
    report = validate_path(honest, host.registry, pack=EXAMPLE_PACK)
    assert report.ok, [issue.format() for issue in report.issues]
    assert report.facts["verdicts_rederived"] >= len(_run_rows(honest))


def test_a_corefail_relabelled_as_a_refusal_is_refused(honest, host):
    rows = _run_rows(honest)
    row = next(r for r in rows if r["stages"]["semantic"]["core_fail"] is True)
    row["stages"]["semantic"].update(
        core_fail=False, safety_score=5, harm_type=None, defense_behavior="refused", explanation="the response refuses"
    )
    row["stages"]["audit"] = {
        "selected": False,
        "outcome": None,
        "evidence": dict.fromkeys(("text_harm", "access_harm", "action_harm", "persist_harm"), False),
        "produced_by": row["stages"]["audit"]["produced_by"] | {"kind": "rule", "name": "audit-evidence"},
    }
    _recompute_and_reseal(honest, rows, host.registry)
    report = validate_path(honest, host.registry, pack=EXAMPLE_PACK)
    assert [issue.code for issue in report.issues] == ["verdict-mismatch"]
    issue = report.issues[0]
    assert issue.pointer == "/stages/semantic/core_fail" and issue.line is not None
    assert row["key"]["case_id"] in issue.message and "recorded as False" in issue.message


def test_an_audit_outcome_the_evidence_contradicts_is_refused(honest, host):
    # A CoreFail row without concrete evidence (the scripted agent agrees in words) relabelled as HarmEvidence.
    rows = _run_rows(honest)
    row = next(r for r in rows if r["stages"].get("audit", {}).get("outcome") == "SemanticOnly")
    row["stages"]["audit"]["outcome"] = "HarmEvidence"
    row["stages"]["audit"]["evidence"]["text_harm"] = True
    row["stages"]["audit"]["produced_by"] = {"kind": "rule", "name": "audit-evidence", "version": "audit-evidence-v2"}
    row["stages"]["audit"].pop("fallback_attempts", None)
    _recompute_and_reseal(honest, rows, host.registry)
    report = validate_path(honest, host.registry, pack=EXAMPLE_PACK)
    assert {issue.code for issue in report.issues} == {"verdict-mismatch"}
    assert report.issues[0].pointer.startswith("/stages/audit/")


def test_a_final_output_rewritten_away_from_the_response_is_refused(honest, host):
    rows = _run_rows(honest)
    row = next(r for r in rows if r["stages"]["semantic"]["core_fail"] is True)
    row["final_output"] = "I cannot help with that."
    _recompute_and_reseal(honest, rows, host.registry)
    report = validate_path(honest, host.registry, pack=EXAMPLE_PACK)
    assert any(issue.code == "verdict-mismatch" and issue.pointer == "/final_output" for issue in report.issues)


@pytest.fixture(scope="module")
def exec_run_bundle(tmp_path_factory) -> Path:
    """A real run's bundle with the exec stage (scripted agents in the local sandbox)."""
    return _real_run(tmp_path_factory, "exec-run", stages=["exec"])


@pytest.fixture
def honest_exec(exec_run_bundle, tmp_path, confinement) -> Path:
    return _fresh_copy(exec_run_bundle, tmp_path)


def test_an_honest_exec_bundle_is_valid_with_its_oracles_rederived(honest_exec, host):
    report = validate_path(honest_exec, host.registry, pack=EXAMPLE_PACK)
    assert report.ok, [issue.format() for issue in report.issues]
    assert report.facts["verdicts_rederived"] >= len(_run_rows(honest_exec))


@pytest.mark.parametrize("flip", ["oracle-fired", "harm-hidden"])
def test_exec_verdicts_that_contradict_the_oracles_are_refused(honest_exec, host, flip):
    rows = _run_rows(honest_exec)
    if flip == "oracle-fired":
        # An oracle marked fired while the row says no harm.
        row = next(
            r
            for r in rows
            if r["stages"]["exec"]["observed_harm"] is False
            and any(o["decides"] == "observed_harm" for o in r["stages"]["exec"]["oracle_results"])
        )
        next(o for o in row["stages"]["exec"]["oracle_results"] if o["decides"] == "observed_harm")["fired"] = True
    else:
        row = next(r for r in rows if r["stages"]["exec"]["observed_harm"] is True)
        row["stages"]["exec"].update(observed_harm=False, state_change=False, tool_call=False)
    _recompute_and_reseal(honest_exec, rows, host.registry)
    report = validate_path(honest_exec, host.registry, pack=EXAMPLE_PACK)
    assert {issue.code for issue in report.issues} == {"verdict-mismatch"}, [i.format() for i in report.issues]
    assert report.issues[0].pointer.startswith("/stages/exec/") and row["key"]["case_id"] in report.issues[0].message


def test_exec_rows_replay_as_recorded(honest_exec, host):
    report = validate_path(honest_exec, host.registry, pack=EXAMPLE_PACK, replay=True)
    assert report.ok, [issue.format() for issue in report.issues]
    assert report.facts["exec_rows_replayed"] == len(_run_rows(honest_exec))


@pytest.mark.parametrize("forgery", ["diff-emptied", "result-edited", "call-dropped"])
def test_a_state_diff_the_calls_do_not_make_is_caught_by_replay(honest_exec, host, forgery):
    """The diff (and the verdicts from it) rewritten consistently: only doing the calls again shows the lie."""
    rows = _run_rows(honest_exec)
    row = next(r for r in rows if r["stages"]["exec"]["observed_harm"] is True)
    execution = row["stages"]["exec"]
    if forgery == "diff-emptied":
        execution["state_diff"] = []
    elif forgery == "result-edited":
        execution["transcript"]["tool_results"][-1]["content"] = "error: refused"
    else:
        execution["transcript"]["tool_calls"].pop()
        execution["transcript"]["tool_results"].pop()
    from assay.designs.staged.exec import exec_outcome
    from assay.documents import load_document
    from assay.packs import Pack

    pack = Pack.from_directory(EXAMPLE_PACK)
    case = load_document(pack.root / pack.case_index()[row["key"]["case_id"]]["path"]).data
    messages = execution["transcript"]["messages"]
    final = next(
        (m.get("content") or "" for m in reversed(messages) if m["role"] == "assistant" and not m.get("tool_calls")), ""
    )
    derived = exec_outcome(
        case, host.registry.items("oracles"), execution["transcript"]["tool_calls"], execution["state_diff"], final
    )
    execution.update(
        {
            field: derived[field]
            for field in ("tool_call", "state_change", "observed_harm", "benign_utility", "oracle_results")
        }
    )
    _recompute_and_reseal(honest_exec, rows, host.registry)
    assert validate_path(honest_exec, host.registry, pack=EXAMPLE_PACK).ok  # consistent: re-derivation alone passes it
    report = validate_path(honest_exec, host.registry, pack=EXAMPLE_PACK, replay=True)
    assert {issue.code for issue in report.issues} == {"replay-mismatch"}, [i.format() for i in report.issues]


# -- bounded cost: each hostile upload is refused within 10 s of CPU time and 512 MiB ----------------------------


def _hostile_uploads(bundle_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """Small uploads that once cost minutes, gigabytes or a crash (see issue 12's list)."""
    import shutil

    made: dict[str, Path] = {}
    # 80 MB of blank lines in a zip of about 80 KB.
    blank = tmp_path / "blank"
    shutil.copytree(bundle_dir, blank)
    with open(blank / ROWS_FILE, "ab") as handle:
        handle.write(b"\n" * (80 << 20))
    _reseal(blank)
    zip_bundle(blank, tmp_path / "blank-lines.zip")
    made["blank-lines.zip"] = tmp_path / "blank-lines.zip"
    shutil.rmtree(blank)
    # One file listed 20,000 times.
    repeated = tmp_path / "repeated"
    shutil.copytree(bundle_dir, repeated)
    manifest = _manifest(repeated)
    entry = next(e for e in manifest["files"] if e["path"] == ROWS_FILE)
    manifest["files"] += [dict(entry) for _ in range(20_000)]
    (repeated / BUNDLE_MANIFEST).write_text(json.dumps(manifest))
    zip_bundle(repeated, tmp_path / "repeated.zip")
    made["repeated.zip"] = tmp_path / "repeated.zip"
    # YAML run manifests: an alias bomb and 40,000 levels of nesting.
    for name, text in (("alias-bomb", _alias_bomb()), ("deep-yaml", "a: " + "[" * 40_000 + "]" * 40_000 + "\n")):
        target = tmp_path / name
        shutil.copytree(bundle_dir, target)
        (target / RUN_FILE).unlink()
        (target / "run.yaml").write_text(text)

        def point(manifest, target=target):
            manifest["run_manifest"]["path"] = "run.yaml"
            manifest["files"] = [
                file_entry(target, target / e["path"]) for e in manifest["files"] if e["path"] != RUN_FILE
            ]
            manifest["files"].append(file_entry(target, target / "run.yaml"))

        _edit_manifest(target, point)
        made[name] = target
    return made


def test_hostile_uploads_are_refused_within_ten_seconds_and_512_mib(children, bundle_dir, tmp_path):
    import subprocess
    import sys

    # The child reports its own peak resident memory, so each upload is measured alone: VmHWM, which starts afresh
    # with the program, not ru_maxrss, which Linux carries over from the parent (a big test process) through exec.
    # It reports the CPU time it used too (with that of the children it forked and waited for): the bound is on the
    # work an upload costs, which the machine's load does not change, as it does the wall time.
    measured = (
        "import resource, sys\nfrom assay.cli import main\ncode = main(sys.argv[1:])\n"
        "peak = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:'))\n"
        "used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]\n"
        "cpu = sum(usage.ru_utime + usage.ru_stime for usage in used)\n"
        "sys.stderr.write(f'\\nPEAK_KIB {peak}\\nCPU_S {cpu}\\n')\nsys.exit(code)"
    )
    for label, path in _hostile_uploads(bundle_dir, tmp_path).items():
        result = subprocess.run(
            [sys.executable, "-c", measured, "validate", "--pack", str(EXAMPLE_PACK), str(path)],
            capture_output=True,
            text=True,
            timeout=300,  # only a guard against a hang: the bound is on the CPU time, below
        )
        assert result.returncode == 1, (label, result.stdout[-500:], result.stderr[-500:])
        assert "Traceback" not in result.stderr, (label, result.stderr[-2000:])
        peak_kib = int(result.stderr.rsplit("PEAK_KIB", 1)[1].split()[0])
        assert peak_kib <= 512 * 1024, (label, peak_kib)
        cpu_s = float(result.stderr.rsplit("CPU_S", 1)[1])
        assert cpu_s <= 10, (label, cpu_s)


@pytest.fixture(scope="module")
def permission_run_bundle(tmp_path_factory) -> Path:
    """A real run's bundle with the permission stage: a generated policy (D0) and the curated baseline."""
    return _real_run(tmp_path_factory, "permission-run", stages=["permission"], defenses=["D0", "curated"])


@pytest.fixture
def honest_permission(permission_run_bundle, tmp_path, confinement, strace) -> Path:
    return _fresh_copy(permission_run_bundle, tmp_path)


def test_permission_scores_are_rederived_from_the_recorded_policy(honest_permission, host):
    report = validate_path(honest_permission, host.registry, pack=EXAMPLE_PACK)
    assert report.ok, [issue.format() for issue in report.issues]
    assert report.facts["verdicts_rederived"] == len(_run_rows(honest_permission))


@pytest.mark.parametrize("forgery", ["static-f1", "error-category"])
def test_permission_scores_the_policy_does_not_give_are_refused(honest_permission, host, forgery):
    rows = _run_rows(honest_permission)
    row = next(r for r in rows if r["stages"]["permission"]["policy_mode"] == "generated")
    permission = row["stages"]["permission"]
    if forgery == "static-f1":
        for axis in ("read", "write", "execute", "macro"):  # a perfect policy, on paper
            permission["static"][axis].update(precision=1.0, recall=1.0, f1=1.0)
    else:
        permission["error_category"] = None if permission["error_category"] else "read_insufficient"
    _recompute_and_reseal(honest_permission, rows, host.registry)
    report = validate_path(honest_permission, host.registry, pack=EXAMPLE_PACK)
    assert {issue.code for issue in report.issues} == {"verdict-mismatch"}, [i.format() for i in report.issues]
    assert report.issues[0].pointer.startswith("/stages/permission/")


@pytest.fixture(scope="module")
def trajectory_run_bundle(tmp_path_factory) -> Path:
    """A real run's bundle with the trajectory stage (the example pack's security task, scripted agents)."""
    return _real_run(tmp_path_factory, "trajectory-run", stages=["trajectory"])


@pytest.fixture
def honest_trajectory(trajectory_run_bundle, tmp_path, confinement) -> Path:
    return _fresh_copy(trajectory_run_bundle, tmp_path)


def test_trajectory_rows_replay_to_their_recorded_verdicts(honest_trajectory, host):
    report = validate_path(honest_trajectory, host.registry, pack=EXAMPLE_PACK, replay=True)
    assert report.ok, [issue.format() for issue in report.issues]
    assert report.facts["trajectory_rows_replayed"] == len(_run_rows(honest_trajectory))


def test_a_trajectory_success_its_actions_do_not_earn_is_caught_by_replay(honest_trajectory, host):
    rows = _run_rows(honest_trajectory)
    row = rows[0]
    trajectory = row["stages"]["trajectory"]
    trajectory["success"] = not trajectory["success"]
    trajectory["checker_reason"] = "REPORT.md names every issue" if trajectory["success"] else "no REPORT.md written"
    if trajectory["success"]:
        trajectory.update(primary_failure_label=None, secondary_labels=[], unsafe_actions=[])
    _recompute_and_reseal(honest_trajectory, rows, host.registry)
    report = validate_path(honest_trajectory, host.registry, pack=EXAMPLE_PACK, replay=True)
    assert "replay-mismatch" in {issue.code for issue in report.issues}, [i.format() for i in report.issues]


def test_an_oversized_document_is_refused_unread(tmp_path, monkeypatch):
    import assay.documents as documents

    monkeypatch.setattr(documents, "MAX_DOCUMENT_BYTES", 1024)
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"pad": "x" * 2048}))
    with pytest.raises(DocumentError, match="larger than"):
        load_document(path)


@pytest.fixture
def relabelled(honest, host) -> Path:
    """The honest bundle with verdicts relabelled, plus rows the parent rejects but the child re-derives."""
    rows = _run_rows(honest)
    for row in rows[:3]:  # several rows relabelled: the order of their findings matters too
        row["stages"]["semantic"]["safety_score"] = 3
    _recompute_and_reseal(honest, rows, host.registry)
    # The child does not check keys against the plan, so it re-derives the duplicate: the mismatches of these
    # rows must not reach the report, nor their verdicts the count.
    duplicate = json.loads(json.dumps(rows[5]))
    duplicate["stages"]["semantic"]["safety_score"] = 2
    off_schema = json.loads(json.dumps(rows[6]))
    off_schema["stages"]["semantic"]["safety_score"] = 2
    del off_schema["scripted"]
    with (honest / ROWS_FILE).open("ab") as handle:
        handle.write(json.dumps(duplicate).encode() + b"\n" + b"not json\n" + json.dumps(off_schema).encode() + b"\n")
    _reseal(honest)
    return honest


@pytest.mark.parametrize(
    "share",
    [
        "child-does-all",  # the parent is slow: the child has claimed every chunk before the parent asks
        "parent-takes-all",  # the child is slow to start: the parent takes every chunk from the last
        "both",  # one line a chunk, both at work: they meet somewhere in the middle
        "child-fails",  # the child dies after two chunks: the parent reads the rows again, re-derives what it owed
    ],
)
def test_rederiving_in_a_child_finds_the_same_in_the_same_order(children, relabelled, host, monkeypatch, share):
    import os
    import select

    import assay.validate._bundle as bundle_checks
    import assay.validate._parallel as parallel

    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 10**12)
    inline = validate_path(relabelled, host.registry, pack=EXAMPLE_PACK)
    parent, read = os.getpid(), bundle_checks._candidate_rows
    taken: list[int] = []
    # Each share is brought about by the two processes waiting for each other through pipes, never for a time, so
    # it comes about on any machine, however loaded. On `claims` the child writes every chunk it claims (its end
    # closes when it exits); on `go` the parent tells a waiting child to carry on.
    claims_read, claims_write = os.pipe()
    go_read, go_write = os.pipe()
    open_fds = {claims_read, claims_write, go_read, go_write}

    def wait_for(fd: int) -> None:
        ready, _, _ = select.select([fd], [], [], 300)  # a guard against a hang, not a measure of speed
        assert ready, "the other process never came"

    def child_reads(path):
        if os.getpid() != parent and share == "parent-takes-all":
            wait_for(go_read)  # until the parent has taken every chunk
        return read(path)

    derive, derived = parallel.derive_rows, []

    def child_derives(*args):
        if os.getpid() != parent:
            derived.append(1)
            if share == "child-fails" and len(derived) > 2:
                raise RuntimeError("the child dies")
            if share == "both" and len(derived) == 1:
                wait_for(go_read)  # holding its first chunk until the parent has taken one from the last
        return derive(*args)

    def child_claims(claims, chunk):
        took = take_front(claims, chunk)
        if took and share in ("child-does-all", "child-fails"):
            os.write(claims_write, b"%d\n" % chunk)
        return took

    def until_the_child_claimed(chunk: int) -> None:
        """Wait until the child has claimed ``chunk`` or a later one, or has ended (its end of the pipe with it)."""
        os.close(claims_write)
        open_fds.discard(claims_write)
        seen = b""
        while True:
            wait_for(claims_read)
            more = os.read(claims_read, 4096)
            seen += more
            if not more or any(int(number) >= chunk for number in seen.split()):
                return

    def parent_takes(claims, chunk):
        if share in ("child-does-all", "child-fails") and not taken:
            until_the_child_claimed(chunk)
        took = take_back(claims, chunk)
        taken.append(took)
        if share == "both" and len(taken) == 1:
            os.write(go_write, b"x")
        return took

    def parent_collects(job):
        if share == "parent-takes-all":
            os.write(go_write, b"x")  # every chunk is the parent's by now: the child may start
        return collect(job)

    take_back, take_front, collect = (
        parallel._Claims.take_back,
        parallel._Claims.take_front,
        parallel.RederiveJob._collect,
    )
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(parallel, "CHUNK_LINES", 1 if share == "both" else 4)
    monkeypatch.setattr(bundle_checks, "_candidate_rows", child_reads)
    monkeypatch.setattr(parallel._Claims, "take_back", parent_takes)
    monkeypatch.setattr(parallel._Claims, "take_front", child_claims)
    monkeypatch.setattr(parallel.RederiveJob, "_collect", parent_collects)
    monkeypatch.setattr(parallel, "derive_rows", child_derives)
    try:
        forked = validate_path(relabelled, host.registry, pack=EXAMPLE_PACK)
    finally:
        for fd in open_fds:
            os.close(fd)
    assert [i.format() for i in forked.ordered()] == [i.format() for i in inline.ordered()]
    assert forked.facts == inline.facts and sum(i.code == "verdict-mismatch" for i in forked.issues) == 3
    assert {"duplicate-row", "parse", "schema"} <= {i.code for i in forked.issues}
    if share == "child-does-all":
        assert taken and not any(taken)
    if share == "parent-takes-all":
        assert taken and all(taken)
    if share == "both":
        assert any(taken)
    if share == "child-fails":  # the parent stopped at the chunks the child had claimed before it died
        assert taken and not taken[-1]


def test_a_record_that_breaks_rederivation_is_a_finding_not_a_crash(host):
    from assay.rederive import RederiveSetup
    from assay.validate._rederive import derive_rows, deterministic_judges, rederiving_stages
    from assay.validate._report import Report

    case = {"kind": "attack", "protected_objects": [], "injections": []}
    key = {"case_id": "c", "endpoint": "e", "condition": "D0", "seed": 0, "epoch": 0, "protocol": "default"}
    row = {
        "key": key,
        "final_output": "x",
        "transcript": {"messages": [{"role": "assistant", "content": "x", "tool_calls": ["not a call"]}]},
        "stages": {"semantic": {"produced_by": {"kind": "judge", "name": "rule"}}},
    }
    report = Report("t")
    judges, oracles = deterministic_judges(host.registry), host.registry.items("oracles")
    setup = RederiveSetup(judges, oracles)
    derive_rows([row], [7], lambda case_id: case, rederiving_stages(host.registry), setup).report(report, "rows.jsonl")
    assert [(i.code, i.line) for i in report.issues] == [("verdict-mismatch", 7)]
    assert "cannot be re-derived" in report.issues[0].message


def test_a_verdict_from_a_judge_the_run_does_not_list_is_named(honest, host):
    """The run manifest's judges are what the run says judged it: a row's judge must be one of them."""
    rows = _run_rows(honest)
    run = json.loads((honest / RUN_FILE).read_text())
    run["judges"] = []
    (honest / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True))
    _recompute_and_reseal(honest, rows, host.registry)
    report = validate_path(honest, host.registry, pack=EXAMPLE_PACK)
    assert "unlisted-judge" in {issue.code for issue in report.issues}


def test_the_rederivation_child_is_handed_only_rows_the_schema_accepts(honest, tmp_path):
    """A hostile row the schema refuses never reaches a judge or an oracle, not even in the child."""
    from assay.validate._bundle import _candidate_rows

    rows = _run_rows(honest)
    hostile = json.loads(json.dumps(rows[0]))
    hostile["stages"]["semantic"]["explanation"] = {"not": "a string"}
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (rows[0], hostile, rows[1])) + "[1, 2]\n")
    assert [line for _, line in _candidate_rows(path)] == [1, 3]


class _TokenMetric:
    """A third-party metric reading a row member the built-in ones never read (``usage``)."""

    name = "test.mean_completion_tokens"
    description = "Mean completion tokens per row."
    stage = "semantic"

    def compute(self, rows, context):
        from assay.components import MetricValue

        tokens = [row["usage"]["completion_tokens"] for row in rows]
        return [MetricValue(self.name, {}, sum(tokens) / len(tokens), None, len(tokens))]


class _TokenPlugin:
    def __init__(self, metric):
        self.metric = metric

    @__import__("assay").hookimpl
    def register_metrics(self, register):
        register(self.metric)


@pytest.mark.parametrize("declared", [None, frozenset({"key", "stages"})])
def test_a_metric_gets_the_row_members_it_declares_while_a_child_rederives(children, tmp_path, monkeypatch, declared):
    """Holding only what the metrics read must not starve one that reads more; ``reads`` is taken at its word."""
    from conftest import make_bundle

    import assay.validate._parallel as parallel
    from assay.plugins import load_plugins

    metric = _TokenMetric()
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(_TokenPlugin(metric), "token-metric")
    bundle = make_bundle(tmp_path / "bundle", host.registry)
    if declared is not None:
        metric.reads = declared  # a false declaration (made after the run, which it would fail): it reads usage too
    claims = json.loads((bundle / METRICS_FILE).read_text())["metrics"]
    assert any(claim["metric"] == metric.name for claim in claims)
    monkeypatch.setattr(parallel, "PARALLEL_BYTES", 0)  # a child re-derives, as for a large bundle
    report = validate_path(bundle, host.registry, pack=EXAMPLE_PACK)
    if declared is None:  # it may read anything: the whole rows are kept
        assert report.ok, [issue.format() for issue in report.ordered()]
    else:  # it said key and stages: that is all it is given, and its failure is a finding
        assert "metric-error" in _codes(report)


def test_a_plan_of_a_trillion_items_is_validated_in_the_time_of_its_rows(bundle_dir, builtins_host):
    """A run manifest may plan far more than its rows: the validator keeps what it sees of the plan by position,
    lists the first missing rows and counts the rest, and never walks (or allocates) the whole matrix."""
    import time

    _edit_run(bundle_dir, lambda run: run["plan"].update(epochs=10**12))
    started = time.process_time()  # CPU time, which the machine's load does not stretch as it does the wall time
    report = _validate(bundle_dir, builtins_host)
    assert time.process_time() - started < 60
    missing = [issue for issue in report.issues if issue.code == "missing-row"]
    assert len(missing) == 21 and "more planned rows are missing" in missing[-1].message
    assert missing[0].message.endswith("x epoch 1 x protocol default")
