"""Blind review of trajectories: export packets without the answers, import reviewers' labels, measure agreement.

A packet shows a reviewer the task and the redacted trajectory, and nothing
that gives the answer away: no condition or endpoint, no original label, no
deterministic grounding, no checker reason. Packets are named by an HMAC of
the row key under a secret drawn for the export; the key that maps them back
to rows, with that secret, stays with the maintainer.
Import compares each reviewer with the original labels (and reviewers with
each other): agreement and Cohen's kappa on success, refusal and the primary
label; exact-bin agreement, within-one agreement and Spearman on grounding.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import re
import secrets
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...bundle import write_json_atomic
from ...errors import UsageError
from ...stats import cohen_kappa, percent_agreement, spearman

__all__ = ["REFUSALS", "agreement_report", "export_packets", "import_labels"]

REFUSALS = frozenset({"strict_refusal", "partial_refusal", "suppressed_action"})


def _packet_id(key: Mapping[str, Any], secret: str) -> str:
    """A packet's id: an HMAC of the row key under the export's secret. A reviewer knows the packet's task and the
    run's endpoints and conditions, so an unkeyed hash of the key would give each packet's condition away."""
    digest = hmac.new(bytes.fromhex(secret), json.dumps(key, sort_keys=True).encode(), hashlib.sha256)
    return "p-" + digest.hexdigest()[:16]


#: A hash-only condition's marker in a recorded transcript (see ``assay.policies.withheld_marker``).
_WITHHELD = re.compile(r"\[[^\[\]\n]{1,80} template withheld: sha256 [0-9a-f]*\]")


def _blind(content: Any, condition_text: str) -> Any:
    """A message's content without what gives the condition away: its framing text wherever the condition put it
    (the system turn, or before or after the task in the user turn) and a hash-only condition's marker."""
    if not isinstance(content, str):
        return content
    if condition_text:
        content = content.replace(condition_text, "")
    content = _WITHHELD.sub("", content)
    return re.sub(r"\n{3,}", "\n\n", content).strip()


def export_packets(
    rows: Sequence[Mapping[str, Any]],
    out: Path,
    *,
    sample: int | None = None,
    seed: int = 0,
    condition_texts: Mapping[str, str] | None = None,
) -> int:
    """Write one packet per trajectory row (or a seeded sample) plus key.json and a label template.

    ``condition_texts`` maps each condition to the text it adds to the prompt; packets carry no system turn and
    no condition text or marker in any other turn, so a reviewer cannot tell the condition. Returns the number
    of packets written.
    """
    texts = condition_texts or {}
    chosen = [row for row in rows if "trajectory" in row.get("stages", {})]
    if not chosen:
        raise UsageError("the bundle has no trajectory rows to review")
    rng = random.Random(seed)
    if sample is not None and sample < len(chosen):
        chosen = rng.sample(chosen, sample)
    rng.shuffle(chosen)  # packet order must not reveal the plan order (and so the condition)
    packets_dir = out / "packets"
    packets_dir.mkdir(parents=True, exist_ok=True)
    key, template = {}, []
    # The ids' key: drawn fresh for each export, kept in key.json (the maintainer's), never in a packet.
    secret = secrets.token_hex(32)
    for row in chosen:
        packet_id = _packet_id(row["key"], secret)
        framing = texts.get(str(row["key"]["condition"]), "")
        messages = [  # the system turn carries the condition; the user turn may frame the task with it too
            {**m, "content": _blind(m.get("content"), framing)}
            for m in row["transcript"]["messages"]
            if m.get("role") != "system"
        ]
        write_json_atomic(packets_dir / f"{packet_id}.json", {
            "packet_id": packet_id,
            "task": row["key"]["case_id"],
            "transcript": messages,
            "final_artifact": row.get("final_output"),
        })  # fmt: skip
        key[packet_id] = row["key"]
        template.append({"packet_id": packet_id, "success": None, "refusal": None, "label": None, "grounding": None})
    write_json_atomic(out / "key.json", {"seed": seed, "secret": secret, "packets": key})
    write_json_atomic(out / "labels.template.json", sorted(template, key=lambda t: t["packet_id"]))
    return len(chosen)


