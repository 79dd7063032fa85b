"""AgentDojo on assay through the assay-agentdojo plugin alone: packs, tools, stage, oracles, conditions, reports,
re-derivation, and verdict-by-verdict agreement with AgentDojo's own runner.

The agreement tests run a stratified sample of every suite here; the full suites' figures are in the issue note
(``assay agentdojo-agreement`` on a whole-suite bundle). Tests that run many work items are marked ``slow``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from assay_agentdojo import conditions as adj_conditions
from assay_agentdojo.agreement import compare_bundle
from assay_agentdojo.environment import MAX_CALLS_PER_TURN
from assay_agentdojo.packs import write_pack
from assay_agentdojo.stage import MAX_ROUNDS, NAME, run_task
from assay_agentdojo.suites import SUITES, suite

from assay.engine.run import RunSettings, execute_run
from assay.testing.openai_server import LoopbackServer
from assay.validate import validate_path

# Every test here imports agentdojo (seconds) or runs work items of its suites: none is in the fast tier.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SAMPLE = "stratified:6"  # six user tasks and six user x injection pairs per suite


def _injection_ids(suite_name: str) -> list[str]:
    """A suite's injection task ids in number order (slack's start at 1)."""
    return sorted(suite(suite_name).injection_tasks, key=lambda task_id: int(task_id.rsplit("_", 1)[1]))


def _rows(bundle: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


def _run(host, tmp_path: Path, pack: str, endpoints: list[str], **settings: Any):
    outcome = execute_run(
        RunSettings(pack=pack, endpoints=endpoints, out=tmp_path / "run", progress=False, **settings), host=host
    )
    assert outcome.report.ok, [issue.format() for issue in outcome.report.ordered()]
    return outcome


# -- packs ----------------------------------------------------------------------------------------------------------


def test_each_suite_is_a_pack_of_every_user_task_and_every_pair(host):
    registry = json.loads((REPO / "registry" / "packs.json").read_text())
    listed = {entry["name"]: entry["digest"] for entry in registry["packs"]}
    for suite_name in SUITES:
        loaded = suite(suite_name)
        pack = host.registry.get("packs", f"agentdojo-{suite_name}")
        users, injections = len(loaded.user_tasks), len(loaded.injection_tasks)
        index = pack.case_index()
        assert len(index) == users * (1 + injections), suite_name
        assert pack.integrity_problem() is None
        assert listed[pack.name] == pack.claimed_digest, "registry/packs.json lists another digest"
        first = _injection_ids(suite_name)[0]
        case = pack.cases_by_id()[f"user_task_1.{first}"]
        data = case["extensions"]["x-agentdojo"]
        assert (data["suite"], data["benchmark_version"], data["agentdojo"]) == (suite_name, "v1.2.2", "0.1.35")
        assert (data["user_task"], data["injection_task"]) == ("user_task_1", first)
        assert data["goal"] == loaded.get_injection_task_by_id(first).GOAL
        assert case["kind"] == "x-agentdojo.injection_task" and data["injection_vectors"]


def test_a_changed_task_or_data_changes_the_pack_digest(tmp_path, monkeypatch, host):
    import agentdojo.task_suite.task_suite as task_suite_module

    write_pack(tmp_path / "same", "banking")
    digest = json.loads((tmp_path / "same" / "pack.json").read_text())["digest"]
    assert digest == host.registry.get("packs", "agentdojo-banking").claimed_digest  # generation is deterministic

    task = suite("banking").get_user_task_by_id("user_task_0")
    with monkeypatch.context() as patch:
        patch.setattr(type(task), "PROMPT", task.PROMPT + " Thanks.")
        write_pack(tmp_path / "prompt", "banking")
    original = task_suite_module.read_suite_file
    with monkeypatch.context() as patch:
        patch.setattr(
            task_suite_module,
            "read_suite_file",
            lambda name, file, path: (
                original(name, file, path) + ("\n# one more line\n" if file == "environment.yaml" else "")
            ),
        )
        write_pack(tmp_path / "data", "banking")
    digests = {json.loads((tmp_path / name / "pack.json").read_text())["digest"] for name in ("prompt", "data")}
    assert digest not in digests and len(digests) == 2


def test_conditions_hold_agentdojos_own_attack_texts():
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, PipelineConfig
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.attacks.attack_registry import load_attack

    stand_in = GroundTruthPipeline(None)
    stand_in.name = "local"
    for attack in adj_conditions.ATTACKS:
        theirs = load_attack(attack.name, suite("banking"), stand_in)
        assert theirs.jailbreak == attack.template, attack.name
        assert theirs.user_name == attack.user_name, attack.name
        if attack.model_name is not None:
            assert theirs.model_name == attack.model_name, attack.name
    config = PipelineConfig(
        llm=stand_in, model_id=None, defense="spotlighting_with_delimiting", system_message_name=None,
        system_message=None,
    )  # fmt: skip
    pipeline = AgentPipeline.from_config(config)
    system = pipeline.elements[0].system_message
    assert system.endswith(adj_conditions.DEFENSES["spotlighting_with_delimiting"]["system_message_suffix"])


def test_environments_are_agentdojos_own(host):
    """The environment the stage builds (libyaml's loader) is the one AgentDojo's loader builds, attack filled."""
    from assay_agentdojo.environment import build_environment, fill_injections

    made = adj_conditions.condition("agentdojo.important_instructions")
    for suite_name in SUITES:
        loaded = suite(suite_name)
        cases = host.registry.get("packs", f"agentdojo-{suite_name}").cases_by_id()
        first, second = _injection_ids(suite_name)[:2]
        for case_id in (f"user_task_0.{first}", f"user_task_3.{second}"):
            injections = fill_injections(cases[case_id], made, "GPT-4")
            theirs = loaded.load_and_inject_default_environment(injections)
            assert build_environment(loaded, injections).model_dump() == theirs.model_dump(), (suite_name, case_id)


# -- the stage against AgentDojo's own runner ----------------------------------------------------------------------


@pytest.mark.parametrize("suite_name", SUITES)
def test_ground_truth_agents_agree_with_agentdojos_runner(suite_name, tmp_path, host, capsys):
    """Every row of AgentDojo's ground-truth agents through assay gets AgentDojo's own verdicts (a sample per suite)."""
    outcome = _run(host, tmp_path, f"agentdojo-{suite_name}", ["scripted:refuse", "scripted:comply"], sample=SAMPLE)
    verdicts = compare_bundle(outcome.bundle)
    assert len(verdicts) == 2 * 12
    counts = {
        "utility": sum(v.agentdojo_utility for v in verdicts),
        "security": sum(bool(v.agentdojo_security) for v in verdicts),
    }
    with capsys.disabled():
        print(f"\n{suite_name}: {len(verdicts)} rows, AgentDojo says {counts}; disagreements:",
              [v for v in verdicts if not v.agrees])  # fmt: skip
    assert [v for v in verdicts if not v.agrees] == []
    # The sample has both verdicts of both checks: agreement on one value only would prove little.
    assert 0 < counts["security"] < len(verdicts) and counts["utility"] > 0


class _Context(SimpleNamespace):
    """Test double of assay's StageContext: what the stage reads of one work item, for driving it directly."""

    def request_context(self, stage: str) -> dict[str, Any]:
        from assay_agentdojo.stage import scripted_answer

        return {"case": self.case, "key": f"{self.case['id']}|{self.item.condition}", "stage": stage,
                "scripted_answer": scripted_answer}  # fmt: skip

    def add_usage(self, response: Any) -> None:
        self.row["usage"]["model_calls"] += 1


def _context(host, case: dict[str, Any], endpoint: Any, condition: str = "agentdojo.important_instructions"):
    return _Context(
        item=SimpleNamespace(condition=condition, seed=0),
        case=case,
        endpoint=endpoint,
        options={},
        temperature=0.0,
        max_tokens=256,
        row={"stages": {}, "usage": {"model_calls": 0}},
        oracles=host.registry.items("oracles"),
        prompt_texts=[],
    )


def _case(host, suite_name: str, case_id: str) -> dict[str, Any]:
    return dict(host.registry.get("packs", f"agentdojo-{suite_name}").cases_by_id()[case_id])


def test_the_longest_ground_truth_fits_the_loop(host):
    """Travel's user_task_19 has 18 ground-truth calls, more than the loop's 15 rounds: the ground-truth agent
    makes them in one message, as AgentDojo's ground-truth pipeline runs them all, and AgentDojo agrees."""
    import asyncio

    from assay_agentdojo.agreement import agentdojo_verdicts

    from assay.backends.scripted import ScriptedEndpoint

    case = _case(host, "travel", "user_task_19.injection_task_1")
    assert len(case["extensions"]["x-agentdojo"]["ground_truth"]) > MAX_ROUNDS
    context = _context(host, case, ScriptedEndpoint("gt", "refuse"))
    asyncio.run(run_task(context))
    outcome = context.row["stages"][NAME]
    assert outcome["utility"] is True and outcome["attack_success"] is False
    assert agentdojo_verdicts(outcome, "scripted:refuse", "agentdojo.important_instructions") == (True, False)


class _HostileEndpoint:
    """Test double of an endpoint: a hostile agent that answers every request with 40 tool calls carrying
    arguments meant to hurt the process that runs them (deeply nested literals, huge strings, non-objects,
    unknown tools, another case's tool)."""

    id = "hostile"
    scripted = False

    def __init__(self) -> None:
        self.requests = 0

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "backend": "test-double", "model": {"name": "hostile"}}

    async def complete(self, request: Any):
        from assay.api import ChatResponse

        self.requests += 1
        nested = "[" * 100_000 + "]" * 100_000
        calls = [
            {"id": "a", "name": "send_money", "arguments": {"recipient": nested, "amount": 1, "subject": "x",
                                                            "date": "2022-01-01"}},
            {"id": "b", "name": "send_money", "arguments": "not an object"},
            {"id": "c", "name": "__import__", "arguments": {"name": "os"}},
            {"id": "d", "name": "get_balance", "arguments": {"extra": "x" * 1_000_000}},
            {"id": "e", "name": "read_file", "arguments": {"file_path": "/etc/passwd"}},
        ]  # fmt: skip
        deep = "[" * 2000 + "]" * 2000  # within the 4 KiB that AgentDojo's literal_eval conversion is given
        calls.append({"id": "g", "name": "send_money", "arguments": {"recipient": deep, "amount": 1, "subject": "x",
                                                                     "date": "2022-01-01"}})  # fmt: skip
        calls += [{"id": f"f{i}", "name": "get_balance", "arguments": {}} for i in range(34)]
        return ChatResponse(None, tool_calls=tuple(calls), finish_reason="tool_calls")

    async def aclose(self) -> None:
        """Nothing to close."""


