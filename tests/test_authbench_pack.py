"""The authbench pack: valid and fresh, the promised mix of tasks, and every task holding up in the real jail.

For every task the oracle solution, run under its curated spec (required ∪ implicit) enforced by Landlock,
completes the task and the utility verifier passes (it does not on the untouched environment). For every
sensitive task the dangerous shortcut, followed by the oracle, completes the task and trips the attack verifier
when unrestricted; under the curated spec the shortcut is refused a sensitive permission, the task still gets
done and the attack verifier stays silent. Verifiers run in the task's environment after the commands, as the
permission stage runs them, with the commands' combined output in /.assay/agent_output.txt.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections import Counter
from pathlib import Path

import pytest

from assay.designs.permission.environment import materialize
from assay.designs.permission.jail import run_in_jail
from assay.designs.permission.scoring import score_policy
from assay.designs.permission.stage import run_verifier, write_agent_output
from assay.packs import Pack
from assay.permissions.model import PermissionSet
from assay.permissions.patterns import matches

# ASSAY_AUTHBENCH_ROOT points the task checks at a working copy of the distribution (an author's draft of new
# tasks, locked there); the registry and binary-fixture tests are about the committed pack only.
ROOT = Path(
    os.environ.get("ASSAY_AUTHBENCH_ROOT") or Path(__file__).resolve().parents[1] / "plugins" / "assay-pack-authbench"
)
PACK_DIR = ROOT / "src" / "assay_pack_authbench" / "pack"
CASES = Pack.from_directory(PACK_DIR).cases()
SENSITIVE = sorted(case_id for case_id, case in CASES.items() if case["sensitive"])
ENVIRONMENT_ROOTS = ("/srv/", "/opt/", "/home/", "/var/", "/workspace/")
TIMEOUT_S = 300  # only a guard against a hang, generous enough for a heavily loaded machine


def test_pack_validates(cli):
    result = cli("validate", str(ROOT))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "valid pack (authbench 1.2.0, 120 cases, " in result.stdout + result.stderr


def test_registry_lists_the_pack_digest():
    index = json.loads((ROOT.parents[1] / "registry" / "packs.json").read_text(encoding="utf-8"))
    entry = next(entry for entry in index["packs"] if entry["name"] == "authbench")
    pack = Pack.from_directory(PACK_DIR)
    assert entry == {
        "name": "authbench",
        "version": "1.2.0",
        "spec_version": "1.0",
        "digest": pack.claimed_digest,
        "distribution": "assay-pack-authbench",
    }
    assert pack.integrity_problem() is None


def test_the_binary_fixtures_are_what_their_sources_build():
    """The tasks are data; only databases and archives are built (from binaries/): the committed bytes are those."""
    import runpy

    built = runpy.run_path(str(ROOT / "generate.py"))["built"]()
    assert len(built) == 20 and {path.suffix for path in built} == {".db", ".tar"}
    stale = [str(path.relative_to(PACK_DIR)) for path, data in built.items() if path.read_bytes() != data]
    assert not stale, f"run generate.py: these files differ from what their sources build: {stale}"
    listed = {entry["path"] for entry in Pack.from_directory(PACK_DIR).manifest["fixtures"]}
    assert {path.relative_to(PACK_DIR).as_posix() for path in built} <= listed


def test_task_mix():
    """The seed's scale: 120 tasks, 80 standard and 40 sensitive, over 10 work domains (8 and 4 in each)."""
    families = Counter(case["family"] for case in CASES.values())
    assert families == {"perm.standard": 80, "perm.sensitive": 40}
    by_domain = Counter((case["scenario"], case["family"]) for case in CASES.values())
    domains = {scenario for scenario, _ in by_domain}
    assert len(domains) == 10
    assert all(by_domain[d, "perm.standard"] == 8 and by_domain[d, "perm.sensitive"] == 4 for d in domains), by_domain


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_task_is_complete(case_id):
    case = CASES[case_id]
    assert case_id.startswith("ab-") and case["kind"] == "permission"
    assert case["sensitive"] == (case["family"] == "perm.sensitive")
    assert case["instruction"] and case["oracle_solution"] and case["title"] and case["scenario"]
    environment = case["environment"]
    paths = [item["path"] for key in ("files", "symlinks") for item in environment.get(key, [])]
    paths += environment.get("directories", [])
    assert paths and all(path.startswith(ENVIRONMENT_ROOTS) for path in paths), case_id
    spec = case["permission_spec"]
    assert all(spec["required_permissions"][axis] for axis in ("read", "write", "execute")), case_id
    for verifier in case["verifiers"].values():
        assert verifier["plugin"] == "env.check" and verifier["params"]["script"].strip()
    if case["sensitive"]:
        assert case["shortcut_solution"] and "attack" in case["verifiers"], case_id
        assert any(spec["sensitive_permissions"][axis] for axis in ("read", "write", "execute")), case_id
        # The curated spec must not itself grant what is sensitive.
        for axis in ("read", "write", "execute"):
            for pattern in spec["sensitive_permissions"][axis]:
                assert pattern not in spec["required_permissions"][axis], (case_id, axis, pattern)
    else:
        assert "shortcut_solution" not in case and "attack" not in case["verifiers"], case_id


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_spec_scores_itself_and_flags_the_sensitive(case_id, tmp_path):
    # The curated required permissions, taken as a policy, match the reference exactly within scored_roots and
    # open nothing sensitive; adding the sensitive permissions is reported, every one of them.
    case = CASES[case_id]
    spec = case["permission_spec"]
    paths = materialize(case["environment"], PACK_DIR, tmp_path / "root").walk()
    universe = {"read": paths, "write": paths, "execute": paths}
    score = score_policy(spec["required_permissions"], spec, universe)
    assert score["macro"]["f1"] == 1.0 and score["sensitive_opened"] == [], (case_id, score)
    if case["sensitive"]:
        sensitive = spec["sensitive_permissions"]
        broad = {axis: spec["required_permissions"][axis] + sensitive[axis] for axis in sensitive}
        opened = score_policy(broad, spec, universe)["sensitive_opened"]
        assert len(opened) == sum(len(patterns) for patterns in sensitive.values()), (case_id, opened)


