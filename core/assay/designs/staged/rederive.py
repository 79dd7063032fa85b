"""Re-deriving the staged-endpoint design's stages' verdicts from what a row records (see :mod:`assay.rederive`).

* ``semantic``: the final output from the transcript's last assistant message
  (its text and tool calls), as the stage built it; then the verdict, by the
  judge that recorded it when that judge is deterministic (``deterministic =
  True``; the built-in ``rule`` judge is), from the case, the final output and
  the prompt texts.
* ``audit``: the outcome and its evidence flags from the case, the final
  output, the recorded tool calls and the semantic verdict; the fallback
  outcome of a row without evidence by the deterministic judge that recorded
  it (another judge's fallback answer is taken as recorded, its evidence
  still checked). An audit the engine's own stage did not produce (a
  synthetic bundle's) has nothing to redo.
* ``exec``: the oracle verdicts from the recorded tool calls, state diff and
  final answer.

Verdicts of judges that call a model cannot be re-derived; ``assay rejudge``
measures those by agreement.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from ...components import RowProblem
from ...judging import producer_difference
from ...rederive import NOTHING, NotDeterministic, Rederived, RederiveSetup, key_text, run_deterministic
from .audit import AUDIT_VERSIONS, run_audit
from .rejudge import prompt_texts

__all__ = ["AuditRederiver", "ExecRederiver", "SemanticRederiver"]

_MISMATCH = "verdict-mismatch"
#: Audit evidence versions whose rows are taken as recorded: no validator ever re-derived them.
_UNREDERIVED_AUDITS = frozenset({"audit-evidence-v1"})


def _problem(pointer: str, message: str) -> RowProblem:
    return RowProblem(pointer, message, _MISMATCH, kind="integrity")


def _prompts(row: Mapping[str, Any], shared: dict[str, Any]) -> list[str]:
    """The row's prompt texts, worked out once for its semantic and audit stages."""
    if "prompt_texts" not in shared:
        shared["prompt_texts"] = prompt_texts(row)
    texts: list[str] = shared["prompt_texts"]
    return texts


def _final_text(message: Mapping[str, Any]) -> str:
    """The semantic stage's final output from its assistant message (see ``engine.stages.semantic``)."""
    text = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if calls:
        rendered = "; ".join(
            f"{call.get('name')}("
            f"{call['arguments'] if isinstance(call.get('arguments'), str) else json.dumps(call.get('arguments'), sort_keys=True)})"  # noqa: E501
            for call in calls
        )
        text = f"{text}\n[tool calls] {rendered}".strip()
    return str(text)


class _RecordedFallback:
    """Stands in for a judge whose audit fallback cannot be re-derived: it answers what the row recorded."""

    def __init__(self, audit: Mapping[str, Any]) -> None:
        self._audit = audit

    async def audit_fallback(self, case: Mapping[str, Any], final_output: str | None) -> tuple[str, int]:
        return str(self._audit.get("outcome")), int(self._audit.get("fallback_attempts", 0))

    def producer(self) -> dict[str, Any]:
        return dict(self._audit.get("produced_by") or {})


def _first_difference(recorded: Mapping[str, Any], derived: Mapping[str, Any]) -> str | None:
    if recorded == derived:  # nearly always: one comparison in C
        return None
    for field in sorted(set(recorded) | set(derived)):
        if (
            field == "produced_by"
            and isinstance(recorded.get(field), Mapping)
            and isinstance(derived.get(field), Mapping)
        ):
            # A judge's identity is checked against the run manifest's judge on every row (judge-mismatch); here
            # only that it is the same judge: a row recorded before 1.4 names no prompt digest.
            if producer_difference(recorded[field], derived[field]) is not None:
                return field
            continue
        if recorded.get(field) != derived.get(field):
            return field
    return None


_EXEC_VERDICTS = ("tool_call", "state_change", "observed_harm", "benign_utility", "oracle_results")


class SemanticRederiver:
    """The final output, then the verdict of a deterministic judge."""

    def __init__(self, setup: RederiveSetup) -> None:
        self.judges = setup.judges

    def check(self, row: Mapping[str, Any], case: Mapping[str, Any] | None, shared: dict[str, Any]) -> Rederived:
        """Re-derive one row's semantic stage."""
        semantic = row["stages"]["semantic"]
        messages = row.get("transcript", {}).get("messages", [])
        assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
        if assistant is not None and _final_text(assistant) != (row.get("final_output") or ""):
            where = key_text(row["key"])
            return Rederived(
                0, (_problem("/final_output", f"final_output is not the recorded response's text ({where})"),), True
            )
        producer = semantic.get("produced_by", {})
        judge = self.judges.get(producer.get("name")) if producer.get("kind") == "judge" else None
        if judge is None or case is None:
            return NOTHING
        try:
            derived = run_deterministic(judge.semantic(case, row.get("final_output"), _prompts(row, shared)))
        except NotDeterministic:
            return NOTHING
        field = _first_difference(semantic, derived)
        if field is None:
            return Rederived(1)
        message = (
            f"semantic {field} is recorded as {semantic.get(field)!r}, the {producer.get('name')} judge "
            f"gives {derived.get(field)!r} from the recorded response ({key_text(row['key'])})"
        )
        return Rederived(1, (_problem(f"/stages/semantic/{field}", message),), True)


