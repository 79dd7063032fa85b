"""Calibrating a judge on hand-labelled responses: how often it agrees with people who read the definitions.

A staged pack may ship a calibration set in ``calibration/`` beside its cases:
one YAML file per case, each listing responses a model could give (by style:
complies, refuses, recites the prompt, emits a tool call as JSON, ...), each
labelled by hand against the seed's CoreFail and audit definitions (see
``docs/judges.md``). Every file says which half it belongs to: ``tuning`` (a
judge's patterns or weights may be fitted on it) or ``heldout`` (nothing is
fitted on it; it measures).

:func:`calibrate` asks a judge for the semantic verdict of every response, as
the semantic stage would (the case's prompt under the D0 condition, native tool
calls written out as the stage writes them), and computes the audit's
deterministic evidence for every response labelled CoreFail. It reports
accuracy, Cohen's kappa and the confusion, overall, per half and per style.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...documents import DocumentError, load_document
from ...errors import SpecError
from ...stats import cohen_kappa
from .audit import AUDIT_VERSION, audit_evidence
from .judges._reading import READING_VERSION, read_response
from .prompts import semantic_messages
from .semantic import call_text

__all__ = [
    "AUDIT_CLASSES",
    "CalibrationItem",
    "CalibrationResult",
    "Scores",
    "calibrate",
    "calibration_digest",
    "fit_weights",
    "load_calibration",
    "measure_pack",
    "measurement_record",
    "write_measured",
]

#: The audit's evidence classes as the hand labels name them, and the flag each is in a row.
AUDIT_CLASSES = {
    "TextHarm": "text_harm",
    "AccessHarm": "access_harm",
    "ActionHarm": "action_harm",
    "PersistHarm": "persist_harm",
}
HALVES = ("tuning", "heldout")
_MAX_RESPONSES = 100_000


@dataclass(frozen=True)
class CalibrationItem:
    """One hand-labelled response to one case."""

    case_id: str
    half: str
    id: str
    style: str
    content: str
    tool_calls: tuple[dict[str, Any], ...]
    core_fail: bool
    audit: frozenset[str]

    def final_output(self) -> str:
        """The response as the semantic stage writes it: the text, then its native tool calls."""
        text = self.content
        if self.tool_calls:
            text = f"{text}\n[tool calls] {'; '.join(call_text(c) for c in self.tool_calls)}".strip()
        return text


def calibration_digest(folder: Path) -> str:
    """``sha256:<hex>`` over the calibration files (name and content), as reports name the set."""
    lines = []
    for path in sorted(folder.glob("*.yaml")):
        lines.append(f"{path.name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}")
    return "sha256:" + hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


def load_calibration(folder: Path) -> list[CalibrationItem]:
    """Every labelled response in ``folder`` (``*.yaml``), in file then response order.

    Raises :class:`SpecError` naming the file and the response for anything
    malformed.
    """
    if not folder.is_dir():
        raise SpecError(f"{folder}: no calibration set here (a folder of <case id>.yaml files)")
    items: list[CalibrationItem] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            data = load_document(path).data
        except (DocumentError, OSError) as exc:
            raise SpecError(f"{path}: {exc}") from None
        items += _items_of(path, data)
        if len(items) > _MAX_RESPONSES:
            raise SpecError(f"{folder}: more than {_MAX_RESPONSES} responses")
    if not items:
        raise SpecError(f"{folder}: the calibration set holds no responses")
    return items


def _items_of(path: Path, data: Any) -> list[CalibrationItem]:
    if not isinstance(data, dict) or not isinstance(data.get("case"), str) or data.get("half") not in HALVES:
        raise SpecError(f"{path}: a calibration file is a mapping with case, half (tuning or heldout), responses")
    responses = data.get("responses")
    if not isinstance(responses, list):
        raise SpecError(f"{path}: /responses: a list of labelled responses")
    items = []
    for index, response in enumerate(responses):
        where = f"{path}: /responses/{index}"
        if not isinstance(response, dict):
            raise SpecError(f"{where}: a mapping")
        audit = response.get("audit", [])
        calls = response.get("tool_calls", [])
        if (
            not isinstance(response.get("content"), str)
            or not isinstance(response.get("core_fail"), bool)
            or not isinstance(audit, list)
            or any(label not in AUDIT_CLASSES for label in audit)
            or not isinstance(calls, list)
            or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls)
        ):
            raise SpecError(
                f"{where}: needs content (text), core_fail (true/false), audit (a list of "
                f"{', '.join(AUDIT_CLASSES)}) and, optionally, tool_calls (name, arguments)"
            )
        if audit and not response["core_fail"]:
            raise SpecError(f"{where}: audit evidence on a response not labelled CoreFail (the audit is core-gated)")
        items.append(
            CalibrationItem(
                case_id=data["case"],
                half=data["half"],
                id=str(response.get("id", f"{data['case']}-{index}")),
                style=str(response.get("style", "unstyled")),
                content=response["content"],
                tool_calls=tuple({"name": c["name"], "arguments": c.get("arguments", {})} for c in calls),
                core_fail=response["core_fail"],
                audit=frozenset(audit),
            )
        )
    return items


@dataclass
class Scores:
    """Agreement of a judge with the hand labels over some responses."""

    n: int
    accuracy: float | None
    kappa: float | None
    #: (hand label, judge label) -> count
    confusion: dict[tuple[str, str], int]

    def to_json(self) -> dict[str, Any]:
        """JSON form (the confusion as ``hand->judge`` keys)."""
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "kappa": self.kappa,
            "confusion": {f"{a}->{b}": c for (a, b), c in sorted(self.confusion.items())},
        }


def scores(pairs: Sequence[tuple[str, str]]) -> Scores:
    """Accuracy, Cohen's kappa and the confusion of (hand, judge) label pairs."""
    if not pairs:
        return Scores(0, None, None, {})
    hand, judged = [a for a, _ in pairs], [b for _, b in pairs]
    agree = sum(a == b for a, b in pairs)
    # Kappa says how far agreement beats chance; over responses the hand labels put in one class it says
    # nothing (it is 0 however right the judge is), so it is left out there.
    kappa = cohen_kappa(hand, judged) if len(set(hand)) > 1 else None
    return Scores(len(pairs), agree / len(pairs), kappa, dict(Counter(pairs)))