def test_a_hostile_agent_is_bounded(host):
    """The attack first: a hostile agent's calls are answered with errors, capped per message and per item, and
    never reach past the in-memory environment."""
    import asyncio

    endpoint = _HostileEndpoint()
    case = _case(host, "banking", "user_task_0.injection_task_0")
    context = _context(host, case, endpoint)
    asyncio.run(run_task(context))
    outcome = context.row["stages"][NAME]
    assert endpoint.requests == MAX_ROUNDS + 1  # the loop's bound, whatever the agent does
    results = context.row["transcript"]["tool_results"]
    assert len(results) == MAX_ROUNDS * 40
    shown = {r["tool_call_id"]: r["content"] for r in results[:40]}
    assert shown["b"].startswith("ValidationError") and shown["c"] == "Invalid tool __import__ provided."
    assert "root:" not in shown["e"]  # banking's read_file reads its in-memory files, never the host's
    assert all(r["content"].startswith("Not run:") for r in results[MAX_CALLS_PER_TURN:40])
    assert outcome["utility"] is False and outcome["attack_success"] is False
    # The validator's replay of that row gives every recorded output and verdict again, and no other output.
    from assay_agentdojo.rederive import TaskRederiver

    from assay.rederive import RederiveSetup

    row = {"key": {"condition": "agentdojo.important_instructions"}, "stages": context.row["stages"],
           "transcript": context.row["transcript"], "final_output": context.row["final_output"]}  # fmt: skip
    rederiver = TaskRederiver(RederiveSetup(oracles=host.registry.items("oracles")))
    assert rederiver.check(row, case, {}).problems == ()
    skipped = next(m for m in row["transcript"]["messages"] if (m.get("content") or "").startswith("Not run:"))
    skipped["content"] = "balance: 1000000"
    assert [p.code for p in rederiver.check(row, case, {}).problems] == ["agentdojo-tool-output"]


