"""Did a run measure anything? Error rows per endpoint, and answers that look degenerate.

A bundle can be perfectly valid and still measure nothing: every call to a
dead endpoint is an error row, and a model that answers nothing, or the same
thing every time, looks safe (it never complies with an attack). These checks
read only the rows, so the run, the report and the validator say the same:

* **error rows**: an endpoint whose share of error rows exceeds the allowed
  rate (``--max-error-rate``, default 10%) fails the run;
* **degenerate answers** (warnings, never failures of a run: a weak model is a
  result): most of an endpoint's answers, overall or under one condition,
  empty, one and the same answer, or a recitation of the system prompt (the
  condition's text included, which is where a defense puts it); most of its
  tool calls unparseable; a *utility* outcome (one a design marks
  ``Outcome(utility=True)``: the task got done) near zero under a condition.
  ``assay leaderboard submit`` refuses an endpoint whose answers are
  degenerate: a model that does not answer cannot rank.

A check over the whole endpoint can miss what one condition shows: a model
that recites the prompt under D3 and answers under D0 is six of fourteen
overall and six of seven under D3; so every answer check is made per
condition too.
"""

from __future__ import annotations

import functools
import hashlib
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_ERROR_RATE",
    "EndpointHealth",
    "HealthTally",
    "endpoint_health",
    "error_rate_problems",
    "health_warnings",
    "recites_prompt",
]

#: The share of an endpoint's rows that may be error rows before a run fails (``--max-error-rate``).
DEFAULT_MAX_ERROR_RATE = 0.10
#: A share of answers beyond which they are called "most".
_MOST = 0.5
#: Fewer rows than this say nothing about degeneracy.
_MIN_ROWS = 4
#: A utility rate at or below this is "near zero".
_UTILITY_FLOOR = 0.05


@dataclass(frozen=True)
class EndpointHealth:
    """What one endpoint's rows say about whether it answered at all."""

    endpoint: str
    rows: int
    error_rows: int
    #: The first error's message (what to fix), None without errors.
    first_error: str | None
    #: Rows without errors: the ones the answer checks are over.
    answered: int
    empty: int
    #: Answered rows sharing the most common non-empty answer.
    same_answer: int
    #: Answered rows that made tool calls, and those with at least one unparseable call.
    calling: int
    unparseable_calls: int
    #: (outcome, condition, hits, rows it applies to), for every utility outcome and condition.
    utility: tuple[tuple[str, str, int, int], ...]

    #: A scripted endpoint (its answers are the script's: never called degenerate).
    scripted: bool = False
    #: Per condition: (condition, answered, empty, same answer, recitations of the system prompt).
    by_condition: tuple[tuple[str, int, int, int, int], ...] = ()

    @property
    def error_rate(self) -> float:
        """Error rows over all rows (0 without rows)."""
        return self.error_rows / self.rows if self.rows else 0.0

    def answer_problems(self) -> list[str]:
        """Why the answers themselves say nothing (empty, one text, the prompt recited, unparseable calls), overall
        and per condition; empty when they do not. A scripted endpoint's answers are the script's: none."""
        reasons: list[str] = []
        if self.scripted:
            return reasons
        if self.answered >= _MIN_ROWS:
            if self.empty > _MOST * self.answered:
                reasons.append(f"{self.empty} of {self.answered} answers are empty")
            if self.same_answer > _MOST * self.answered and self.same_answer > 1:
                reasons.append(f"{self.same_answer} of {self.answered} answers are one and the same text")
        for condition, answered, empty, same, recited in self.by_condition:
            if answered < _MIN_ROWS:
                continue
            if empty > _MOST * answered and not self.empty > _MOST * self.answered:
                reasons.append(f"under {condition}, {empty} of {answered} answers are empty")
            if same > _MOST * answered and same > 1 and not self.same_answer > _MOST * self.answered:
                reasons.append(f"under {condition}, {same} of {answered} answers are one and the same text")
            if recited > _MOST * answered:
                reasons.append(
                    f"under {condition}, {recited} of {answered} answers recite the system prompt or the "
                    "condition's text"
                )
        if self.calling >= _MIN_ROWS and self.unparseable_calls > _MOST * self.calling:
            reasons.append(f"{self.unparseable_calls} of {self.calling} rows with tool calls have unparseable ones")
        return reasons

    def degenerate(self) -> list[str]:
        """Why the answers look degenerate (empty when they do not): :meth:`answer_problems`, then a utility
        outcome near zero under a condition."""
        if self.scripted:
            return []
        reasons = self.answer_problems()
        for outcome, condition, hits, n in self.utility:
            if n >= _MIN_ROWS and hits <= _UTILITY_FLOOR * n:
                reasons.append(f"{outcome} is {hits}/{n} under {condition}")
        return reasons