@dataclass
class CalibrationResult:
    """What :func:`calibrate` measured: the semantic verdict and the audit class, overall, by half and by style."""

    judge: dict[str, Any]
    digest: str
    semantic: dict[str, Scores] = field(default_factory=dict)
    audit: dict[str, Scores] = field(default_factory=dict)
    #: Per evidence class (TextHarm, ...): its agreement on the hand-CoreFail responses.
    evidence: dict[str, Scores] = field(default_factory=dict)
    #: The responses the judge got wrong: (id, style, hand, judge)
    misses: list[tuple[str, str, str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "judge": self.judge,
            "calibration_set": self.digest,
            "semantic": {k: v.to_json() for k, v in self.semantic.items()},
            "audit": {k: v.to_json() for k, v in self.audit.items()},
            "evidence": {k: v.to_json() for k, v in self.evidence.items()},
            "misses": [list(m) for m in self.misses],
        }


def audit_class(flags: Iterable[str]) -> str:
    """One label for a set of evidence classes: ``HarmEvidence`` when there is any, else ``SemanticOnly``.

    The audit's outcome is HarmEvidence exactly when some evidence flag is set; which flags are set is measured
    apart, per class.
    """
    return "HarmEvidence" if any(True for _ in flags) else "SemanticOnly"


def _label(core_fail: bool | None) -> str:
    return {True: "CoreFail", False: "pass", None: "null"}[core_fail]


def calibrate(
    items: Sequence[CalibrationItem],
    cases: Mapping[str, Mapping[str, Any]],
    judge: Any,
    condition: Mapping[str, Any],
    digest: str,
    audit_version: str = AUDIT_VERSION,
) -> CalibrationResult:
    """Judge every response in ``items`` and compare with its hand labels.

    ``cases`` gives each item's case; ``judge`` is a judge instance with the
    ``semantic`` role; ``condition`` the defense policy the prompts are built
    under (D0: no defense); ``audit_version`` the audit evidence measured.
    """
    describe = getattr(judge, "describe", None)
    result = CalibrationResult(describe("semantic") if callable(describe) else {}, digest)
    semantic_pairs: dict[str, list[tuple[str, str]]] = {}
    audit_pairs: dict[str, list[tuple[str, str]]] = {}
    evidence_pairs: dict[str, list[tuple[str, str]]] = {name: [] for name in AUDIT_CLASSES}

    async def judge_all() -> list[dict[str, Any]]:
        verdicts = []
        for item in items:
            case = cases[item.case_id]
            prompts = [str(m.get("content") or "") for m in semantic_messages(case, condition)]
            verdicts.append(await judge.semantic(case, item.final_output(), prompts))
        return verdicts

    verdicts = asyncio.run(judge_all())
    for item, verdict in zip(items, verdicts, strict=True):
        case = cases[item.case_id]
        hand, judged = _label(item.core_fail), _label(verdict.get("core_fail"))
        for group in ("all", item.half, f"{item.half}/{item.style}"):
            semantic_pairs.setdefault(group, []).append((hand, judged))
        if hand != judged:
            result.misses.append((item.id, item.style, hand, judged))
        if not item.core_fail:
            continue
        prompts = [str(m.get("content") or "") for m in semantic_messages(case, condition)]
        flags, _ = audit_evidence(case, item.final_output(), list(item.tool_calls), prompts, audit_version)
        found = {name for name, flag in AUDIT_CLASSES.items() if flags[flag]}
        for group in ("all", item.half, f"{item.half}/{item.style}"):
            audit_pairs.setdefault(group, []).append((audit_class(item.audit), audit_class(found)))
        for name in AUDIT_CLASSES:
            evidence_pairs[name].append((str(name in item.audit), str(name in found)))
    result.semantic = {group: scores(pairs) for group, pairs in sorted(semantic_pairs.items())}
    result.audit = {group: scores(pairs) for group, pairs in sorted(audit_pairs.items())}
    result.evidence = {name: scores(pairs) for name, pairs in evidence_pairs.items()}
    return result


#: Fitting: L2 strength, step and steps of plain gradient descent (deterministic, no library solver's tolerances).
_L2, _STEP, _STEPS = 1.0, 0.5, 5000


def fit_weights(
    items: Sequence[CalibrationItem], cases: Mapping[str, Mapping[str, Any]], condition: Mapping[str, Any]
) -> dict[str, Any]:
    """The calibrated judge's weights, fitted on the *tuning* half of ``items`` (attack cases only: a benign
    case is never CoreFail).

    Logistic regression with an L2 penalty by full-batch gradient descent from
    zero, a fixed number of steps; weights are rounded to 4 decimals so that
    the file a machine writes is the file another writes.
    """
    import numpy as np

    chosen = [i for i in items if i.half == "tuning" and cases[i.case_id].get("kind") != "benign"]
    if not chosen:
        raise SpecError("the calibration set has no tuning responses to attack cases to fit on")
    readings = []
    for item in chosen:
        case = cases[item.case_id]
        prompts = [str(m.get("content") or "") for m in semantic_messages(case, condition)]
        readings.append(read_response(case, item.final_output(), prompts).features())
    names = list(readings[0])
    x = np.array([[features[name] for name in names] for features in readings], dtype=np.float64)
    y = np.array([item.core_fail for item in chosen], dtype=np.float64)
    w, b = np.zeros(len(names)), 0.0
    for _ in range(_STEPS):
        p = 1.0 / (1.0 + np.exp(-(x @ w + b)))
        w -= _STEP * (x.T @ (p - y) / len(y) + w / (_L2 * len(y)))
        b -= _STEP * float((p - y).mean())
    return {
        "reading": READING_VERSION,
        "fitted_on": {"responses": len(chosen), "half": "tuning"},
        "bias": round(b, 4),
        "weights": {name: round(float(value), 4) for name, value in zip(names, w, strict=True)},
    }


def measurement_record(
    pack: Any, folder: Path, measured: Sequence[tuple[str, str, CalibrationResult]], host: Any
) -> dict[str, Any]:
    """``calibration.json``'s content: per ``"<name> <version>"`` of each judge (and audit evidence version)
    measured, its lines (set, half, n, accuracy, kappa, rounded to 3 decimals)."""
    set_label = f"{pack.name} {pack.version} {calibration_digest(folder)}"
    lines: dict[str, list[dict[str, Any]]] = {}
    for label, part, result in measured:
        table = result.semantic if part == "semantic" else result.audit
        if part == "semantic":
            judge = host.registry.get("judges", label)
            key = f"{label} {judge.version}"
        else:
            key = f"audit-evidence {label}"
        for half in HALVES:
            scores = table.get(half)
            if scores is not None:
                lines.setdefault(key, []).append(
                    {
                        "set": set_label,
                        "half": half,
                        "n": scores.n,
                        "accuracy": None if scores.accuracy is None else round(scores.accuracy, 3),
                        "kappa": None if scores.kappa is None else round(scores.kappa, 3),
                    }
                )
    return {"measured": lines}


def measure_pack(pack: Any, host: Any, judges: Sequence[str]) -> list[tuple[str, str, CalibrationResult]]:
    """Each judge's semantic agreement, and each audit evidence version's, on ``pack``'s calibration set."""
    from .audit import AUDIT_VERSIONS
    from .rejudge import build_judge

    folder = Path(pack.root) / "calibration"
    items = load_calibration(folder)
    cases = pack.cases()
    condition = dict(host.registry.get("defenses", "D0").document)
    digest = calibration_digest(folder)
    measured = [
        (spec, "semantic", calibrate(items, cases, build_judge(spec, host.registry), condition, digest))
        for spec in judges
    ]
    judge = build_judge(judges[0], host.registry)
    measured += [
        (version, "audit", calibrate(items, cases, judge, condition, digest, version)) for version in AUDIT_VERSIONS
    ]
    return measured


def write_measured(record: Mapping[str, Any]) -> Path:
    """Write ``calibration.json`` beside the judges (atomically); returns its path."""
    from ...bundle import write_json_atomic
    from .judges import _measured

    path = Path(_measured.__file__).with_name(_measured.MEASURED_FILE)
    write_json_atomic(path, dict(record))
    return path
