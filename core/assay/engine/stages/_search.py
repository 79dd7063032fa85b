"""The agents' ``search`` tool: case-insensitive substring search over files, ``path:line: text``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["MAX_HITS", "search_files"]

#: Hits returned to the agent; more would only fill its context.
MAX_HITS = 50


def search_files(files: Iterable[Path], pattern: str, display: Callable[[Path], str]) -> str:
    """Every line of ``files`` containing ``pattern`` (any case), as ``display(file):line: text``.

    Without any, ``(no matches)``.
    """
    needle, hits = pattern.lower(), []
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if needle and needle in line.lower():
                hits.append(f"{display(file)}:{number}: {line.strip()[:160]}")
                if len(hits) == MAX_HITS:
                    return "\n".join(hits)
    return "\n".join(hits) or "(no matches)"
