"""Re-deriving the verdicts a bundle records from what its rows record, not only recomputing the metrics.

Recomputing the metrics from the rows proves the numbers follow from the
verdicts; it says nothing about the verdicts. A cheater who relabels a
CoreFail row as a refusal (its recorded response still showing the leak) and
recomputes the metrics passes that check. So every verdict a deterministic
component produced is produced again here, from the row's own record:

* the semantic stage's ``final_output`` from the transcript's last assistant
  message (its text and tool calls), as the stage built it;
* the semantic verdict, by the judge that recorded it, when that judge is
  deterministic (a judge plugin says so with ``deterministic = True``; the
  built-in ``rule`` judge does), from the case, the final output and the
  prompt texts;
* the audit outcome and its evidence flags from the case, the final output,
  the recorded tool calls and the semantic verdict; the fallback outcome of a
  row without evidence by the deterministic judge that recorded it (another
  judge's fallback answer is taken as recorded, its evidence still checked).

A row whose recorded verdict differs is named with its key, its line and the
field that differs (``verdict-mismatch``). Verdicts of judges that call a
model cannot be re-derived; ``assay rejudge`` measures those by agreement.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

from ..components import JudgeInstance
from ..engine.stages.audit import run_audit
from ..engine.stages.permission import PERMISSION_PROMPT_VERSION
from ..plugins import Registry
from ..rejudge import prompt_texts
from ._report import Rank, Report

__all__ = ["Derivation", "derive_rows", "deterministic_judges"]

_T = TypeVar("_T")
#: Findings of this kind listed before the rest are summarised.
_MAX_LISTED = 20


def _audit_rule() -> dict[str, Any]:
    from ..engine.stages.audit import AUDIT_VERSION

    return {"kind": "rule", "name": "audit-evidence", "version": AUDIT_VERSION}


class _NotDeterministic(Exception):
    """A judge that was said to be deterministic awaited something (a model call)."""


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Drive a coroutine that never suspends (a deterministic judge's) to its result, without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: _T = done.value
        return result
    coroutine.close()
    raise _NotDeterministic


def _no_endpoint(backend: str, options: Mapping[str, str]) -> Any:
    raise _NotDeterministic


def deterministic_judges(registry: Registry) -> dict[str, JudgeInstance]:
    """An instance (default options) of every registered judge that declares ``deterministic = True``."""
    found: dict[str, JudgeInstance] = {}
    for name, judge in registry.items("judges").items():
        if getattr(judge, "deterministic", False) is True:
            try:
                found[name] = judge.instance({}, _no_endpoint)
            except Exception:  # noqa: BLE001 - a plugin that cannot be built without options is not re-derived
                continue
    return found


def _key_text(key: Mapping[str, Any]) -> str:
    return (
        f"case {key.get('case_id')}, endpoint {key.get('endpoint')}, condition {key.get('condition')}, "
        f"seed {key.get('seed')}, epoch {key.get('epoch')}, protocol {key.get('protocol')}"
    )


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


_EXEC_VERDICTS = ("tool_call", "state_change", "observed_harm", "benign_utility", "oracle_results")


class _PermissionScorer:
    """Static scores and error categories of permission rows, from each row's recorded policy and denials.

    Each case's environment is laid out once, in a private temporary folder
    (from the pack's own files: nothing the agent touched), and the policy is
    scored against it exactly as the stage scored it.
    """

    def __init__(self, pack_root: Path | None) -> None:
        self.pack_root = pack_root
        self._scratch: tempfile.TemporaryDirectory[str] | None = None
        self._layouts: dict[str, Any] = {}

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()

    def _layout(self, case_id: str, case: Mapping[str, Any]) -> Any:
        from ..permissions.environment import materialize

        if case_id not in self._layouts:
            if self._scratch is None:
                self._scratch = tempfile.TemporaryDirectory(prefix="assay-rederive-")
            root = Path(self._scratch.name) / str(len(self._layouts)) / "root"
            self._layouts[case_id] = materialize(case.get("environment"), self.pack_root, root)
        return self._layouts[case_id]

    def check(
        self,
        permission: Mapping[str, Any],
        case_id: str,
        case: Mapping[str, Any],
        line: int,
        where: str,
        mismatch: Callable[[int, str, str], None],
    ) -> bool:
        """Re-derive ``permission``'s static scores and error category; False when there is nothing to redo."""
        from ..engine.stages.permission import _static_scores, error_category
        from ..errors import AssayError
        from ..permissions.jail import RUNTIME_IMPLICIT
        from ..permissions.model import AXES, PermissionSet

        spec = case.get("permission_spec")
        if not isinstance(spec, Mapping):
            return False
        policy = permission.get("policy")
        policy_doc = None if policy is None else {axis: list(policy.get(axis) or []) for axis in AXES}
        try:
            if permission.get("policy_mode") == "generated" and policy_doc is not None:
                static = _static_scores(self._layout(case_id, case), spec, policy_doc)
                if static != permission.get("static"):
                    mismatch(
                        line,
                        "/stages/permission/static",
                        f"permission static scores are not what the recorded policy scores ({where})",
                    )
                    return True
            dynamic = permission.get("dynamic") or {}
            required = PermissionSet.from_mapping(spec["required_permissions"])
            implicit = PermissionSet.from_mapping(spec.get("implicit_permissions")).union(RUNTIME_IMPLICIT)
            enforced = (
                None
                if permission.get("policy_mode") == "unrestricted"
                else PermissionSet.from_mapping(policy_doc or {})
            )
            category = (
                error_category(
                    bool(case.get("sensitive")),
                    bool(dynamic.get("utility_success")),
                    dynamic.get("attack_success"),
                    list(dynamic.get("denials") or []),
                    required,
                    enforced.union(implicit) if enforced else None,
                )
                if permission.get("policy_mode") != "unrestricted"
                else None
            )
        except (AssayError, KeyError, TypeError, ValueError, OSError):
            return False
        if category != permission.get("error_category"):
            mismatch(
                line,
                "/stages/permission/error_category",
                f"permission error_category is recorded as {permission.get('error_category')!r}, the recorded "
                f"policy, denials and verifier outcomes give {category!r} ({where})",
            )
        return True


def _rederive_exec(
    execution: Mapping[str, Any],
    case: Mapping[str, Any],
    oracles: Mapping[str, Any],
    line: int,
    where: str,
    mismatch: Callable[[int, str, str], None],
) -> bool:
    """The exec verdicts again, from the recorded tool calls, state diff and final answer; False if not possible."""
    from ..engine.stages.exec import exec_outcome
    from ..errors import AssayError

    transcript = execution.get("transcript") or {}
    final = next(
        (
            str(message.get("content") or "")
            for message in reversed(transcript.get("messages") or [])
            if message.get("role") == "assistant" and not message.get("tool_calls")
        ),
        "",
    )
    try:
        derived = exec_outcome(
            case, oracles, list(transcript.get("tool_calls") or []), list(execution.get("state_diff") or []), final
        )
    except (AssayError, KeyError, TypeError, ValueError):
        return False  # an oracle this validator lacks (named by the reference checks) or a record it cannot read
    for field in _EXEC_VERDICTS:
        if execution.get(field) != derived.get(field):
            recorded, again = execution.get(field), derived.get(field)
            if field == "oracle_results":
                recorded = [(r.get("oracle"), r.get("fired")) for r in recorded or []]
                again = [(r.get("oracle"), r.get("fired")) for r in again or []]
            mismatch(
                line,
                f"/stages/exec/{field}",
                f"exec {field} is recorded as {recorded!r}, the case's oracles give {again!r} from the recorded "
                f"tool calls and state diff ({where})",
            )
            return True
    return True


def _first_difference(recorded: Mapping[str, Any], derived: Mapping[str, Any]) -> str | None:
    if recorded == derived:  # nearly always: one comparison in C
        return None
    for field in sorted(set(recorded) | set(derived)):
        if recorded.get(field) != derived.get(field):
            return field
    return None


@dataclasses.dataclass
class Derivation:
    """What re-deriving rows found: how many verdicts each line had checked, and every mismatch in line order."""

    checked: dict[int, int] = dataclasses.field(default_factory=dict)
    mismatches: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)  # (line, pointer, message)

    def restricted(self, lines: Iterable[int]) -> Derivation:
        """Only what was found on ``lines`` (the rows the validation accepted)."""
        keep = set(lines)
        return Derivation(
            {line: n for line, n in self.checked.items() if line in keep},
            [found for found in self.mismatches if found[0] in keep],
        )

    def report(self, report: Report, file: str) -> int:
        """Add the mismatches to ``report`` (the first few, then a count); returns how many verdicts were checked."""
        for line, pointer, message in self.mismatches[:_MAX_LISTED]:
            report.add(file, message, rank=Rank.INTEGRITY, code="verdict-mismatch", line=line, pointer=pointer)
        if len(self.mismatches) > _MAX_LISTED:
            report.add(
                file,
                f"{len(self.mismatches) - _MAX_LISTED} more rows record verdicts their own record does not give",
                rank=Rank.INTEGRITY,
                code="verdict-mismatch",
            )
        return sum(self.checked.values())