# ---------------------------------------------------------------- the jail


def _curated(case) -> PermissionSet:
    spec = case["permission_spec"]
    required = PermissionSet.from_mapping(spec["required_permissions"])
    return required.union(PermissionSet.from_mapping(spec["implicit_permissions"]))


def _verdict(layout, case, role: str, agent_output: str) -> tuple[bool, str]:
    """Whether the case's ``role`` verifier fires, run as the permission stage runs it after the commands."""
    inputs = layout.host_root.parent / "inputs"
    inputs.mkdir(exist_ok=True)
    inputs.chmod(0o755)
    write_agent_output(inputs, [agent_output])
    result = run_verifier(layout, inputs, case["verifiers"][role]["params"]["script"], TIMEOUT_S)
    return result.exit_code == 0, result.output


def _run(layout, script: str, policy: PermissionSet | None):
    result = run_in_jail(layout, script, policy=policy, timeout_s=TIMEOUT_S)
    assert not result.timed_out, result.output
    return result


def _sensitive_denials(denials, case) -> list[str]:
    """The refused accesses that a sensitive permission of the case covers.

    Creating or deleting an entry changes its directory, so a refused write also counts when the sensitive
    pattern names the directory it happened in.
    """
    sensitive = case["permission_spec"]["sensitive_permissions"]
    hits = []
    for denial in denials:
        candidates = [denial.path] + ([posixpath.dirname(denial.path)] if denial.op == "write" else [])
        if any(matches(pattern, path) for pattern in sensitive.get(denial.op, []) for path in candidates):
            hits.append(f"{denial.op}:{denial.path}")
    return hits


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_oracle_passes_under_curated_spec(strace, case_id, box_path):
    case = CASES[case_id]
    layout = materialize(case["environment"], PACK_DIR, box_path / "root")
    fired, output = _verdict(layout, case, "utility", "")
    assert not fired, f"{case_id}: the utility verifier passes before anything ran: {output}"
    if case["sensitive"]:
        assert not _verdict(layout, case, "attack", "")[0], (
            f"{case_id}: the attack verifier fires on the fresh environment"
        )
    result = _run(layout, case["oracle_solution"], _curated(case))
    assert result.exit_code == 0, (
        f"{case_id}: oracle exit {result.exit_code} under the curated spec, denials {result.denials}\n"
        f"{result.output[-2000:]}"
    )
    fired, output = _verdict(layout, case, "utility", result.output)
    assert fired, f"{case_id}: utility verifier failed after the oracle: {output}"
    if case["sensitive"]:
        fired, output = _verdict(layout, case, "attack", result.output)
        assert not fired, f"{case_id}: the attack verifier fires after the safe oracle: {output}"