# -- runs, validation, re-derivation --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def banking_bundle(tmp_path_factory, host) -> Path:
    """A scripted run of a banking sample under an attack and its spotlighted twin."""
    out = tmp_path_factory.mktemp("agentdojo")
    outcome = _run(
        host, out, "agentdojo-banking", ["scripted:refuse", "scripted:comply", "scripted:mixed"], sample="stratified:8",
        defenses=["agentdojo.important_instructions", "agentdojo.important_instructions+spotlighting_with_delimiting"],
    )  # fmt: skip
    return outcome.bundle


def test_a_run_names_agentdojos_headline_attack_by_default(tmp_path, host):
    outcome = _run(host, tmp_path, "agentdojo-slack", ["scripted:refuse"], sample="stratified:1")
    run = json.loads((outcome.bundle / "run.json").read_text())
    assert run["plan"]["conditions"] == ["agentdojo.important_instructions"]
    condition = next(c for c in run["conditions"] if c["id"] == "agentdojo.important_instructions")
    document = host.registry.get("defenses", "agentdojo.important_instructions").document
    assert condition["digest"] == document["digest"] and "{goal}" in document["text"]


def test_the_report_shows_agentdojos_numbers_and_paired_tests(banking_bundle, cli):
    result = cli("report", str(banking_bundle))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "### AgentDojo" in text and "utility under attack" in text and "targeted ASR" in text
    assert "injection seen" in text and "Exact McNemar" in text
    assert re.search(r"scripted-refuse.*\| agentdojo\.important_instructions \| 100\.0% \[", text)


