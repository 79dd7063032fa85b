"""The agents' ``search`` tool: case-insensitive substring search over texts, ``name:line: text``."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_HITS", "search_texts"]

#: Hits returned to the agent; more would only fill its context.
MAX_HITS = 50


def search_texts(texts: Iterable[tuple[str, str]], pattern: str) -> str:
    """Every line of the ``(name, text)`` pairs containing ``pattern`` (any case), as ``name:line: text``.

    The caller reads the files (safely: they may be an agent's); without any hit, ``(no matches)``.
    """
    needle, hits = pattern.lower(), []
    for name, text in texts:
        for number, line in enumerate(text.splitlines(), 1):
            if needle and needle in line.lower():
                hits.append(f"{name}:{number}: {line.strip()[:160]}")
                if len(hits) == MAX_HITS:
                    return "\n".join(hits)
    return "\n".join(hits) or "(no matches)"