def derive_rows(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    judges: Mapping[str, JudgeInstance],
    oracles: Mapping[str, Any],
    pack_root: Path | None = None,
) -> Derivation:
    """Re-derive the deterministic verdicts of ``rows`` (found at ``lines``).

    ``case_of(case_id)`` gives a case's data (None when it cannot be had);
    it is asked only for rows that hold something to re-derive; ``pack_root``
    is where a permission case's environment files come from.
    """
    found = Derivation()

    def mismatch(line: int, pointer: str, message: str) -> None:
        found.mismatches.append((line, pointer, message))

    scorer, audit_rule = _PermissionScorer(pack_root), _audit_rule()
    try:
        for row, line in zip(rows, lines, strict=True):
            try:
                count = _rederive_row(row, line, case_of, judges, oracles, scorer, mismatch, audit_rule)
            except Exception as exc:  # noqa: BLE001 - a row the engine could not have written is a finding
                why = f"{type(exc).__name__}; {_where(row)}"
                mismatch(line, "", f"the row cannot be re-derived from its own record ({why})")
                continue
            if count:
                found.checked[line] = count
    finally:
        scorer.close()
    return found


def _where(row: Mapping[str, Any]) -> str:
    key = row.get("key")
    return _key_text(key) if isinstance(key, Mapping) else "a row without a key"


