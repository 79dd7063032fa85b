"""Plain-text tables for terminal output."""

from __future__ import annotations

from collections.abc import Sequence


def render_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces, with a header line."""
    widths = [max([len(column), *(len(row[i]) for row in rows)]) for i, column in enumerate(columns)]
    lines = ["  ".join(column.upper().ljust(width) for column, width in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines)
