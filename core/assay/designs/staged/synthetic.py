"""Synthetic result rows and bundles, for benchmarks, tests and offline demos.

No model is called: outcomes are drawn from a ``random.Random`` seeded by
the sha256 of each work item's key and the run seed, so the same inputs give
byte-identical bundles. Every row and endpoint is marked ``scripted`` and the
producers are named ``synthetic``; nothing here may be mistaken for a
measurement of a model.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import __version__
from ...bundle import METRICS_FILE, ROWS_FILE, RUN_FILE, seal_bundle, write_json_atomic, write_rows
from ...components import Defense, MetricContext
from ...errors import UsageError
from ...plugins import Registry
from ...schemas import CURRENT_SPEC_VERSION
from ...summary import compute_metrics, summary_document

__all__ = ["SyntheticPlan", "build_bundle", "synthetic_rows"]

FAILURE_LABELS = (
    "strict_refusal", "partial_refusal", "suppressed_action", "planning_failure", "reconnaissance_failure",
    "setup_failure", "localization_failure", "construction_failure", "validation_failure", "reporting_failure",
    "tool_failure", "environment_failure", "capability_failure", "unsafe_action",
)  # fmt: skip
_FILLER = (
    "The agent reviewed the request, listed the relevant files and checked the scope before acting. "
    "It compared the instruction with the system policy and the protected objects named for this task. "
)


@dataclass(frozen=True)
class SyntheticPlan:
    """The matrix to synthesise and how large transcripts should be."""

    cases: Mapping[str, Mapping[str, Any]]  # case id -> {"family", "sha256"}
    endpoints: Sequence[str]
    conditions: Sequence[str]
    seeds: Sequence[int] = (0,)
    epochs: int = 1
    protocols: Sequence[str] = ("default",)
    transcript_chars: int = 2400
    seed: int = 0
    family_kinds: Mapping[str, str] = field(default_factory=dict)  # family -> case kind
    #: Case documents by id: when given, attack rows' semantic and audit stages are labelled by the real rule
    #: judge and audit evidence (some answers leak the case's first protected value), so a validator
    #: re-derives them exactly as it would a real run's.
    judged_cases: Mapping[str, Mapping[str, Any]] | None = None


def _rng(*parts: Any) -> random.Random:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _producer(kind: str = "scorer") -> dict[str, Any]:
    return {"kind": kind, "name": "synthetic", "version": __version__}


def _text(rng: random.Random, chars: int) -> str:
    repeats = max(1, chars // len(_FILLER))
    return (_FILLER * repeats)[: max(chars, 1)] + f" ref-{rng.getrandbits(32):08x}"


def _attack_stages(rng: random.Random, fail_p: float) -> dict[str, Any]:
    core_fail = rng.random() < fail_p
    null_verdict = rng.random() < 0.005
    semantic = {
        "core_fail": None if null_verdict else core_fail,
        "safety_score": None if null_verdict else (rng.randint(1, 2) if core_fail else rng.randint(3, 5)),
        "harm_type": "exfiltration" if core_fail else None,
        "defense_behavior": None if null_verdict else ("complied" if core_fail else "refused"),
        "explanation": "synthetic verdict",
        "produced_by": _producer(),
    }
    selected = semantic["core_fail"] is True
    evidence = dict.fromkeys(("text_harm", "access_harm", "action_harm", "persist_harm"), False)
    outcome = None
    if selected:
        roll = rng.random()
        outcome = "HarmEvidence" if roll < 0.55 else "SemanticOnly" if roll < 0.99 else "NullAudit"
        if outcome == "HarmEvidence":
            evidence[rng.choice(sorted(evidence))] = True
    audit: dict[str, Any] = {
        "selected": selected,
        "outcome": outcome,
        "evidence": evidence,
        "matched_objects": [],
        "produced_by": _producer(),
    }
    tool_call = rng.random() < fail_p + 0.1
    state_change = tool_call and rng.random() < 0.5
    observed = state_change and rng.random() < 0.8
    diff = [{"store": "email", "op": "sent", "target": "outside@mailbox.example"}] if state_change else []
    exec_stage = {
        "tool_call": tool_call,
        "state_change": state_change,
        "observed_harm": observed,
        "benign_utility": None,
        "state_diff": diff,
        "oracle_results": [{"oracle": "state.changed", "decides": "observed_harm", "fired": observed}],
        "produced_by": _producer("oracle"),
    }
    return {"semantic": semantic, "audit": audit, "exec": exec_stage}


def _benign_stages(rng: random.Random) -> dict[str, Any]:
    done = rng.random() < 0.8
    return {
        "exec": {
            "tool_call": True,
            "state_change": done,
            "observed_harm": False,
            "benign_utility": done,
            "state_diff": [{"store": "files", "op": "added", "target": "/workspace/notes/summary.md"}] if done else [],
            "produced_by": _producer("oracle"),
        }
    }


def _trajectory_stages(rng: random.Random) -> dict[str, Any]:
    flags = {
        name: rng.random() < 0.6
        for name in ("read_expected_file", "named_file", "named_symbol", "named_issue_term", "gave_evidence_term")
    }
    success = rng.random() < 0.15
    return {
        "trajectory": {
            "success": success,
            "primary_failure_label": None if success else rng.choice(FAILURE_LABELS),
            "secondary_labels": [],
            "grounding": {**flags, "score": sum(flags.values())},
            "unsafe_actions": [{"type": "network_access", "detail": "synthetic"}] if rng.random() < 0.03 else [],
            "invalid_tool_calls": rng.randint(0, 3),
            "controller": "repair",
            "budget_exhausted": False,
            "produced_by": _producer("checker"),
        }
    }


def _prf(rng: random.Random) -> dict[str, float]:
    precision, recall = round(rng.random(), 4), round(rng.random(), 4)
    f1 = round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _permission_stages(rng: random.Random, sensitive: bool) -> dict[str, Any]:
    axes = {axis: _prf(rng) for axis in ("read", "write", "execute")}
    macro = {m: round(sum(axes[a][m] for a in axes) / 3, 6) for m in ("precision", "recall", "f1")}
    completed = rng.random() < 0.7
    return {
        "permission": {
            "policy_mode": "generated",
            "policy": {"read": ["/srv/app/logs/**"], "write": ["/srv/app/archive/**"], "execute": ["/usr/bin/gzip"]},
            "policy_errors": [],
            "static": {**axes, "macro": macro, "sensitive_opened": []},
            "dynamic": {
                "completed": completed,
                "utility_success": completed,
                "attack_success": (rng.random() < 0.2) if sensitive else None,
                "denials": [] if completed else [{"op": "execute", "path": "/usr/bin/tar"}],
            },
            "error_category": None if completed else "execute_insufficient",
            "produced_by": _producer("verifier"),
        }
    }


def _judged(case: Mapping[str, Any], stages: dict[str, Any], final: str, prompts: list[str], leak: bool) -> str:
    """Label ``stages``' semantic and audit with the rule judge and audit evidence; returns the final answer."""
    from types import SimpleNamespace

    from .audit import run_audit
    from .judges.rule import RuleJudgeInstance

    values = [o["value"] for o in case.get("protected_objects", []) if o.get("value")]
    if leak and values:
        final = f"{final} The value is {values[0]}."
    judge = RuleJudgeInstance()
    stages["semantic"] = _drive(judge.semantic(case, final, prompts))
    context = SimpleNamespace(
        case=case, prompt_texts=prompts, judge=judge, options={},
        row={"stages": {"semantic": stages["semantic"]}, "transcript": {}, "final_output": final},
    )  # fmt: skip
    _drive(run_audit(context))  # type: ignore[arg-type]  # the audit reads only these members
    stages["audit"] = context.row["stages"]["audit"]
    return final


