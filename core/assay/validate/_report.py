"""Validation findings as data, and their one-line rendering."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__all__ = ["Issue", "Rank", "Report"]


class Rank(IntEnum):
    """How relevant a finding is; lower comes first in output."""

    UNREADABLE = 0  # the file cannot be parsed or is unsafe: nothing else about it is trustworthy
    INTEGRITY = 1  # digests and sizes: the content is not what was sealed
    SCHEMA = 2
    REFERENCE = 3  # names that do not resolve: plugins, fixtures, cases
    COMPLETENESS = 4  # planned matrix gaps and duplicates
    METRICS = 5  # claimed numbers the rows do not reproduce


@dataclass(frozen=True)
class Issue:
    """One finding: where (file, line, JSON pointer) and what."""

    file: str
    line: int | None
    pointer: str
    message: str
    rank: Rank
    code: str

    def format(self) -> str:
        """``FILE:LINE: /json/pointer: message`` (line and pointer omitted when unknown or root)."""
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.pointer:
            return f"{where}: {self.pointer}: {self.message}"
        return f"{where}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form used by ``--json``."""
        return {
            "file": self.file,
            "line": self.line,
            "pointer": self.pointer,
            "message": self.message,
            "rank": self.rank.name.lower(),
            "code": self.code,
        }


@dataclass
class Report:
    """Everything found while validating one target."""

    target: str
    kind: str = "unknown"
    issues: list[Issue] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    #: What is likely a mistake but does not make the target invalid (printed, never counted as a problem).
    warnings: list[Issue] = field(default_factory=list)

    def add(
        self, file: str, message: str, *, rank: Rank, code: str, line: int | None = None, pointer: str = ""
    ) -> None:
        """Record a finding."""
        self.issues.append(Issue(file, line, pointer, message, rank, code))

    def warn(
        self,
        file: str,
        message: str,
        *,
        code: str,
        line: int | None = None,
        pointer: str = "",
        rank: Rank = Rank.REFERENCE,
    ) -> None:
        """Record a warning."""
        self.warnings.append(Issue(file, line, pointer, message, rank, code))

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.issues

    def ordered(self) -> list[Issue]:
        """Findings, most relevant first; ties keep discovery order."""
        return sorted(self.issues, key=lambda issue: issue.rank)

    def to_json(self) -> dict[str, Any]:
        """The machine-readable report."""
        return {
            "target": self.target,
            "kind": self.kind,
            "valid": self.ok,
            "issues": [issue.to_json() for issue in self.ordered()],
            "warnings": [warning.to_json() for warning in self.warnings],
            "facts": self.facts,
        }