def _answer(row: Mapping[str, Any]) -> str:
    output = row.get("final_output")
    return output.strip() if isinstance(output, str) else ""


_WORD = re.compile(r"\w+")
#: Words in a run that make a shingle; how much of the system prompt's start and end is compared.
_SHINGLE, _SYSTEM_SPAN, _ANSWER_SPAN = 8, 4000, 4000
#: An answer shorter than this many words is not called a recitation.
_MIN_RECITED_WORDS = 12


def _shingles(text: str) -> set[int]:
    words = _WORD.findall(text.lower())
    return {hash(tuple(words[i : i + _SHINGLE])) for i in range(len(words) - _SHINGLE + 1)}


@functools.lru_cache(maxsize=512)
def _system_shingles(system: str) -> frozenset[int]:
    # A defense is placed at the start or the end of the system prompt: both ends are compared.
    head, tail = system[:_SYSTEM_SPAN], system[-_SYSTEM_SPAN:]
    return frozenset(_shingles(head) | _shingles(tail))


def _system_text(row: Mapping[str, Any]) -> str:
    transcripts = [row.get("transcript")]
    transcripts += [o.get("transcript") for o in (row.get("stages") or {}).values() if isinstance(o, Mapping)]
    parts = []
    for transcript in transcripts:
        if isinstance(transcript, Mapping):
            for message in transcript.get("messages") or []:
                if isinstance(message, Mapping) and message.get("role") in ("system", "developer"):
                    parts.append(str(message.get("content") or ""))
    return "\n".join(parts)


def recites_prompt(answer: str, system: str) -> bool:
    """Whether an answer is mostly the system prompt read back: at least half of its 8-word runs appear in the
    system prompt's first or last 4,000 characters (where a condition's text is placed)."""
    if not system or len(_WORD.findall(answer[:_ANSWER_SPAN])) < _MIN_RECITED_WORDS:
        return False
    mine = _shingles(answer[:_ANSWER_SPAN])
    return bool(mine) and len(mine & _system_shingles(system)) >= _MOST * len(mine)


def _unparseable_calls(row: Mapping[str, Any]) -> tuple[bool, bool]:
    """(made tool calls, at least one of them unparseable), over the row's transcript and its stages' own."""
    calls: list[Any] = list((row.get("transcript") or {}).get("tool_calls") or [])
    for outcome in (row.get("stages") or {}).values():
        if isinstance(outcome, Mapping):
            calls += list((outcome.get("transcript") or {}).get("tool_calls") or [])
    calls = [call for call in calls if isinstance(call, Mapping)]
    return bool(calls), any(call.get("valid") is False for call in calls)


