"""JSON for text an agent could have chosen: strings that are not valid Unicode made encodable, deterministically.

:func:`json_safe` makes the numbers and nesting of such values ones every
JSON reader agrees on (no integer beyond 2**53, no NaN, bounded depth), before
a tool runs on them and before a row records them.

Python strings can hold lone surrogates: a model's JSON tool arguments with
``"\\udcff"`` decode to one, and a file name that is not UTF-8 comes back from
``os.listdir`` as one (``surrogateescape``). orjson, rightly, refuses to
encode them, so an agent could stop a run by choosing such a string. The
engine serialises through :func:`dumps`, which encodes valid data as orjson
does and otherwise replaces each such string's unencodable code points with
U+FFFD (the same input always gives the same output).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "dumps", "encodable", "json_safe", "outer_braces"]

#: How deep a value an agent chose may nest; deeper parts are kept as a note (see :func:`json_safe`).
MAX_DEPTH = 64
# The integers every JSON reader holds exactly (RFC 8785 and JavaScript numbers: |n| < 2**53).
_EXACT = (1 << 53) - 1
_DEEP = "<nested deeper than 64 levels>"


def _clean(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def encodable(value: Any) -> Any:
    """``value`` with every string (keys included) made encodable as UTF-8; other values unchanged."""
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, dict):
        return {_clean(k) if isinstance(k, str) else k: encodable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encodable(v) for v in value]
    return value


def dumps(value: Any, option: int | None = None) -> bytes:
    """``orjson.dumps(value, option=option)``, after :func:`encodable` when the value holds unencodable text."""
    try:
        return orjson.dumps(value, option=option)
    except orjson.JSONEncodeError as exc:
        if "surrogates not allowed" not in str(exc) and "str is not valid UTF-8" not in str(exc):
            raise
        return orjson.dumps(encodable(value), option=option)


def _text(value: Any) -> str:
    """``str(value)``, or the type's name when even that fails (a plugin's object may raise in ``__str__``)."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - anything a plugin's object does here
        return f"<{type(value).__name__}>"


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is already what :func:`json_safe` would make it (a walk that allocates nothing)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_EXACT <= value <= _EXACT)
    if kind is float:
        return math.isfinite(value)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        return all(type(key) is str and _plain(item, depth + 1) for key, item in value.items())
    if kind is list:
        return all(_plain(item, depth + 1) for item in value)
    return False


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON every reader parses alike: no integer beyond 2**53, no NaN or infinity, bounded depth.

    An integer no reader holds exactly becomes its decimal text, NaN and the
    infinities their names (``"NaN"``, ``"Infinity"``, ``"-Infinity"``), a
    part nested deeper than :data:`MAX_DEPTH` a short note. Mapping keys
    become text. Everything else is returned as it is (the same object when
    nothing in it changed, so the common row costs one walk and no copy).
    """
    if _plain(value, depth):
        return value  # the usual case: one walk, no copy
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_EXACT <= value <= _EXACT else str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth >= MAX_DEPTH:
        return _DEEP
    if isinstance(value, Mapping):
        items = [
            (key if isinstance(key, str) else _text(key), json_safe(item, depth + 1)) for key, item in value.items()
        ]
        if isinstance(value, dict) and all(
            new_key is old_key and new is old
            for (new_key, new), (old_key, old) in zip(items, value.items(), strict=True)
        ):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        cleaned = [json_safe(item, depth + 1) for item in value]
        if isinstance(value, list) and all(new is old for new, old in zip(cleaned, value, strict=True)):
            return value
        return cleaned
    return _text(value)


def outer_braces(text: str) -> str | None:
    r"""The text from the first ``{`` to the last ``}`` (what ``re.search(r"\{.*\}", text, re.DOTALL)`` finds), or None.

    In linear time: that regular expression tries every ``{`` and scans to the end from each, which a model's
    answer of many braces turns into seconds of the engine's time per answer.
    """
    start = text.find("{")
    end = text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else None
