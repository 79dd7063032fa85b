"""Reading YAML and JSON documents with their source positions.

The validator reports ``FILE:LINE: /json/pointer: message``. JSON and YAML
parsers give data, not positions, so each loader also returns a map from JSON
pointer to 1-based line: ruamel.yaml's round-trip nodes carry their lines;
for JSON a small scanner walks the text again, only when an error needs a
line (the fast path never pays for it).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from json.decoder import scanstring as _json_scanstring  # type: ignore[attr-defined]  # typeshed omits it
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import DocumentError

# ruamel.yaml is imported when YAML is first parsed: commands that read none should not pay for it.
if TYPE_CHECKING:
    from ruamel.yaml import YAML

__all__ = [
    "DocumentError",
    "SourceDocument",
    "check_tree",
    "escape_pointer",
    "json_pointer_lines",
    "load_document",
    "parse_json_text",
    "parse_yaml_text",
    "plain_data",
    "strict_json_decoder",
    "top_level_string",
]

YAML_SUFFIXES = frozenset({".yaml", ".yml"})

#: Bounds on untrusted documents: nesting levels, the largest exact integer, and the nodes YAML aliases may add.
MAX_DEPTH = 128
MAX_EXACT_INT = 2**53 - 1
MAX_ALIAS_NODES = 100_000
MAX_DOCUMENT_BYTES = 256 << 20
_SURROGATE = re.compile("[\ud800-\udfff]")

# json's own string scanner: (text, index after the opening quote) -> (string, index after the closing quote).
_scanstring: Callable[[str, int], tuple[str, int]] = _json_scanstring


def escape_pointer(token: object) -> str:
    """One JSON pointer reference token (RFC 6901 escaping)."""
    return str(token).replace("~", "~0").replace("/", "~1")


@dataclass
class SourceDocument:
    """A parsed document, where it came from, and how to find the line of a JSON pointer."""

    path: Path
    data: Any
    _lines: Callable[[], dict[str, int]] = field(repr=False, default=dict)
    _cache: dict[str, int] | None = field(default=None, repr=False)

    def line_of(self, pointer: str) -> int | None:
        """The 1-based line of the value at ``pointer``, or of its nearest located ancestor."""
        if self._cache is None:
            self._cache = self._lines()
        while True:
            if pointer in self._cache:
                return self._cache[pointer]
            if not pointer:
                return None
            pointer = pointer.rsplit("/", 1)[0]


# ---------------------------------------------------------------- YAML


def _plain(node: Any, pointer: str, lines: dict[str, int]) -> Any:
    """Convert ruamel's round-trip nodes to plain JSON data, recording lines."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        result = {}
        for key, value in node.items():
            if not isinstance(key, str):
                line = node.lc.key(key)[0] + 1
                raise DocumentError(f"{pointer or '/'}: mapping key {key!r} is not a string", line)
            child = f"{pointer}/{escape_pointer(key)}"
            lines[child] = node.lc.key(key)[0] + 1
            result[key] = _plain(value, child, lines)
        return result
    if isinstance(node, CommentedSeq):
        result_list = []
        for index, value in enumerate(node):
            child = f"{pointer}/{index}"
            with contextlib.suppress(KeyError, IndexError, TypeError):
                lines[child] = node.lc.item(index)[0] + 1
            result_list.append(_plain(value, child, lines))
        return result_list
    if node is None or isinstance(node, bool):
        return node
    if isinstance(node, int):
        if abs(node) > MAX_EXACT_INT:
            raise DocumentError(f"{pointer or '/'}: integer {node} is outside JSON's exact range (2^53 - 1)")
        return int(node)
    if isinstance(node, float):
        if node != node or node in (float("inf"), float("-inf")):
            raise DocumentError(f"{pointer or '/'}: NaN and infinities are not JSON values", lines.get(pointer))
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, (_dt.date, _dt.datetime)):
        # YAML turns 2024-01-01 into a date; the spec only has strings.
        return node.isoformat()
    raise DocumentError(f"{pointer or '/'}: unsupported YAML value {node!r}", lines.get(pointer))


def plain_data(node: Any) -> Any:
    """Plain JSON data from a ruamel round-trip tree (as a reader of the file would see it)."""
    return _plain_fast(node, "")


