"""A bundle as Inspect AI evaluation logs: one log per endpoint and condition, one sample per work item.

Inspect's words map onto assay's as the README's table says: a *task* is the pack under one condition, the
*model* is the endpoint, a *sample* is a work item (a case at one seed and epoch), its *messages* are the
row's transcript (each stage's own agent loop after it), its *output* is the final answer, and each of its
*scores* is one registered outcome of the row (1 or 0). The log's results are the outcomes' means over the
samples, which are the metric plugins' rates over the same rows. Everything assay knows that Inspect has no
field for (the stages' outcomes, state diffs, oracle verdicts, the pack's digest) is in ``metadata``.

The logs are JSON (Inspect's ``.json`` format, log version 2): ``inspect_ai.log.read_eval_log`` loads them and
``inspect view --log-dir DIR`` browses them. assay does not import Inspect to write them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import __version__
from ..reports._load import ReportData

__all__ = ["inspect_logs"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _id(*parts: Any) -> str:
    """A stable 22-character id (Inspect's ids are that long) from the parts."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:22]


def _time(text: Any) -> str:
    """An RFC 3339 time as Inspect writes it (``+00:00``); the Unix epoch when the bundle recorded none."""
    value = str(text) if text else "1970-01-01T00:00:00Z"
    return value[:-1] + "+00:00" if value.endswith("Z") else value


def _content(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _tool_call(call: Mapping[str, Any], number: int) -> dict[str, Any]:
    arguments = call.get("arguments")
    if not isinstance(arguments, Mapping):  # an unparseable call: its raw text, kept
        arguments = {"raw": _content(arguments)}
    return {
        "id": str(call.get("id") or f"call-{number}"),
        "function": str(call.get("name") or ""),
        "arguments": dict(arguments),
        "type": "function",
    }


def _message(message: Mapping[str, Any], number: int) -> dict[str, Any] | None:
    role = message.get("role")
    content = _content(message.get("content"))
    if role in ("system", "user"):
        return {"role": role, "content": content}
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": content, "source": "generate"}
        calls = [_tool_call(call, number * 100 + i) for i, call in enumerate(message.get("tool_calls") or [])]
        if calls:
            out["tool_calls"] = calls
        return out
    if role == "tool":
        return {
            "role": "tool",
            "content": content,
            "tool_call_id": str(message.get("tool_call_id") or ""),
            "function": str(message.get("name") or ""),
        }
    return None


def _messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's transcript, then each stage's own (the exec stage's agent loop, say), as Inspect messages."""
    sources = [(row.get("transcript") or {}).get("messages") or []]
    sources += [
        (outcome.get("transcript") or {}).get("messages") or []
        for outcome in (row.get("stages") or {}).values()
        if isinstance(outcome, Mapping)
    ]
    converted = [_message(m, n) for source in sources for n, m in enumerate(source) if isinstance(m, Mapping)]
    return [m for m in converted if m is not None]


def _stages(row: Mapping[str, Any]) -> dict[str, Any]:
    """Each stage's outcome without its transcript (the messages carry that)."""
    return {
        stage: {name: value for name, value in outcome.items() if name != "transcript"}
        for stage, outcome in (row.get("stages") or {}).items()
        if isinstance(outcome, Mapping)
    }


def _input(row: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    for message in (row.get("transcript") or {}).get("messages") or []:
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _content(message.get("content"))
    return str(case.get("instruction") or case.get("title") or row["key"]["case_id"])


def _usage(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    prompt = sum(int((row.get("usage") or {}).get("prompt_tokens") or 0) for row in rows)
    completion = sum(int((row.get("usage") or {}).get("completion_tokens") or 0) for row in rows)
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion}


def _sample(row: Mapping[str, Any], data: ReportData, model: str, seeds: int) -> dict[str, Any]:
    key = row["key"]
    case = data.cases.get(key["case_id"], {})
    scores: dict[str, dict[str, Any]] = {}
    for name, outcome in sorted(data.outcomes.items()):
        if not data.applies(outcome, row):  # an attack outcome is not scored on a benign companion
            continue
        value = outcome.of(row)
        if isinstance(value, bool):
            scores[name] = {"value": int(value), "answer": "yes" if value else "no"}
        elif isinstance(value, int | float):
            scores[name] = {"value": value}
    final = _content(row.get("final_output"))
    sample: dict[str, Any] = {
        "id": key["case_id"] if seeds == 1 else f"{key['case_id']}@seed{key['seed']}",
        "epoch": int(key.get("epoch", 0)) + 1,
        "input": _input(row, case),
        "target": str(case.get("success_predicate") or case.get("safe_behavior") or ""),
        "messages": _messages(row),
        "output": {
            "model": model,
            "choices": [
                {"message": {"role": "assistant", "content": final, "source": "generate"}, "stop_reason": "stop"}
            ],
            "completion": final,
        },
        "scores": scores,
        "metadata": {
            "assay_key": dict(key),
            "family": case.get("family", "unknown"),
            "scripted": bool(row.get("scripted")),
            "stages": _stages(row),
            "errors": list(row.get("errors") or []),
        },
        "model_usage": {model: _usage([row])},
        "uuid": _id("sample", data.bundle.run.get("run_id"), key),
    }
    if row.get("errors"):
        message = "; ".join(str(e.get("message", "")) for e in row["errors"])
        sample["error"] = {"message": message, "traceback": "", "traceback_ansi": ""}
    return sample


def inspect_logs(data: ReportData) -> list[tuple[str, dict[str, Any]]]:
    """(file name, log document) per endpoint and condition, in plan order."""
    run = data.bundle.run
    plan = run.get("plan", {})
    pack = data.bundle.pack
    endpoints = {e.get("id"): e for e in run.get("endpoints", [])}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in data.bundle.rows:
        groups.setdefault((row["key"]["endpoint"], row["key"]["condition"]), []).append(row)
    seeds = len(plan.get("seeds", [0]) or [0])
    logs = []
    for (endpoint, condition), rows in groups.items():
        model = f"assay/{endpoint}"
        described = endpoints.get(endpoint, {})
        task = f"{pack.get('name')}-{condition}"
        eval_id = _id("eval", run.get("run_id"), endpoint, condition)
        samples = [_sample(row, data, model, seeds) for row in rows]
        results = []
        for name in sorted({score for sample in samples for score in sample["scores"]}):
            values = [s["scores"][name]["value"] for s in samples if name in s["scores"]]
            mean = sum(values) / len(values)
            metrics = {"mean": {"name": "mean", "value": mean, "params": {}}}
            unscored = len(samples) - len(values)
            results.append(
                {"name": name, "scorer": name, "scored_samples": len(values), "unscored_samples": unscored,
                 "params": {}, "metrics": metrics}
            )  # fmt: skip
        errors = sum(1 for row in rows if row.get("errors"))
        log = {
            "version": 2,
            "status": "success",
            "eval": {
                "eval_id": eval_id,
                "run_id": str(run.get("run_id")),
                "created": _time(run.get("started_at")),
                "task": task,
                "task_id": _id("task", pack.get("name"), pack.get("version"), condition),
                "task_version": 0,
                "task_attribs": {},
                "task_args": {},
                "dataset": {
                    "name": str(pack.get("name")),
                    "location": f"assay pack {pack.get('name')} {pack.get('version')} ({pack.get('digest')})",
                    "samples": len(samples),
                    "sample_ids": [s["id"] for s in samples],
                    "shuffled": False,
                },
                "model": model,
                **({"model_base_url": described["base_url"]} if described.get("base_url") else {}),
                "config": {"epochs": int(plan.get("epochs", 1))},
                "packages": {"assay": str(run.get("engine", {}).get("version", __version__))},
                "metadata": {
                    "assay": {
                        "pack": dict(pack),
                        "endpoint": described,
                        "condition": condition,
                        "stages": list(plan.get("stages", [])),
                        "bundle_run_id": run.get("run_id"),
                    }
                },
            },
            "plan": {"name": "assay", "steps": [{"solver": stage, "params": {}} for stage in plan.get("stages", [])]},
            "results": {
                "total_samples": len(samples),
                "completed_samples": len(samples) - errors,
                "scores": results,
            },
            "stats": {
                "started_at": _time(run.get("started_at")),
                "completed_at": _time(run.get("finished_at")),
                "model_usage": {model: _usage(rows)},
            },
            "samples": samples,
        }
        stamp = _time(run.get("started_at")).replace(":", "-")
        logs.append((f"{stamp}_{_UNSAFE.sub('-', task)}_{eval_id}.json", log))
    return logs
