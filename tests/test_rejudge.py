"""`assay rejudge`: a second judge on the semantic stage, and its agreement with the bundle's labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK

from assay.designs.staged.rejudge import (
    RejudgedRow,
    agreement,
    build_judge,
    prompt_texts,
    rejudge_bundle,
    render_rejudge_markdown,
)
from assay.engine.messages import BackendError
from assay.reports import read_bundle
from assay.stats import cohen_kappa, percent_agreement, spearman


@pytest.fixture(scope="module")
def bundle(strace, cli, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rejudge") / "run"
    result = cli(
        "run",
        "--pack",
        "example",
        "--endpoint",
        "scripted:mixed",
        "--endpoint",
        "scripted:comply",
        "--seeds",
        "0,1",
        "--judge",
        "rule",
        "--out",
        str(out),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    return out / "bundle"


def _rows(bundle: Path) -> list[dict]:
    return [
        json.loads(line) for line in (bundle / "rows.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def test_rule_against_rule_agrees_perfectly(cli, bundle):
    result = cli("rejudge", str(bundle), "--judge", "rule", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    semantic = [r["stages"]["semantic"] for r in _rows(bundle) if "semantic" in r["stages"]]
    fails = sum(s["core_fail"] is True for s in semantic)
    summary = document["summary"]
    assert summary["rows"] == summary["compared"] == len(semantic) and summary["not_compared"] == 0
    assert summary["agreement"] == 1.0 and summary["kappa"] == 1.0 and summary["spearman"] == pytest.approx(1.0)
    assert summary["confusion"] == {
        "original_fail": {"rejudged_fail": fails, "rejudged_pass": 0},
        "original_pass": {"rejudged_fail": 0, "rejudged_pass": len(semantic) - fails},
    }
    assert 0 < fails < len(semantic)
    assert document["judge"]["name"] == document["original_judge"]["name"] == "rule"
    assert "verdicts" not in document


def test_scripted_llm_judge_numbers_by_hand(cli, bundle, tmp_path):
    target = tmp_path / "out" / "second.json"
    target.parent.mkdir()
    result = cli("rejudge", str(bundle), "--judge", "llm:backend=scripted,mode=comply", "--out", str(target))
    assert result.returncode == 0, result.stderr
    assert "# Re-judged semantic stage:" in result.stdout and str(target) in result.stderr
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["judge"]["name"] == "llm" and document["judge"]["endpoint"] == "scripted:mode=comply"
    rows = {json.dumps(r["key"], sort_keys=True): r for r in _rows(bundle) if "semantic" in r["stages"]}
    verdicts = {json.dumps(v["key"], sort_keys=True): v for v in document["verdicts"]}
    assert verdicts.keys() == rows.keys()
    first, second, scores = [], [], []
    for key, row in rows.items():
        verdict = verdicts[key]["verdict"]
        # A scripted endpoint asked as a judge calls every response that starts with "Sure" a CoreFail.
        assert verdict["core_fail"] is row["final_output"].startswith("Sure")
        assert verdict["produced_by"]["name"] == "llm" and verdicts[key]["error"] is None
        assert verdicts[key]["original"] == {
            "core_fail": row["stages"]["semantic"]["core_fail"],
            "safety_score": row["stages"]["semantic"]["safety_score"],
        }
        first.append(row["stages"]["semantic"]["core_fail"])
        second.append(verdict["core_fail"])
        scores.append((row["stages"]["semantic"]["safety_score"], verdict["safety_score"]))
    summary = document["summary"]
    assert summary["compared"] == len(rows)
    assert summary["agreement"] == percent_agreement(first, second)
    assert summary["kappa"] == cohen_kappa(first, second)
    assert summary["spearman"] == spearman([a for a, _ in scores], [b for _, b in scores])
    assert summary["confusion"]["original_fail"]["rejudged_pass"] == sum(
        1 for a, b in zip(first, second, strict=True) if a and not b
    )
    assert summary["confusion"]["original_pass"]["rejudged_fail"] == sum(
        1 for a, b in zip(first, second, strict=True) if b and not a
    )
    kappa = f"{summary['kappa']:.3f}"
    assert f"| Cohen's kappa | {kappa} |" in result.stdout


def test_agreement_counts_nulls_and_errors_apart():
    def row(first, second, s1=None, s2=None, error=None):
        verdict = None if error else {"core_fail": second, "safety_score": s2}
        return RejudgedRow({"case_id": "c"}, {"core_fail": first, "safety_score": s1}, verdict, error)

    rows = [
        row(True, True, 1, 1),
        row(True, False, 2, 4),
        row(False, False, 5, 5),
        row(False, True, 4, 2),
        row(False, False, 5, 4),
        row(None, True, None, 1),
        row(True, None, 1, None),
        row(None, None),
        row(True, None, 1, None, error="backend: timed out"),
    ]
    result = agreement(rows)
    first, second = [True, True, False, False, False], [True, False, False, True, False]
    assert (result.rows, result.compared, result.not_compared) == (9, 5, 4)
    assert (result.original_null, result.rejudged_null, result.errors) == (2, 2, 1)
    assert result.agreement == percent_agreement(first, second) == 0.6
    assert result.kappa == cohen_kappa(first, second)
    assert result.confusion == {
        "original_fail": {"rejudged_fail": 1, "rejudged_pass": 1},
        "original_pass": {"rejudged_fail": 1, "rejudged_pass": 2},
    }
    assert result.score_pairs == 5 and result.spearman == spearman([1, 2, 5, 4, 5], [1, 4, 5, 2, 4])
    # Nothing to compare: no agreement, no kappa, no correlation.
    empty = agreement([row(None, True), row(True, None)])
    assert (empty.compared, empty.agreement, empty.kappa, empty.spearman) == (0, None, None, None)
    constant = agreement([row(True, True, 1, 1), row(False, False, 1, 5)])
    assert constant.spearman is None  # one judge gave a single score throughout


def test_prompt_texts_drop_only_the_last_assistant_message():
    row = {"transcript": {"messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": None},
        {"role": "assistant", "content": "final"},
    ]}}  # fmt: skip
    assert prompt_texts(row) == ["sys", "hi", "earlier", ""]
    assert prompt_texts({"transcript": {"messages": []}}) == []


def test_a_failing_judge_call_is_recorded_not_raised(bundle, host):
    files = read_bundle(bundle)
    real = build_judge("rule", host.registry)
    failing = files.rows[0]["key"]

    class Flaky:
        def describe(self, stage):
            return {"name": "flaky", "stage": stage}

        async def semantic(self, case, final_output, texts):
            if final_output == files.rows[0]["final_output"]:
                raise BackendError("gave up", kind="timeout", attempts=3)
            return await real.semantic(case, final_output, texts)

    result = rejudge_bundle(files, "flaky", host.registry, make_judge=lambda spec, registry: Flaky())
    errored = [r for r in result.rows if r.error is not None]
    assert errored and errored[0].error == "timeout: gave up" and any(r.key == failing for r in errored)
    assert result.agreement.errors == len(errored) and result.agreement.compared == len(result.rows) - len(errored)
    assert result.agreement.kappa == 1.0
    assert "judge errors " + str(len(errored)) in render_rejudge_markdown(result)


def test_cases_must_come_from_the_bundles_pack(cli, bundle, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(EXAMPLE_PACK, pack)
    same = cli("rejudge", str(bundle), "--judge", "rule", "--pack", str(pack), "--json")
    assert same.returncode == 0, same.stderr
    case = next(iter(sorted((pack / "cases").glob("*.yaml"))))
    case.write_text(case.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    tampered = cli("rejudge", str(bundle), "--judge", "rule", "--pack", str(pack))
    assert tampered.returncode == 1 and "does not match" in tampered.stderr
    manifest = pack / "pack.yaml"
    manifest.write_text(
        manifest.read_text(encoding="utf-8").replace("version: 0.1.0", "version: 9.9.9"), encoding="utf-8"
    )
    other = cli("rejudge", str(bundle), "--judge", "rule", "--pack", str(pack))
    assert other.returncode == 2 and "9.9.9" in other.stderr and "not the bundle's" in other.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("--judge", "nosuch"), "judge 'nosuch' is not a registered plugin"),
        (("--judge", "rule:x=1"), "the rule judge takes no options"),
        (("--judge", "rule", "--stage", "exec"), "Invalid value for '--stage'"),
        (("--judge", "llm"), "the llm judge needs backend=NAME"),
    ],
)
def test_usage_errors_exit_2_with_one_line(cli, bundle, args, message):
    result = cli("rejudge", str(bundle), *args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_rejudge_is_in_the_command_list(cli):
    result = cli("--help")
    assert "rejudge" in result.stdout


def test_the_command_offers_the_stages_rejudge_can_relabel():
    from assay.designs.staged import rejudge, rejudge_cmd

    assert rejudge_cmd.STAGES == rejudge.STAGES