def _fast_yaml() -> YAML:
    # LibYAML (ruamel.yaml.clib) parses about 5x faster than the pure-Python
    # round-trip parser; the round trip runs only when a line is needed.
    from ruamel.yaml import YAML

    try:
        return YAML(typ="safe", pure=False)
    except Exception:  # noqa: BLE001 - any failure of the optional C parser falls back to the pure one  # pragma: no cover
        return YAML(typ="safe", pure=True)


def _yaml_error(exc: Exception) -> DocumentError:
    from ruamel.yaml.error import MarkedYAMLError

    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "malformed YAML"
        return DocumentError(f"malformed YAML: {problem}", mark.line + 1 if mark else None)
    return DocumentError(f"malformed YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def _yaml_lines(text: str) -> dict[str, int]:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    lines: dict[str, int] = {"": 1}
    with contextlib.suppress(YAMLError, DocumentError, ValueError):
        _plain(YAML(typ="rt").load(text), "", lines)
    return lines


def _plain_fast(node: Any, pointer: str) -> Any:
    if isinstance(node, dict):
        result = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise DocumentError(f"{pointer or '/'}: mapping key {key!r} is not a string")
            result[key] = _plain_fast(value, f"{pointer}/{escape_pointer(key)}")
        return result
    if isinstance(node, list):
        return [_plain_fast(value, f"{pointer}/{index}") for index, value in enumerate(node)]
    if node is None or isinstance(node, bool):
        return bool(node) if node is not None else None
    if isinstance(node, int):
        if abs(node) > MAX_EXACT_INT:
            raise DocumentError(f"{pointer or '/'}: integer {node} is outside JSON's exact range (2^53 - 1)")
        return int(node)  # ruamel's round-trip ScalarInt and friends become plain ints
    if isinstance(node, str):
        return str(node)
    if isinstance(node, float):
        if node != node or node in (float("inf"), float("-inf")):
            raise DocumentError(f"{pointer or '/'}: NaN and infinities are not JSON values")
        return float(node)
    if isinstance(node, (_dt.date, _dt.datetime)):
        return node.isoformat()
    raise DocumentError(f"{pointer or '/'}: unsupported YAML value {node!r}")


def _check_yaml_shape(text: str) -> None:
    """Refuse YAML that would be dangerous to build: too deep, or aliases that multiply (the "billion laughs").

    Runs over the parser's events, which LibYAML produces without recursion;
    building the tree recurses (a few thousand levels overflow the stack) and
    expands every alias, so both are bounded here first.
    """
    from ruamel.yaml import YAML, events
    from ruamel.yaml.error import YAMLError

    sizes: dict[str, int] = {}  # anchor -> nodes it stands for, aliases inside counted in full
    open_nodes: list[tuple[str | None, int]] = []  # (anchor, nodes so far) per open collection
    added = 0
    try:
        for event in YAML(typ="safe", pure=False).parse(text):
            if isinstance(event, events.MappingStartEvent | events.SequenceStartEvent):
                if len(open_nodes) >= MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else None
                    raise DocumentError(f"malformed YAML: nested too deep (more than {MAX_DEPTH} levels)", line)
                open_nodes.append((event.anchor, 1))
            elif isinstance(event, events.MappingEndEvent | events.SequenceEndEvent):
                anchor, size = open_nodes.pop()
                if anchor:
                    sizes[anchor] = size
                if open_nodes:
                    parent_anchor, parent_size = open_nodes[-1]
                    open_nodes[-1] = (parent_anchor, parent_size + size)
            elif isinstance(event, events.ScalarEvent | events.AliasEvent):
                size = sizes.get(event.anchor, 1) if isinstance(event, events.AliasEvent) else 1
                if isinstance(event, events.ScalarEvent) and event.anchor:
                    sizes[event.anchor] = 1
                if isinstance(event, events.AliasEvent):
                    added += size
                    if added > MAX_ALIAS_NODES:
                        line = event.start_mark.line + 1 if event.start_mark else None
                        raise DocumentError(
                            f"malformed YAML: aliases expand to more than {MAX_ALIAS_NODES} nodes (an alias bomb)",
                            line,
                        )
                if open_nodes:
                    parent_anchor, parent_size = open_nodes[-1]
                    open_nodes[-1] = (parent_anchor, parent_size + size)
    except YAMLError as exc:
        raise _yaml_error(exc) from None


def parse_yaml_text(text: str, path: Path) -> SourceDocument:
    """Parse YAML text into plain JSON data; lines are found lazily (round-trip parse).

    Bounded like JSON (:func:`parse_json_text`): depth, integers, aliases.
    """
    from ruamel.yaml.error import YAMLError

    _check_yaml_shape(text)
    try:
        node = _fast_yaml().load(text)
    except (YAMLError, ValueError, RecursionError) as exc:
        raise _yaml_error(exc) from None
    try:
        data = _plain_fast(node, "")
    except RecursionError:
        raise DocumentError("malformed YAML: an alias refers to the collection that holds it") from None
    except DocumentError as exc:
        lines = _yaml_lines(text)
        pointer = str(exc).split(":", 1)[0].rstrip("/")
        raise DocumentError(exc.message, lines.get(pointer) if pointer != "" else 1) from None
    return SourceDocument(path, data, lambda: _yaml_lines(text))


# ---------------------------------------------------------------- JSON


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _exact_int(text: str) -> int:
    value = int(text)
    if abs(value) > MAX_EXACT_INT:
        raise ValueError(f"integer {text[:40]} is outside JSON's exact range (at most 2^53 - 1 in size)")
    return value


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is not finite as a double")
    return value


def parse_json_text(text: str, path: Path) -> SourceDocument:
    """Parse strict JSON with a lazily built pointer-to-line map.

    Strict: no duplicate keys, no NaN, every number exact as a double
    (integers within 2^53 - 1, no overflow to infinity), no lone surrogates,
    and at most :data:`MAX_DEPTH` levels: the domain every reader and the
    canonical hash (RFC 8785) agree on.
    """
    try:
        data = json.loads(
            text,
            object_pairs_hook=_unique_pairs,
            parse_constant=_reject_constant,
            parse_int=_exact_int,
            parse_float=_finite_float,
        )
    except json.JSONDecodeError as exc:
        raise DocumentError(f"malformed JSON: {exc.msg}", exc.lineno) from None
    except RecursionError:
        raise DocumentError(f"malformed JSON: nested too deep (more than {MAX_DEPTH} levels)") from None
    except ValueError as exc:
        raise DocumentError(f"malformed JSON: {exc}") from None
    check_tree(data, surrogates="\\ud" in text.lower())
    return SourceDocument(path, data, lambda: json_pointer_lines(text))


def strict_json_decoder() -> json.JSONDecoder:
    """A decoder with :func:`parse_json_text`'s rules (no duplicate keys, no NaN, exact numbers), for a reader that
    parses a document a value at a time (see :mod:`assay.case_index`); :func:`check_tree` checks the rest."""
    return json.JSONDecoder(
        object_pairs_hook=_unique_pairs,
        parse_constant=_reject_constant,
        parse_int=_exact_int,
        parse_float=_finite_float,
    )


def check_tree(data: Any, *, surrogates: bool, depth: int = 1) -> None:
    """Depth (and, when the text has such escapes, lone surrogates) of parsed JSON found at ``depth`` of its
    document, without recursion; raises DocumentError."""
    stack: list[tuple[Any, int]] = [(data, depth)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                raise DocumentError(f"malformed JSON: nested too deep (more than {MAX_DEPTH} levels)")
            if surrogates:
                stack.extend((key, depth) for key in node)
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                raise DocumentError(f"malformed JSON: nested too deep (more than {MAX_DEPTH} levels)")
            stack.extend((value, depth + 1) for value in node)
        elif surrogates and isinstance(node, str) and _SURROGATE.search(node):
            raise DocumentError("malformed JSON: a string holds a lone surrogate (not Unicode text)")


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def json_pointer_lines(text: str) -> dict[str, int]:
    """Map each JSON pointer of a valid JSON text to the 1-based line where its value starts."""
    lines: dict[str, int] = {}
    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_at(offset: int) -> int:
        import bisect

        return bisect.bisect_right(newlines, offset - 1) + 1

    def skip(pos: int) -> int:
        return _WS.match(text, pos).end()  # type: ignore[union-attr]

    def value(pos: int, pointer: str) -> int:
        pos = skip(pos)
        lines.setdefault(pointer, line_at(pos))
        char = text[pos]
        if char == "{":
            pos = skip(pos + 1)
            if text[pos] == "}":
                return pos + 1
            while True:
                key, pos = _scanstring(text, skip(pos) + 1)
                pos = skip(pos) + 1  # the colon
                pos = skip(value(pos, f"{pointer}/{escape_pointer(key)}"))
                if text[pos] == "}":
                    return pos + 1
                pos += 1  # the comma
        if char == "[":
            pos = skip(pos + 1)
            if text[pos] == "]":
                return pos + 1
            index = 0
            while True:
                pos = skip(value(pos, f"{pointer}/{index}"))
                index += 1
                if text[pos] == "]":
                    return pos + 1
                pos += 1
        if char == '"':
            return _scanstring(text, pos + 1)[1]
        for literal in ("true", "false", "null"):
            if text.startswith(literal, pos):
                return pos + len(literal)
        return _NUMBER.match(text, pos).end()  # type: ignore[union-attr]

    with contextlib.suppress(IndexError, AttributeError, ValueError):  # positions are best effort; json parsed the data
        value(0, "")
    return lines


# ---------------------------------------------------------------- files


def load_document(path: Path) -> SourceDocument:
    """Load a YAML (``.yaml``/``.yml``) or JSON file. Raises DocumentError (with line) or OSError.

    A file over :data:`MAX_DOCUMENT_BYTES` is refused unread: no spec document comes near it.
    """
    with open(path, "rb") as handle:
        # Ask for what the file holds (plus one byte, to see it grew): a read of the whole bound would set
        # aside 256 MiB for every small document, and a pack has hundreds of them.
        expected = min(os.fstat(handle.fileno()).st_size, MAX_DOCUMENT_BYTES) + 1
        raw = handle.read(expected)
        if len(raw) == expected:
            raw += handle.read(MAX_DOCUMENT_BYTES + 1 - len(raw))
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB, so it was not read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DocumentError(f"not UTF-8 text (byte {exc.start})", line) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if path.suffix.lower() in YAML_SUFFIXES:
        return parse_yaml_text(text, path)
    return parse_json_text(text, path)


# A plain scalar that the loader could turn into a number, a boolean or null is left to the loader.
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?:[.][A-Za-z0-9_-]+)*")
_NOT_STRINGS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})