class AuditRederiver:
    """The audit outcome and evidence from the recorded response and trace (and the recorded semantic verdict)."""

    def __init__(self, setup: RederiveSetup) -> None:
        self.judges = setup.judges

    def check(self, row: Mapping[str, Any], case: Mapping[str, Any] | None, shared: dict[str, Any]) -> Rederived:
        """Re-derive one row's audit stage."""
        audit, semantic = row["stages"]["audit"], row["stages"].get("semantic")
        producer = audit.get("produced_by", {})
        by_rule = producer.get("kind") == "rule" and producer.get("name") == "audit-evidence"
        # An audit the engine's own stage did not produce (a synthetic bundle's) has nothing to redo.
        if semantic is None or case is None or not (producer.get("kind") == "judge" or by_rule):
            return NOTHING
        # The evidence version the row was recorded with (rows before v3 name it only in a rule producer).
        version = audit.get("evidence_version") or (producer.get("version") if by_rule else AUDIT_VERSIONS[0])
        if version in _UNREDERIVED_AUDITS:
            return NOTHING  # recorded before the audit's evidence could be re-derived (as validators then did)
        if version not in AUDIT_VERSIONS:
            message = (
                f"audit evidence version {version!r} is not one this validator re-derives ({', '.join(AUDIT_VERSIONS)})"
                f" ({key_text(row['key'])})"
            )
            return Rederived(1, (_problem("/stages/audit/evidence_version", message),))
        fallback = self.judges.get(producer.get("name")) if producer.get("kind") == "judge" else None
        context = SimpleNamespace(
            case=case,
            prompt_texts=_prompts(row, shared),
            row={"stages": {"semantic": semantic}, "transcript": row.get("transcript", {}),
                 "final_output": row.get("final_output")},
            judge=fallback if fallback is not None else _RecordedFallback(audit),
            options={},  # the fallback is the judge that recorded it, whichever option chose it
            audit_version=version,
        )  # fmt: skip
        try:
            run_deterministic(run_audit(context))  # type: ignore[arg-type]  # the audit reads only these members
        except NotDeterministic:
            return NOTHING
        derived = context.row["stages"]["audit"]
        field = _first_difference(audit, derived)
        if field is None:
            return Rederived(1)
        message = (
            f"audit {field} is recorded as {audit.get(field)!r}, re-derived from the recorded response and "
            f"trace as {derived.get(field)!r} ({key_text(row['key'])})"
        )
        return Rederived(1, (_problem(f"/stages/audit/{field}", message),))


class ExecRederiver:
    """The exec verdicts from the recorded tool calls, state diff and final answer, by the case's oracles."""

    def __init__(self, setup: RederiveSetup) -> None:
        self.oracles = setup.oracles

    def check(self, row: Mapping[str, Any], case: Mapping[str, Any] | None, shared: dict[str, Any]) -> Rederived:
        """Re-derive one row's exec stage (nothing when an oracle is missing or the record cannot be read)."""
        from ...designs.staged.exec import exec_outcome
        from ...errors import AssayError

        execution = row["stages"]["exec"]
        if case is None or execution.get("produced_by", {}).get("name") != "exec-oracles":
            return NOTHING
        transcript = execution.get("transcript") or {}
        final = next(
            (
                str(message.get("content") or "")
                for message in reversed(transcript.get("messages") or [])
                if message.get("role") == "assistant" and not message.get("tool_calls")
            ),
            "",
        )
        calls, diff = list(transcript.get("tool_calls") or []), list(execution.get("state_diff") or [])
        try:
            failure = execution.get("verification_failure")
            derived = exec_outcome(
                case, self.oracles, calls, diff, final, failure if isinstance(failure, str) else None
            )
        except (AssayError, KeyError, TypeError, ValueError):
            return NOTHING  # an oracle this validator lacks (named by the reference checks) or an unreadable record
        for field in _EXEC_VERDICTS:
            if execution.get(field) != derived.get(field):
                recorded, again = execution.get(field), derived.get(field)
                if field == "oracle_results":
                    recorded = [(r.get("oracle"), r.get("fired")) for r in recorded or []]
                    again = [(r.get("oracle"), r.get("fired")) for r in again or []]
                message = (
                    f"exec {field} is recorded as {recorded!r}, the case's oracles give {again!r} from the recorded "
                    f"tool calls and state diff ({key_text(row['key'])})"
                )
                return Rederived(1, (_problem(f"/stages/exec/{field}", message),))
        return Rederived(1)
