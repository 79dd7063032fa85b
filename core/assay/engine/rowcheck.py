"""Settle a work item's row before it is written: always one the spec accepts, whatever the agent or a plugin did.

A row carries values an agent chose (tool-call arguments, answers, the names
of files it made) and outcomes plugins produced. None of them may stop a run:
an exception there would lose every other item and leave the agent's own
actions unsealed. So :func:`settle_row` never raises. It makes the row's
values JSON that every reader agrees on (:func:`json_safe`), then checks it
against the result-row schema and each extension stage's own outcome schema;
an outcome that does not fit is dropped and the stage's failure recorded in
the row's ``errors`` (type ``invalid_outcome``, naming where and why), so the
row is an error row that ``--retry-errors`` runs again, and the run goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..components import Stage
from ..jsontext import json_safe
from ..schemas import CURRENT_SPEC_VERSION, STAGES, SUPPORTED_MAJORS, spec_schemas

__all__ = ["INVALID_OUTCOME", "row_spec_version", "settle_row"]

#: The error type of a stage whose outcome the spec (or the stage's own schema) refuses.
INVALID_OUTCOME = "invalid_outcome"


def row_spec_version(row: Mapping[str, Any]) -> str:
    """The spec version a row must say: 1.3 when it uses a member 1.3 added, else the engine's own.

    1.3 added ``verification_failure`` to the exec, trajectory and
    permission outcomes and the non-plain ``state_digest`` forms of the exec
    state diff; a reader of 1.1 or 1.2 is so told, by the version, that the
    row needs a newer one rather than finding it malformed.
    """
    stages = row.get("stages")
    if not isinstance(stages, Mapping):
        return CURRENT_SPEC_VERSION
    for name in ("exec", "trajectory", "permission"):
        outcome = stages.get(name)
        if isinstance(outcome, Mapping) and "verification_failure" in outcome:
            return "1.3"
    diff = stages.get("exec", {}).get("state_diff") if isinstance(stages.get("exec"), Mapping) else None
    for change in diff if isinstance(diff, list) else []:
        for member in ("before_sha256", "after_sha256"):
            digest = change.get(member) if isinstance(change, Mapping) else None
            if isinstance(digest, str) and not digest.startswith("sha256:"):
                return "1.3"
    return CURRENT_SPEC_VERSION


def settle_row(
    row: dict[str, Any],
    stages: Mapping[str, Stage],
    planned: Iterable[str],
    identity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``row`` made one the spec accepts, never raising: invalid outcomes dropped, each recorded as an error.

    An outcome under a stage the run does not plan or no plugin registers,
    and one the result-row schema or the stage's own outcome schema refuses,
    is removed; the row's ``errors`` then say which stage, where and why, and
    which plugin to fix. Whatever else is wrong (a transcript a plugin
    shaped badly, say) is reset to empty with an error of its own. The row
    that comes back is always valid. ``identity`` (the work item's ``key``,
    ``case_digest`` and ``scripted``, as the engine made them) is written
    over whatever a plugin left there: a stage holds the row whole.
    """
    settled: dict[str, Any] = json_safe(row)
    settled.update(identity or {})
    planned = set(planned)
    found = settled.get("stages")
    outcomes: dict[str, Any] = found if isinstance(found, dict) else {}
    found_errors = settled.get("errors")
    errors = settled["errors"] = list(found_errors) if isinstance(found_errors, list) else []
    for stray in sorted(outcomes):
        if stray not in planned:
            problem = f"an outcome under {stray!r}, a stage this run does not plan"
        elif stray not in STAGES and stray not in stages:
            problem = f"an outcome under {stray!r}, a stage no plugin registers"
        else:
            continue
        del outcomes[stray]
        errors.append(_invalid(None, f"a plugin gave {problem}; fix the plugin that wrote it (see 'assay plugins')"))
    schemas = spec_schemas(SUPPORTED_MAJORS[-1])
    for _ in range(len(outcomes) + 4):  # each pass removes one cause; a valid row ends the loop
        settled["spec_version"] = row_spec_version(settled)
        violations = schemas.validate("result_row", settled)  # the fast yes first: nearly every row is valid
        name: str | None
        if not violations:
            violation = _extension_violation(outcomes, stages)
            if violation is None:
                return settled
            name, pointer, message = violation
        else:
            pointer, message = violations[0].pointer, violations[0].message
            name = _stage_of(pointer, outcomes)
        if name is not None:
            del outcomes[name]
            errors.append(
                _invalid(
                    name,
                    f"stage {name} gave an outcome the spec refuses ({pointer}: {message}); "
                    "fix the plugin that registers it (see 'assay plugins')",
                )
            )
            continue
        if not _reset(settled, pointer):
            break
        errors.append(_invalid(None, f"a plugin left a row the spec refuses ({pointer}: {message}); it was emptied"))
    return _minimal(settled, errors)


def _invalid(stage: str | None, message: str) -> dict[str, Any]:
    error: dict[str, Any] = {"type": INVALID_OUTCOME, "message": message[:2000]}
    if stage is not None:
        error["stage"] = stage
    return error


def _stage_of(pointer: str, outcomes: Mapping[str, Any]) -> str | None:
    """The stage whose outcome a violation's pointer lies in, or None."""
    parts = pointer.split("/")
    if len(parts) > 2 and parts[1] == "stages":
        name = parts[2].replace("~1", "/").replace("~0", "~")
        return name if name in outcomes else None
    return None


def _extension_violation(outcomes: Mapping[str, Any], stages: Mapping[str, Stage]) -> tuple[str, str, str] | None:
    """The first (stage, pointer, message) where an extension stage's outcome breaks its own schema."""
    from ..extensions import outcome_schema

    for name, outcome in sorted(outcomes.items()):
        if name in STAGES or name not in stages:
            continue
        violations = outcome_schema(stages[name].outcome_schema).violations(outcome)
        if violations:
            return name, f"/stages/{name}{violations[0].pointer}", violations[0].message
    return None


# What a member outside the stages is reset to when a plugin shaped it badly.
_EMPTY: dict[str, Any] = {
    "transcript": {"messages": []},
    "final_output": None,
    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "model_calls": 0, "wall_time_s": 0.0},
}


def _reset(row: dict[str, Any], pointer: str) -> bool:
    """Reset the top-level member a violation lies in; False when it is not one that can be reset."""
    member = pointer.split("/")[1] if pointer.count("/") >= 1 else ""
    if member not in _EMPTY or row.get(member) == _EMPTY[member]:
        return False
    row[member] = json_safe(_EMPTY[member]) if member != "usage" else dict(_EMPTY[member])
    return True


def _minimal(row: Mapping[str, Any], errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The smallest valid row for the item: its key and case digest, no outcome, and the errors that explain it."""
    errors = [e for e in errors if spec_schemas(SUPPORTED_MAJORS[-1]).is_valid("result_row", _shell(row, [e]))]
    errors.append(_invalid(None, "a plugin left a row the spec refuses; only its key is kept"))
    return _shell(row, errors)


def _shell(row: Mapping[str, Any], errors: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec_version": CURRENT_SPEC_VERSION,
        "key": row.get("key"),
        "case_digest": row.get("case_digest"),
        "scripted": bool(row.get("scripted")),
        "transcript": {"messages": []},
        "final_output": None,
        "stages": {},
        "usage": dict(_EMPTY["usage"]),
        "errors": errors,
    }