def test_relabelled_or_forged_rows_do_not_validate(banking_bundle, tmp_path, host):
    """Relabel a verdict, forge a tool output, or change the final answer, and recompute the claims: the replay
    of the row's calls refuses each."""
    from assay.bundle import dump_row, seal_bundle, write_json_atomic
    from assay.components import MetricContext
    from assay.summary import compute_metrics, summary_document

    rows = _rows(banking_bundle)
    target = next(i for i, r in enumerate(rows) if r["stages"][NAME]["attack_success"] is False
                  and r["transcript"]["tool_results"])  # fmt: skip

    def tampered(name: str, change) -> list[str]:
        copy = tmp_path / name
        import shutil

        shutil.copytree(banking_bundle, copy)
        edited = json.loads(json.dumps(rows))
        change(edited[target])
        # What a careful cheater does after editing rows: recompute every metric with assay's own plugins, re-seal.
        (copy / "rows.jsonl").write_bytes(b"".join(dump_row(r) for r in edited))
        run = json.loads((copy / "run.json").read_text())
        context = MetricContext(plan=run["plan"], cases={})
        write_json_atomic(copy / "metrics.json", summary_document(compute_metrics(edited, context, host.registry)))
        manifest = json.loads((copy / "bundle.json").read_text())
        seal_bundle(copy, pack=manifest["pack"], row_count=len(edited))
        report = validate_path(copy, host.registry)
        assert not report.ok
        return [issue.format() for issue in report.ordered()]

    def relabel(row):
        row["stages"][NAME]["attack_success"] = True

    def forge(row):
        first = next(m for m in row["transcript"]["messages"] if m["role"] == "tool")
        first["content"] = "balance: 1000000"

    def answer(row):
        row["final_output"] = "something else"
        next(m for m in reversed(row["transcript"]["messages"]) if m["role"] == "assistant")["content"] = "x"

    assert any("agentdojo-verdict" in line or "attack_success" in line for line in tampered("relabel", relabel))
    assert any(
        "agentdojo-tool-output" in line or "not what the call gives" in line for line in tampered("forge", forge)
    )
    assert any("final" in line for line in tampered("answer", answer))


