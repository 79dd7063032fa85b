"""The case browser's data: every work item of a bundle with its verdicts, and what a reader opens it to.

One entry per row: its key (case, endpoint, condition, seed, epoch), the
case's family, each registered outcome's value for the row (what the browser
filters on), its errors, and the detail: the final output, the transcript
messages and tool calls (the row's and each stage's own), and each stage's
outcome (state diff, oracle verdicts, judge rationale, trajectory labels). All
of it is the bundle's, so untrusted: the renderers escape it, and the HTML
page only ever sets it as text. Long texts are cut (head and tail kept, the cut
said) so that a large bundle still gives a page a browser opens.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from ._load import ReportData
from .model import Table, endpoint_label

__all__ = ["CASE_TEXT_LIMIT", "CaseEntries", "case_entries", "case_entry", "case_table"]

#: Characters of one text (a message, an output) the browser keeps; longer ones keep their head and tail.
CASE_TEXT_LIMIT = 4000
#: Nesting the detail keeps (a stage outcome is shallow; anything deeper is the bundle's, shown as text).
_MAX_DEPTH = 8


def _cut(text: str, limit: int = CASE_TEXT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def _bounded(value: Any, depth: int = 0) -> Any:
    """A JSON value with every string cut and nesting bounded (the bundle chose both)."""
    if isinstance(value, str):
        return _cut(value)
    if depth >= _MAX_DEPTH:
        return _cut(repr(value))
    if isinstance(value, Mapping):
        return {str(key): _bounded(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_bounded(item, depth + 1) for item in value]
    return value


def _messages(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The transcript messages: the row's own, then each stage's (its own agent loop), each labelled."""
    found = []
    for message in (row.get("transcript") or {}).get("messages") or []:
        if isinstance(message, Mapping):
            found.append({"where": "row", **message})
    for stage, outcome in (row.get("stages") or {}).items():
        if isinstance(outcome, Mapping):
            for message in (outcome.get("transcript") or {}).get("messages") or []:
                if isinstance(message, Mapping):
                    found.append({"where": str(stage), **message})
    return found


def _outcome_value(outcome: Any, row: Mapping[str, Any]) -> Any:
    try:
        value = outcome.of(row)
    except Exception:  # noqa: BLE001 - a plugin's outcome failing on an odd row shows as unknown, never as a crash
        return None
    return value if isinstance(value, bool | int | float) or value is None else None


def case_entry(data: ReportData, scripted: frozenset[str], number: int, row: Mapping[str, Any]) -> dict[str, Any]:
    """The browser entry of row ``number``: its key, family, outcome values, errors and detail."""
    key = row.get("key", {})
    case = data.cases.get(str(key.get("case_id")))
    stages = {
        stage: {name: value for name, value in outcome.items() if name != "transcript"}
        for stage, outcome in (row.get("stages") or {}).items()
        if isinstance(outcome, Mapping)
    }
    return {
        "n": number,
        "case": str(key.get("case_id")),
        "endpoint": endpoint_label(key.get("endpoint"), scripted),
        "condition": str(key.get("condition")),
        "seed": key.get("seed"),
        "epoch": key.get("epoch"),
        "family": str(case.get("family", "unknown")) if case is not None else "unknown",
        "outcomes": {
            name: value
            for name, outcome in sorted(data.outcomes.items())
            if data.applies(outcome, row) and (value := _outcome_value(outcome, row)) is not None
        },
        "errors": _bounded([dict(error) for error in row.get("errors") or [] if isinstance(error, Mapping)]),
        "detail": _bounded(
            {
                "final_output": row.get("final_output"),
                "messages": _messages(row),
                "tool_calls": (row.get("transcript") or {}).get("tool_calls") or [],
                "stages": stages,
            }
        ),
    }


class CaseEntries(Sequence[dict[str, Any]]):
    """One browser entry per row, in the bundle's order (the plan's), made as they are walked, never all held.

    A large bundle's entries (each with its transcript) outweigh its rows;
    the renderers walk them once or twice and write as they go.
    """

    def __init__(self, data: ReportData, scripted: frozenset[str]) -> None:
        self._data, self._scripted = data, scripted

    def __len__(self) -> int:
        return len(self._data.bundle.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for number, row in enumerate(self._data.bundle.rows):
            yield case_entry(self._data, self._scripted, number, row)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        rows = self._data.bundle.rows
        number = range(len(rows))[index]  # negative indices and IndexError as a list gives them
        return case_entry(self._data, self._scripted, number, rows[number])


def case_entries(data: ReportData, scripted: frozenset[str]) -> CaseEntries:
    """One browser entry per row, in the bundle's order (the plan's), made as they are read (see CaseEntries)."""
    return CaseEntries(data, scripted)


def case_table(entries: Iterable[Mapping[str, Any]], limit: int) -> Table:
    """The first ``limit`` entries as one table (case, endpoint, condition, seed, family, outcomes, errors).

    One walk of ``entries``: the outcome columns are every outcome some entry has, the caption counts them all.
    """
    names: set[str] = set()
    shown: list[Mapping[str, Any]] = []
    count = 0
    for entry in entries:
        count += 1
        names.update(entry["outcomes"])
        if len(shown) < limit:
            shown.append(entry)
    outcomes = sorted(names)
    rows = []
    for entry in shown:
        cells = [
            str(entry["case"]),
            str(entry["endpoint"]),
            str(entry["condition"]),
            str(entry["seed"]),
            str(entry["family"]),
        ]
        for name in outcomes:
            value = entry["outcomes"].get(name)
            cells.append("" if value is None else ("yes" if value is True else "no" if value is False else str(value)))
        cells.append(str(len(entry["errors"])) if entry["errors"] else "")
        rows.append(tuple(cells))
    caption = f"Work items {min(limit, count)} of {count}" + (
        " (the HTML report's case browser lists them all)" if count > limit else ""
    )
    return Table(("case", "endpoint", "condition", "seed", "family", *outcomes, "errors"), tuple(rows), caption)
