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

__all__ = ["Derivation", "RederiveJob", "derive_rows", "deterministic_judges", "rederive_rows"]

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

    scorer = _PermissionScorer(pack_root)
    try:
        _rederive_all(rows, lines, case_of, judges, oracles, scorer, mismatch, _audit_rule(), found.checked)
    finally:
        scorer.close()
    return found


def rederive_rows(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    judges: Mapping[str, JudgeInstance],
    oracles: Mapping[str, Any],
    file: str,
    report: Report,
    pack_root: Path | None = None,
) -> int:
    """Re-derive the verdicts of ``rows`` (at ``lines`` of ``file``) into ``report``; returns how many were checked.

    See :func:`derive_rows`.
    """
    return derive_rows(rows, lines, case_of, judges, oracles, pack_root).report(report, file)


def _rederive_all(
    rows: Sequence[Mapping[str, Any]],
    lines: Sequence[int],
    case_of: Callable[[str], Mapping[str, Any] | None],
    judges: Mapping[str, JudgeInstance],
    oracles: Mapping[str, Any],
    scorer: _PermissionScorer,
    mismatch: Callable[[int, str, str], None],
    audit_rule: Mapping[str, Any],
    checked: dict[int, int],
) -> None:
    """Re-derive every row into ``checked`` (per line); a row whose record breaks it is a finding, not a crash."""
    for row, line in zip(rows, lines, strict=True):
        try:
            count = _rederive_row(row, line, case_of, judges, oracles, scorer, mismatch, audit_rule)
        except Exception as exc:  # noqa: BLE001 - a row the engine could not have written
            mismatch(
                line, "", f"the row cannot be re-derived from its own record ({type(exc).__name__}; {_where(row)})"
            )
            continue
        if count:
            checked[line] = count


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


#: Rows files of at least this size re-derive in a forked child while the parent checks the rows and the metrics.
PARALLEL_BYTES = 4 << 20
#: Rows are re-derived in chunks of this many lines, the unit the parent and the child share the work in.
CHUNK_LINES = 512

_Rows = tuple[Sequence[Mapping[str, Any]], Sequence[int]]


def _chunk_of(line: int) -> int:
    return (line - 1) // CHUNK_LINES


def _by_chunk(rows: Sequence[Mapping[str, Any]], lines: Sequence[int]) -> dict[int, _Rows]:
    """Rows (in line order) split into their chunks, in chunk order."""
    chunks: dict[int, tuple[list[Mapping[str, Any]], list[int]]] = {}
    for row, line in zip(rows, lines, strict=True):
        chunk = chunks.setdefault(_chunk_of(line), ([], []))
        chunk[0].append(row)
        chunk[1].append(line)
    return dict(chunks)


class _Claims:
    """Which chunks each side has taken, in memory both processes share: the child from the front, the parent
    from the back, until they meet.

    Each side writes only its own end, and only before it works a chunk, so
    no chunk is left to neither; at the meeting point both may take the same
    chunk, which is only done twice (the child's result is kept).
    """

    _NOBODY = 1 << 62

    def __init__(self) -> None:
        import mmap
        import struct

        self._memory = mmap.mmap(-1, 16)  # anonymous and shared: the forked child sees the parent's writes
        self._pack, self._end = struct.Struct("=qq"), struct.Struct("=q")  # aligned 8-byte stores: never torn
        self._pack.pack_into(self._memory, 0, 0, self._NOBODY)

    def _ends(self) -> tuple[int, int]:
        front, back = self._pack.unpack_from(self._memory, 0)
        return int(front), int(back)

    def take_front(self, chunk: int) -> bool:
        """The child's claim on ``chunk`` (its chunks come in rising order): False once the parent holds it."""
        if chunk >= self._ends()[1]:
            return False
        self._end.pack_into(self._memory, 0, chunk + 1)  # front: every chunk below it is the child's
        return True

    def take_back(self, chunk: int) -> bool:
        """The parent's claim on ``chunk`` (its chunks come in falling order): False once the child holds it."""
        if chunk < self._ends()[0]:
            return False
        self._end.pack_into(self._memory, 8, chunk)  # back: every chunk from it on is the parent's
        return True

    def close(self) -> None:
        """Release the shared memory."""
        self._memory.close()