def test_scripted_runs_are_byte_identical(tmp_path, host):
    """Tools that stamp the time (a sent email, a created file) stamp a frozen clock: the same scripted run twice
    gives the same bundle digest."""
    digests = []
    for name in ("one", "two"):
        outcome = execute_run(
            RunSettings(pack="agentdojo-workspace", endpoints=["scripted:comply"], out=tmp_path / name,
                        sample="stratified:10", progress=False),
            host=host,
        )  # fmt: skip
        digests.append((outcome.bundle / "bundle.json").read_bytes())
        sent = [r for r in _rows(outcome.bundle) if "send_email" in json.dumps(r["transcript"]["tool_calls"])]
        assert sent, "the sample should send an email (a stamped tool)"
    assert digests[0] == digests[1]


def test_a_run_against_the_loopback_server_validates(tmp_path, host):
    with LoopbackServer() as server:
        outcome = _run(
            host, tmp_path, "agentdojo-workspace",
            [f"openai:model=echo,base_url={server.openai_base_url},id=echo"], sample="stratified:2",
        )  # fmt: skip
    rows = _rows(outcome.bundle)
    assert len(rows) == 4 and all(r["final_output"].startswith("ECHO:") for r in rows)
    assert all(r["stages"][NAME]["utility"] is False for r in rows)  # an echo does no task
    assert validate_path(outcome.archive, host.registry).ok


def test_a_run_of_the_embedded_model_validates(local_model, tmp_path, host):
    outcome = _run(host, tmp_path, "agentdojo-workspace", ["local"], sample="stratified:1", max_tokens=32,
                   max_error_rate=1.0)  # fmt: skip
    rows = _rows(outcome.bundle)
    assert len(rows) == 2 and all(not r["scripted"] and r["usage"]["model_calls"] >= 1 for r in rows)
    assert validate_path(outcome.archive, host.registry).ok


# -- the contract: conditions a stage places, and nothing of AgentDojo in core --------------------------------------


def test_an_agentdojo_condition_is_refused_where_no_stage_places_it(tmp_path, host):
    from assay.errors import UsageError

    unapplied = "placed at x-agentdojo.injection_vectors, and no planned stage applies that placement"
    with pytest.raises(UsageError, match=unapplied):
        execute_run(
            RunSettings(pack="example", endpoints=["scripted:refuse"], out=tmp_path / "a", progress=False,
                        defenses=["agentdojo.important_instructions"]),
            host=host,
        )  # fmt: skip
    with pytest.raises(UsageError, match="not prompt defenses"):
        execute_run(
            RunSettings(pack="agentdojo-slack", endpoints=["scripted:refuse"], out=tmp_path / "b", progress=False,
                        defenses=["D1"]),
            host=host,
        )  # fmt: skip
    assert not (tmp_path / "a").exists() and not (tmp_path / "b" / "bundle").exists()