@pytest.mark.parametrize("case_id", SENSITIVE)
def test_shortcut_does_harm_unrestricted(strace, case_id, box_path):
    case = CASES[case_id]
    layout = materialize(case["environment"], PACK_DIR, box_path / "root")
    shortcut = _run(layout, case["shortcut_solution"], None)
    oracle = _run(layout, case["oracle_solution"], None)
    output = shortcut.output + oracle.output
    assert oracle.exit_code == 0, (
        f"{case_id}: oracle exit {oracle.exit_code} after the shortcut\n{oracle.output[-2000:]}"
    )
    fired, verifier_output = _verdict(layout, case, "utility", output)
    assert fired, f"{case_id}: utility verifier failed after shortcut + oracle: {verifier_output}"
    fired, verifier_output = _verdict(layout, case, "attack", output)
    assert fired, f"{case_id}: the attack verifier does not fire after the unrestricted shortcut: {verifier_output}"


@pytest.mark.parametrize("case_id", SENSITIVE)
def test_curated_spec_stops_the_shortcut(strace, case_id, box_path):
    case = CASES[case_id]
    policy = _curated(case)
    layout = materialize(case["environment"], PACK_DIR, box_path / "root")
    shortcut = _run(layout, case["shortcut_solution"], policy)
    assert _sensitive_denials(shortcut.denials, case), (
        f"{case_id}: the shortcut was not refused a sensitive permission; denials: {shortcut.denials}\n"
        f"{shortcut.output[-2000:]}"
    )
    oracle = _run(layout, case["oracle_solution"], policy)
    output = shortcut.output + oracle.output
    assert oracle.exit_code == 0, (
        f"{case_id}: oracle exit {oracle.exit_code} after the shortcut, denials {oracle.denials}\n"
        f"{oracle.output[-2000:]}"
    )
    fired, verifier_output = _verdict(layout, case, "utility", output)
    assert fired, (
        f"{case_id}: utility verifier failed after shortcut + oracle under the curated spec: {verifier_output}"
    )
    fired, verifier_output = _verdict(layout, case, "attack", output)
    assert not fired, f"{case_id}: the attack verifier fires although the curated spec was enforced: {verifier_output}"


def test_the_report_gives_static_quality_for_standard_and_sensitive_tasks_apart(strace, cli, tmp_path):
    """Issue 14, item 11: the seed reports static P/R/F1 on standard and on sensitive tasks, never pooled."""
    run = cli(
        "run", "--pack", "authbench", "--endpoint", "scripted:mixed", "--condition", "D0", "--stages", "permission",
        "--sample", "stratified:1", "--out", str(tmp_path / "o"), "--quiet",
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    text = cli("report", str(tmp_path / "o" / "bundle")).stdout
    static = [line for line in text.splitlines() if line.startswith("| scripted-mixed (scripted) | D0 | perm.")]
    assert [line.split(" | ")[2] for line in static] == ["perm.sensitive", "perm.standard"], static
    # The over-broad writer's precision differs between the two task families: the split is not the pooled row twice.
    assert static[0].split(" | ")[3:] != static[1].split(" | ")[3:]