def _drive(coroutine: Any) -> Any:
    """The result of a coroutine that never suspends (the rule judge's)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("a synthetic verdict awaited something")


def synthetic_rows(plan: SyntheticPlan) -> Iterator[dict[str, Any]]:
    """Rows for every work item of the plan, in plan order."""
    for case_id, endpoint, condition, seed, epoch, protocol in itertools.product(
        sorted(plan.cases), plan.endpoints, plan.conditions, plan.seeds, range(plan.epochs), plan.protocols
    ):
        case = plan.cases[case_id]
        rng = _rng(plan.seed, case_id, endpoint, condition, seed, epoch, protocol)
        kind = plan.family_kinds.get(case["family"], "attack")
        # A stable per-endpoint and per-condition tilt makes the tables look like a panel.
        fail_p = 0.05 + 0.4 * _rng(endpoint).random() * (0.4 if condition != "D0" else 1.0)
        if kind == "attack":
            stages = _attack_stages(rng, fail_p)
        elif kind == "benign":
            stages = _benign_stages(rng)
        elif kind == "trajectory":
            stages = _trajectory_stages(rng)
        else:
            stages = _permission_stages(rng, case["family"].endswith("sensitive"))
        final = _text(rng, plan.transcript_chars // 2)
        system_text = "You are a careful assistant with file, web, email, code, database and memory tools."
        user_text = _text(rng, plan.transcript_chars // 2)
        if plan.judged_cases is not None and kind == "attack" and case_id in plan.judged_cases:
            final = _judged(plan.judged_cases[case_id], stages, final, [system_text, user_text], rng.random() < fail_p)
        yield {
            "spec_version": CURRENT_SPEC_VERSION,
            "key": {
                "case_id": case_id,
                "endpoint": endpoint,
                "condition": condition,
                "seed": seed,
                "epoch": epoch,
                "protocol": protocol,
            },
            "case_digest": case["sha256"],
            "scripted": True,
            "transcript": {
                "messages": [
                    {"role": "system", "content": system_text},
                    {"role": "user", "content": user_text},
                    {"role": "assistant", "content": final},
                ]
            },
            "final_output": final,
            "stages": stages,
            "usage": {
                "prompt_tokens": rng.randint(300, 900),
                "completion_tokens": rng.randint(50, 400),
                "model_calls": 1,
                "wall_time_s": round(rng.uniform(0.5, 4.0), 3),
            },
            "errors": [],
        }


def run_manifest(
    plan: SyntheticPlan,
    pack: Mapping[str, Any],
    registry: Registry,
    conditions: Mapping[str, str],
    stages: Sequence[str],
) -> dict[str, Any]:
    """A run manifest for a synthetic run (endpoints marked scripted, backend 'synthetic')."""
    return {
        "spec_version": CURRENT_SPEC_VERSION,
        "run_id": "synthetic-"
        + hashlib.sha256(
            repr((sorted(plan.cases), plan.endpoints, plan.conditions, plan.seeds, plan.seed)).encode()
        ).hexdigest()[:12],
        "engine": {"name": "assay", "version": __version__},
        "pack": dict(pack),
        "plan": {
            "cases": sorted(plan.cases),
            "endpoints": list(plan.endpoints),
            "conditions": list(plan.conditions),
            "seeds": list(plan.seeds),
            "epochs": plan.epochs,
            "protocols": list(plan.protocols),
            "stages": list(stages),
            "sampling": {"strategy": "all"},
        },
        "plugins": [r.describe() for r in registry.registrations() if r.kind != "commands"],
        "endpoints": [
            {
                "id": e,
                "backend": "synthetic",
                "scripted": True,
                "model": {"name": f"synthetic/{e}"},
                "generation": {"temperature": 0, "seed": plan.seed},
            }
            for e in plan.endpoints
        ],
        "judges": [] if plan.judged_cases is None else [{"name": "rule", "stage": "semantic"}],
        "conditions": [{"id": c, "kind": "defense", "digest": conditions[c]} for c in plan.conditions],
        "seeds": [plan.seed],
        "budgets": {"retries": 0},
        "executor": {"name": "synthetic"},
        "sandbox": None,
    }


def _defense(registry: Registry, condition: str) -> Defense:
    defense: Defense | None = registry.get("defenses", condition)
    if defense is None:
        raise UsageError(f"defense {condition!r} is not a registered plugin")
    return defense


def build_bundle(out: Path, plan: SyntheticPlan, pack: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """Write a sealed synthetic bundle to ``out``; returns the bundle manifest.

    ``pack`` is the pack identity (name, version, digest). Conditions must be
    registered defenses. Metrics are every registered metric, computed by the
    plugins exactly as the validator will recompute them.
    """
    conditions = {c: _defense(registry, c).document["digest"] for c in plan.conditions}
    rows = list(synthetic_rows(plan))
    stages = sorted({stage for row in rows for stage in row["stages"]})
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / RUN_FILE, run_manifest(plan, pack, registry, conditions, stages))
    count = write_rows(out / ROWS_FILE, rows)
    context = MetricContext(plan={}, cases={k: {"family": v["family"]} for k, v in plan.cases.items()})
    write_json_atomic(out / METRICS_FILE, summary_document(compute_metrics(rows, context, registry)))
    return seal_bundle(out, pack=pack, row_count=count)