class RederiveJob:
    """Re-derivation of a bundle's verdicts, run alongside the rest of the validation when the bundle is large.

    On Linux, for a rows file of :data:`PARALLEL_BYTES` or more, a child is
    forked before the rows are read. It parses them itself and re-derives, a
    chunk of :data:`CHUNK_LINES` lines at a time from the first, every row that
    parses as an object, while the parent reads them again for its own checks
    and recomputes the metrics; then the parent takes chunks from the last,
    until the two meet. The child sends back what it found per line, and the
    parent keeps what concerns the rows it accepted. (The child checks the
    schema but not the keys against the plan: a duplicate or unplanned row is
    re-derived in vain, under the same per-row guard, and dropped.) If the
    child cannot be made or fails,
    the work is done in the parent. The findings are the same, in the same
    order, either way.
    """

    def __init__(self, derive: Callable[[Sequence[Mapping[str, Any]], Sequence[int]], Derivation], file: str) -> None:
        self._derive, self._file = derive, file
        self._pid: int | None = None
        self._fd: int | None = None
        self._claims: _Claims | None = None

    @classmethod
    def prepare(
        cls,
        case_of: Callable[[str], Mapping[str, Any] | None],
        judges: Mapping[str, JudgeInstance],
        oracles: Mapping[str, Any],
        file: str,
        pack_root: Path | None = None,
    ) -> RederiveJob:
        """A job over the rows it will be given (:meth:`fork` or :meth:`finish`)."""

        def derive(rows: Sequence[Mapping[str, Any]], lines: Sequence[int]) -> Derivation:
            return derive_rows(rows, lines, case_of, judges, oracles, pack_root)

        return cls(derive, file)

    def fork(self, load: Callable[[], _Rows | None]) -> None:
        """Start the work in a child on the candidate rows ``load()`` gives; nothing happens where fork is missing.

        The candidates must include every row the parent will accept, at the
        same line and with the same content.
        """
        import os
        import sys

        import orjson

        if sys.platform != "linux" or not hasattr(os, "fork"):
            return
        claims = _Claims()
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            claims.close()
            return
        if pid == 0:  # the child: compute, send, and leave without running the parent's exit handlers
            status = 1
            try:
                os.close(read_fd)
                loaded = load()
                found, done = Derivation(), []
                for chunk, (rows, lines) in ({} if loaded is None else _by_chunk(*loaded)).items():
                    if not claims.take_front(chunk):
                        break
                    part = self._derive(rows, lines)
                    found.checked.update(part.checked)
                    found.mismatches.extend(part.mismatches)
                    done.append(chunk)
                message = {"chunks": done, "checked": list(found.checked.items()), "mismatches": found.mismatches}
                view = memoryview(orjson.dumps(message))
                while view:
                    view = view[os.write(write_fd, view) :]
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        self._pid, self._fd, self._claims = pid, read_fd, claims

    def finish(
        self,
        report: Report,
        handed: list[list[dict[str, Any]]],
        lines: Sequence[int],
        reload: Callable[[], _Rows | None],
    ) -> int:
        """Add the re-derived findings to ``report`` (after what it holds); returns how many verdicts were checked.

        ``handed`` holds the rows the parent accepted (``lines`` are their
        lines), handed over so that they can be freed while the child ends:
        the parent re-derives chunks from the last while the child has not
        reached them, then lets its rows go and collects the child's work,
        keeping it for ``lines`` only. Without a child, or when it fails, the
        rows it owed are re-derived here (read again with ``reload`` if they
        were let go: the candidates, as the child read them).
        """
        rows = handed.pop()
        chunks = _by_chunk(rows, lines)
        if self._pid is None:
            alone = {chunk: self._derive(*part) for chunk, part in chunks.items()}
            return self._assemble(alone, {}, lines).report(report, self._file)
        mine: dict[int, Derivation] = {}
        assert self._claims is not None
        for chunk in sorted(chunks, reverse=True):
            if not self._claims.take_back(chunk):
                break
            mine[chunk] = self._derive(*chunks[chunk])
        del rows, chunks  # freed while the child finishes: the parent no longer needs them
        theirs = self._collect()
        if theirs is None:  # no usable answer: re-derive here what the child owed
            candidates = reload()
            if candidates is not None:
                keep = set(lines)
                picked = [(row, line) for row, line in zip(*candidates, strict=True) if line in keep]
                owed = _by_chunk([row for row, _ in picked], [line for _, line in picked])
                for chunk, part in owed.items():
                    if chunk not in mine:
                        mine[chunk] = self._derive(*part)
            theirs = {}
        return self._assemble(mine, theirs, lines).report(report, self._file)

    def abandon(self) -> None:
        """End the job without findings (the rows could not be read): the child, if any, is waited for."""
        if self._pid is not None:
            self._collect()

    def _collect(self) -> dict[int, Derivation] | None:
        """The child's work per chunk, once it has ended; None when it failed or sent nothing usable."""
        import os

        import orjson

        assert self._pid is not None and self._fd is not None and self._claims is not None
        chunks = []
        with os.fdopen(self._fd, "rb") as pipe:
            while chunk := pipe.read(1 << 20):
                chunks.append(chunk)
        _, status = os.waitpid(self._pid, 0)
        self._claims.close()
        self._pid = self._fd = self._claims = None
        if status != 0:
            return None
        try:
            sent = orjson.loads(b"".join(chunks))
            parts = {int(chunk): Derivation() for chunk in sent["chunks"]}
            for line, count in sent["checked"]:
                parts[_chunk_of(int(line))].checked[int(line)] = int(count)
            for line, pointer, message in sent["mismatches"]:
                parts[_chunk_of(int(line))].mismatches.append((int(line), str(pointer), str(message)))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None
        return parts

    def _assemble(
        self, mine: Mapping[int, Derivation], theirs: Mapping[int, Derivation], lines: Sequence[int]
    ) -> Derivation:
        """Every chunk's findings in line order (the child's where both did one), kept for ``lines``."""
        whole = Derivation()
        for chunk in sorted(set(mine) | set(theirs)):
            part = theirs[chunk] if chunk in theirs else mine[chunk]
            whole.checked.update(part.checked)
            whole.mismatches.extend(part.mismatches)
        return whole.restricted(lines)