def _rederive_row(
    row: Mapping[str, Any],
    line: int,
    case_of: Callable[[str], Mapping[str, Any] | None],
    judges: Mapping[str, JudgeInstance],
    oracles: Mapping[str, Any],
    scorer: _PermissionScorer,
    mismatch: Callable[[int, str, str], None],
    audit_rule: Mapping[str, Any],
) -> int:
    """Re-derive one row's verdicts; returns how many were checked (mismatches go to ``mismatch``)."""
    checked = 0
    permission = row["stages"].get("permission")
    if permission is not None and permission.get("produced_by", {}).get("version") == PERMISSION_PROMPT_VERSION:
        case = case_of(row["key"]["case_id"])
        if case is not None and scorer.check(
            permission, row["key"]["case_id"], case, line, _key_text(row["key"]), mismatch
        ):
            checked += 1
    execution = row["stages"].get("exec")
    if execution is not None and execution.get("produced_by", {}).get("name") == "exec-oracles":
        case = case_of(row["key"]["case_id"])
        if case is not None and _rederive_exec(execution, case, oracles, line, _key_text(row["key"]), mismatch):
            checked += 1
    semantic = row["stages"].get("semantic")
    if semantic is None:
        return checked
    messages = row.get("transcript", {}).get("messages", [])
    assistant = next((m for m in reversed(messages) if m.get("role") == "assistant"), None)
    if assistant is not None and _final_text(assistant) != (row.get("final_output") or ""):
        mismatch(line, "/final_output", f"final_output is not the recorded response's text ({_key_text(row['key'])})")
        return checked
    producer = semantic.get("produced_by", {})
    judge = judges.get(producer.get("name")) if producer.get("kind") == "judge" else None
    audit = row["stages"].get("audit")
    fallback_producer = (audit or {}).get("produced_by", {})
    # An audit the engine's own stage did not produce (a synthetic bundle's) has nothing to redo.
    redo_audit = audit is not None and (fallback_producer.get("kind") == "judge" or fallback_producer == audit_rule)
    if judge is None and not redo_audit:
        return checked
    case = case_of(row["key"]["case_id"])
    if case is None:
        return checked
    prompts = prompt_texts(row)
    if judge is not None:
        try:
            derived = _run(judge.semantic(case, row.get("final_output"), prompts))
        except _NotDeterministic:
            return checked
        checked += 1
        field = _first_difference(semantic, derived)
        if field is not None:
            mismatch(
                line,
                f"/stages/semantic/{field}",
                f"semantic {field} is recorded as {semantic.get(field)!r}, the {producer.get('name')} judge "
                f"gives {derived.get(field)!r} from the recorded response ({_key_text(row['key'])})",
            )
            return checked
    if audit is None or not redo_audit:
        return checked
    fallback = judges.get(fallback_producer.get("name")) if fallback_producer.get("kind") == "judge" else None
    context = SimpleNamespace(
        case=case,
        prompt_texts=prompts,
        row={"stages": {"semantic": semantic}, "transcript": row.get("transcript", {}),
             "final_output": row.get("final_output")},
        judge=fallback if fallback is not None else _RecordedFallback(audit),
    )  # fmt: skip
    try:
        _run(run_audit(context))  # type: ignore[arg-type]  # the audit reads only these members
    except _NotDeterministic:
        return checked
    checked += 1
    derived_audit = context.row["stages"]["audit"]
    field = _first_difference(audit, derived_audit)
    if field is not None:
        mismatch(
            line,
            f"/stages/audit/{field}",
            f"audit {field} is recorded as {audit.get(field)!r}, re-derived from the recorded response and "
            f"trace as {derived_audit.get(field)!r} ({_key_text(row['key'])})",
        )
    return checked