def _surely_string(event: Any) -> bool:
    if event.tag is not None:
        return False
    if event.style in ("'", '"'):
        return True
    return not event.style and bool(_PLAIN_NAME.fullmatch(event.value)) and event.value.lower() not in _NOT_STRINGS


def top_level_string(path: Path, key: str) -> str | None:
    """The string value of ``key`` in a YAML document's top-level mapping, read without loading the rest.

    Plugin loading needs each pack's name, and a large generated manifest takes
    a tenth of a second to load whole; the parser's event stream reaches the
    name within its first lines. Returns None whenever the answer is not a
    plain string found that way (not YAML, not a mapping, the key absent or not
    a scalar, unreadable): the caller then loads the whole document, which also
    reports any error properly.
    """
    if path.suffix.lower() not in YAML_SUFFIXES:
        return None
    from ruamel.yaml import YAML, events
    from ruamel.yaml.error import YAMLError

    depth, is_key, wanted = 0, True, False
    try:
        with path.open(encoding="utf-8") as stream:
            for event in YAML(typ="safe", pure=False).parse(stream):
                if isinstance(event, events.MappingStartEvent | events.SequenceStartEvent):
                    if depth == 0 and isinstance(event, events.SequenceStartEvent):
                        return None
                    if depth == 1 and wanted:
                        return None
                    depth += 1
                    if depth == 2:
                        is_key = not is_key  # a collection as a top-level value
                elif isinstance(event, events.MappingEndEvent | events.SequenceEndEvent):
                    depth -= 1
                    if depth == 0:
                        return None
                elif isinstance(event, events.AliasEvent) and depth == 1:
                    if wanted:
                        return None
                    is_key = not is_key
                elif isinstance(event, events.ScalarEvent) and depth == 1:
                    if wanted:
                        return event.value if _surely_string(event) else None
                    wanted = is_key and event.value == key
                    is_key = not is_key
    except (OSError, UnicodeDecodeError, YAMLError, ValueError):
        return None
    return None