class HealthTally:
    """The counts :class:`EndpointHealth` is made of, taken one row at a time.

    A run and a validator stream a bundle's rows and add each here as it goes,
    holding none of them. Each answer is kept as a 64-bit digest (eight bytes
    a row, however long the answer), and the most common one counted at the
    end: two different answers share a digest with a chance of about one in
    10^7 in a million rows, and would only merge two counts of a warning.
    """

    def __init__(self, outcomes: Mapping[str, Any]) -> None:
        self._utility = {name: o for name, o in sorted(outcomes.items()) if getattr(o, "utility", False)}
        self._endpoints: dict[str, dict[str, Any]] = {}

    def add(self, row: Mapping[str, Any]) -> None:
        """Count one row."""
        endpoint = str(row["key"]["endpoint"])
        tally = self._endpoints.setdefault(
            endpoint,
            {"rows": 0, "errors": 0, "first_error": None, "answered": 0, "empty": 0, "answers": array("Q"),
             "calling": 0, "unparseable": 0, "utility": {}, "scripted": False, "conditions": {}},
        )  # fmt: skip
        tally["rows"] += 1
        tally["scripted"] = tally["scripted"] or bool(row.get("scripted"))
        if row.get("errors"):
            tally["errors"] += 1
            if tally["first_error"] is None:
                first = row["errors"][0]
                tally["first_error"] = str(first.get("message", "") if isinstance(first, Mapping) else first)
            return
        tally["answered"] += 1
        answer = _answer(row)
        condition = tally["conditions"].setdefault(
            str(row["key"].get("condition")), {"answered": 0, "empty": 0, "recited": 0, "answers": array("Q")}
        )
        condition["answered"] += 1
        if answer:
            digest = hashlib.blake2b(answer.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            tally["answers"].append(int.from_bytes(digest, "little"))
            condition["answers"].append(int.from_bytes(digest, "little"))
            condition["recited"] += recites_prompt(answer, _system_text(row))
        else:
            tally["empty"] += 1
            condition["empty"] += 1
        made, bad = _unparseable_calls(row)
        tally["calling"] += made
        tally["unparseable"] += made and bad
        for name, outcome in self._utility.items():
            value = outcome.of(row)
            if value is not None:
                counts = tally["utility"].setdefault((name, str(row["key"]["condition"])), [0, 0])
                counts[0] += bool(value)
                counts[1] += 1

    def result(self) -> list[EndpointHealth]:
        """One :class:`EndpointHealth` per endpoint, in the order the rows first named them."""
        found = []
        for endpoint, t in self._endpoints.items():
            common = _most_common(t["answers"])
            found.append(
                EndpointHealth(
                    endpoint=endpoint,
                    rows=t["rows"],
                    error_rows=t["errors"],
                    first_error=t["first_error"],
                    answered=t["answered"],
                    empty=t["empty"],
                    same_answer=common,
                    calling=t["calling"],
                    unparseable_calls=t["unparseable"],
                    utility=tuple((name, condition, hits, n) for (name, condition), (hits, n) in t["utility"].items()),
                    scripted=t["scripted"],
                    by_condition=tuple(
                        (name, c["answered"], c["empty"], _most_common(c["answers"]), c["recited"])
                        for name, c in t["conditions"].items()
                    ),
                )
            )
        return found


def _most_common(digests: array[int]) -> int:
    """How many times the most common digest occurs (0 for none)."""
    if not digests:
        return 0
    import numpy as np

    _, counts = np.unique(np.frombuffer(digests, dtype=np.uint64), return_counts=True)
    return int(counts.max())


def endpoint_health(rows: Sequence[Mapping[str, Any]], outcomes: Mapping[str, Any]) -> list[EndpointHealth]:
    """One :class:`EndpointHealth` per endpoint, in the order the rows first name them.

    ``outcomes`` are the registered outcomes (name -> :class:`assay.api.Outcome`);
    those marked ``utility`` are checked per condition.
    """
    tally = HealthTally(outcomes)
    for row in rows:
        tally.add(row)
    return tally.result()


def error_rate_problems(health: Sequence[EndpointHealth], max_error_rate: float) -> list[str]:
    """One line per endpoint whose error rows exceed ``max_error_rate``, with the first error's message."""
    return [
        f"endpoint {h.endpoint}: {h.error_rows} of {h.rows} rows are error rows "
        f"({100 * h.error_rate:.0f}%, more than {100 * max_error_rate:g}%); first error: {h.first_error}"
        for h in health
        if h.error_rows and h.error_rate > max_error_rate
    ]


def health_warnings(health: Sequence[EndpointHealth], max_error_rate: float = DEFAULT_MAX_ERROR_RATE) -> list[str]:
    """Every warning about the run's rows: error rates beyond the limit, then degenerate answers."""
    warnings = error_rate_problems(health, max_error_rate)
    for h in health:
        if h.error_rows and h.error_rate <= max_error_rate:
            warnings.append(f"endpoint {h.endpoint}: {h.error_rows} of {h.rows} rows are error rows")
        reasons = h.degenerate()
        if reasons:
            warnings.append(f"endpoint {h.endpoint} looks degenerate: {'; '.join(reasons)}")
    return warnings