def import_labels(path: Path) -> dict[str, dict[str, Any]]:
    """A reviewer's labels by packet id; raises UsageError when malformed."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read the labels: {exc}") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and "packet_id" in e for e in entries):
        raise UsageError(f"{path}: labels are a list of {{packet_id, success, refusal, label, grounding}}")
    return {e["packet_id"]: e for e in entries}


def _pairs(a: Sequence[Any], b: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    kept = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    return [x for x, _ in kept], [y for _, y in kept]


def _agreement(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    x, y = _pairs(a, b)
    if not x:
        return {"n": 0, "agreement": None, "kappa": None}
    return {"n": len(x), "agreement": percent_agreement(x, y), "kappa": cohen_kappa(x, y)}


def _grounding(a: Sequence[Any], b: Sequence[Any]) -> dict[str, Any]:
    x, y = _pairs(a, b)
    if not x:
        return {"n": 0, "exact": None, "within_one": None, "spearman": None}
    rho = spearman(x, y) if len(x) >= 2 else None
    return {
        "n": len(x),
        "exact": sum(p == q for p, q in zip(x, y, strict=True)) / len(x),
        "within_one": sum(abs(p - q) <= 1 for p, q in zip(x, y, strict=True)) / len(x),
        "spearman": None if rho is None or rho != rho else rho,
    }


def _view(labels: Mapping[str, Mapping[str, Any]], ids: Sequence[str]) -> dict[str, list[Any]]:
    return {
        field: [labels.get(i, {}).get(field) for i in ids] for field in ("success", "refusal", "label", "grounding")
    }


def agreement_report(
    rows: Sequence[Mapping[str, Any]], key: Mapping[str, Any], reviewers: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """Agreement of each reviewer with the original labels, and between reviewers."""
    by_key = {json.dumps(row["key"], sort_keys=True): row for row in rows}
    ids = sorted(key["packets"])
    original: dict[str, dict[str, Any]] = {}
    for packet_id in ids:
        row = by_key.get(json.dumps(key["packets"][packet_id], sort_keys=True))
        if row is None:
            raise UsageError(f"packet {packet_id} names a row that is not in the bundle")
        trajectory = row["stages"]["trajectory"]
        label = trajectory["primary_failure_label"]
        original[packet_id] = {
            "success": trajectory["success"],
            "refusal": label in REFUSALS,
            "label": label or "success",
            "grounding": trajectory["grounding"]["score"],
        }
    truth = _view(original, ids)
    report: dict[str, Any] = {"packets": len(ids), "vs_original": {}, "between_reviewers": {}}
    views = {name: _view(labels, ids) for name, labels in reviewers.items()}
    for name, view in views.items():
        report["vs_original"][name] = {
            "success": _agreement(truth["success"], view["success"]),
            "refusal": _agreement(truth["refusal"], view["refusal"]),
            "label": _agreement(truth["label"], view["label"]),
            "grounding": _grounding(truth["grounding"], view["grounding"]),
        }
    # How often each reviewer (and the original) gives each label: two reviewers can agree on half the packets and
    # still count the failure kinds very differently (the seed's table 11).
    report["label_counts"] = {
        name: dict(sorted(Counter(label for label in view["label"] if label is not None).items()))
        for name, view in {"original": truth, **views}.items()
    }
    names = sorted(views)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = views[first], views[second]
            report["between_reviewers"][f"{first} vs {second}"] = {
                "success": _agreement(a["success"], b["success"]),
                "refusal": _agreement(a["refusal"], b["refusal"]),
                "label": _agreement(a["label"], b["label"]),
                "grounding": _grounding(a["grounding"], b["grounding"]),
            }
    return report
