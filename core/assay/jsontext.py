"""JSON for text an agent could have chosen: strings that are not valid Unicode made encodable, deterministically.

Python strings can hold lone surrogates: a model's JSON tool arguments with
``"\\udcff"`` decode to one, and a file name that is not UTF-8 comes back from
``os.listdir`` as one (``surrogateescape``). orjson, rightly, refuses to
encode them, so an agent could stop a run by choosing such a string. The
engine serialises through :func:`dumps`, which encodes valid data as orjson
does and otherwise replaces each such string's unencodable code points with
U+FFFD (the same input always gives the same output).
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["dumps", "encodable"]


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
