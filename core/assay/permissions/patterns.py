"""Absolute POSIX path patterns: normalization, validation and glob matching.

A permission policy names files with absolute patterns. This module is the one
place that decides what such a pattern means; scoring and enforcement both use
it, so a pattern cannot mean one thing to the scorer and another to the runtime.

Pattern language (matching is case-sensitive and purely textual; nothing here
touches the filesystem):

* ``*`` matches any run of characters within one path segment, never ``/``.
  It matches dotfiles too (like ``fnmatch`` or bash with ``dotglob``): a
  policy that writes ``/app/*`` has asked for ``/app/.env``.
* ``**`` as a whole segment matches zero or more segments, so ``/a/**``
  matches ``/a``, ``/a/b`` and ``/a/b/c``, ``/**`` matches every path and
  ``/a/**/x`` matches ``/a/x`` and ``/a/b/c/x``. A segment made only of stars
  counts as ``**``; stars glued to other text (``/a/b**``) behave like ``*``.
* ``?`` matches one character other than ``/``.
* ``[abc]``, ``[a-z]`` and the negations ``[!x]`` / ``[^x]`` match one
  character other than ``/``. A ``]`` right after the opening bracket (or its
  negation mark) is a member; a ``[`` with no closing ``]`` is literal text; a
  reversed range such as ``[z-a]`` is an error.
* Backslash has no escaping role; it is an ordinary character.

Before matching, patterns and paths are normalized: duplicate slashes are
collapsed, ``.`` segments and a trailing slash are dropped. Relative patterns,
``..`` segments, control characters and empty strings are rejected.

A literal pattern (one without any wildcard) matches only the path it names;
``/app`` does not grant ``/app/x``: write ``/app/**`` for a whole tree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = [
    "Glob",
    "compile_pattern",
    "expand",
    "is_literal",
    "literal_prefix",
    "matches",
    "normalize",
    "validate_pattern",
    "within",
]

# The schema's absolute_pattern maxLength, which is also Linux's PATH_MAX.
MAX_LENGTH = 4096

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# The regex for one `**` segment: zero or more whole segments, each with its slash.
_GLOBSTAR = "(?:/[^/]+)*"

# Compiled patterns are reused across every universe path of every case, so the
# cache is sized for a whole pack's patterns rather than one policy's.
_CACHE_SIZE = 8192


def normalize(path_or_pattern: str) -> str:
    """Return the canonical spelling of an absolute path or pattern.

    Duplicate slashes are collapsed, ``.`` segments and a trailing slash are
    dropped (``/`` stays ``/``). Wildcards are left alone. Raises ``ValueError``
    for a non-string, an empty or over-long string, a relative path (including
    ``~/...``), a ``..`` segment or a control character.
    """
    # Checked before the cache, which would raise TypeError on a list or dict
    # from malformed model output instead of the documented ValueError.
    if not isinstance(path_or_pattern, str):
        raise ValueError(f"pattern must be a string, not {type(path_or_pattern).__name__}")
    return _normalize(path_or_pattern)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _normalize(path_or_pattern: str) -> str:
    """normalize() for a string, cached."""
    if not path_or_pattern:
        raise ValueError("empty pattern")
    if len(path_or_pattern) > MAX_LENGTH:
        raise ValueError(f"pattern longer than {MAX_LENGTH} characters")
    bad = _CONTROL.search(path_or_pattern)
    if bad:
        raise ValueError(f"control character {bad.group()!r} in pattern {path_or_pattern!r}")
    if not path_or_pattern.startswith("/"):
        raise ValueError(f"relative pattern {path_or_pattern!r}: patterns must be absolute (start with '/')")
    segments = [segment for segment in path_or_pattern.split("/") if segment not in ("", ".")]
    if ".." in segments:
        # Rejected rather than resolved: '..' textually inside a glob cannot be
        # resolved without the filesystem, and a policy has no need for it.
        raise ValueError(f"'..' segment in pattern {path_or_pattern!r}")
    return "/" + "/".join(segments)


def validate_pattern(pattern: object) -> str | None:
    """Return ``None`` if ``pattern`` is a usable pattern, else a one-line error message.

    Meant for model output: the caller records the message in the result row
    and the scorer ignores the pattern, instead of the whole policy failing.
    """
    try:
        compile_pattern(pattern)  # type: ignore[arg-type]
    except ValueError as error:
        return str(error)
    return None


def is_literal(pattern: str) -> bool:
    """Whether ``pattern`` has no wildcard, i.e. names exactly one path.

    A lone ``[`` without a closing ``]`` is literal text, so it does not make a
    pattern a glob. Raises ``ValueError`` for an invalid pattern.
    """
    compile_pattern(pattern)  # raises the same errors, with the pattern named
    return _translate(normalize(pattern))[1]


def compile_pattern(pattern: str) -> Glob:
    """Compile ``pattern`` to a :class:`Glob` to ``fullmatch`` against *normalized* paths.

    Use :func:`matches` unless you normalize paths yourself. Results are
    cached. Raises ``ValueError`` for an invalid pattern.
    """
    normalized = normalize(pattern)
    try:
        return _compile(normalized)
    except ValueError as error:
        raise ValueError(f"{error} in pattern {pattern!r}") from None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(normalized: str) -> Glob:
    """compile_pattern() for a normalized pattern, cached."""
    _translate(normalized)  # the same errors as ever (a reversed range), whatever the matcher
    return Glob(normalized)


# A segment token: a literal character, any one character ("?"), a class (negated, members, ranges), or "*".
_STAR, _ANY = "*", "?"
_Token = tuple[str, object]


class Glob:
    """A compiled pattern: ``fullmatch(path)`` tells whether it matches a normalized path, in time linear in both.

    Patterns come from the model under test and paths from the agent's own
    commands: a backtracking regular expression of ``/tmp/*a*a*a...*b`` costs
    exponential time against ``/tmp/aaa...``, and Python's ``re`` holds the
    interpreter while it works, which would stop the whole engine. This
    matcher is the classic wildcard algorithm (greedy, with one point to
    return to for the last ``*``), used within a segment for ``*`` and across
    segments for ``**``: at most (pattern length x path length) steps.
    """

    __slots__ = ("_only_globstars", "_segments", "pattern")

    def __init__(self, normalized: str) -> None:
        self.pattern = normalized
        segments: list[list[_Token] | None] = []  # None: a '**' segment
        for segment in normalized.split("/")[1:] if normalized != "/" else []:
            segments.append(None if len(segment) >= 2 and set(segment) == {"*"} else _tokens(segment))
        self._segments = segments
        self._only_globstars = all(segment is None for segment in segments)

    def fullmatch(self, path: str) -> bool | None:
        """True when the whole normalized ``path`` matches, else None (as ``re.Pattern.fullmatch`` tests truth)."""
        if path == "/":
            if self._only_globstars:
                return True
            names = [""]  # as the regex form had it: a lone segment that can be empty ('/*') matches the root
        else:
            names = path.split("/")[1:]
        pattern = self._segments
        p = n = 0
        star_p, star_n = -1, 0
        while n < len(names):
            if p < len(pattern) and pattern[p] is None:
                star_p, star_n = p, n
                p += 1
            elif p < len(pattern) and _segment_matches(pattern[p], names[n]):  # type: ignore[arg-type]
                p += 1
                n += 1
            elif star_p >= 0:
                star_n += 1
                p, n = star_p + 1, star_n
            else:
                return None
        while p < len(pattern) and pattern[p] is None:
            p += 1
        return True if p == len(pattern) else None

    def __repr__(self) -> str:
        return f"Glob({self.pattern!r})"


def _tokens(segment: str) -> list[_Token]:
    """One pattern segment as tokens (see :class:`Glob`); a run of stars glued to text is one ``*``."""
    tokens: list[_Token] = []
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            while i < n and segment[i] == "*":
                i += 1
            tokens.append((_STAR, None))
            continue
        if char == "?":
            tokens.append((_ANY, None))
        elif char == "[":
            parsed = _class_members(segment, i)
            if parsed is None:
                tokens.append(("=", char))
            else:
                members, i = parsed
                tokens.append(("[", members))
                continue
        else:
            tokens.append(("=", char))
        i += 1
    return tokens


def _class_members(segment: str, start: int) -> tuple[tuple[bool, list[tuple[str, str]]], int] | None:
    """The bracket expression at ``segment[start]`` as (negated, [(low, high), ...]) and the index after it."""
    i = start + 1
    negate = i < len(segment) and segment[i] in "!^"
    if negate:
        i += 1
    body_start = i
    if i < len(segment) and segment[i] == "]":
        i += 1
    close = segment.find("]", i)
    if close == -1:
        return None
    body = segment[body_start:close]
    ranges: list[tuple[str, str]] = []
    j = 0
    while j < len(body):
        if j + 2 < len(body) and body[j + 1] == "-":
            ranges.append((body[j], body[j + 2]))
            j += 3
        else:
            ranges.append((body[j], body[j]))
            j += 1
    return (negate, ranges), close + 1


def _token_matches(token: _Token, char: str) -> bool:
    kind, value = token
    if kind == _ANY:
        return True
    if kind == "=":
        return char == value
    negate: bool
    ranges: list[tuple[str, str]]
    negate, ranges = value  # type: ignore[misc]
    return any(low <= char <= high for low, high in ranges) is not negate


def _segment_matches(tokens: list[_Token], name: str) -> bool:
    """Whether one path segment matches one pattern segment's tokens: linear-time wildcard matching."""
    t = c = 0
    star_t, star_c = -1, 0
    while c < len(name):
        if t < len(tokens) and tokens[t][0] == _STAR:
            star_t, star_c = t, c
            t += 1
        elif t < len(tokens) and _token_matches(tokens[t], name[c]):
            t += 1
            c += 1
        elif star_t >= 0:
            star_c += 1
            t, c = star_t + 1, star_c
        else:
            return False
    while t < len(tokens) and tokens[t][0] == _STAR:
        t += 1
    return t == len(tokens)


def matches(pattern: str, path: str) -> bool:
    """Whether ``pattern`` matches ``path``; both are normalized first.

    Raises ``ValueError`` if either is invalid.
    """
    return compile_pattern(pattern).fullmatch(normalize(path)) is not None


def expand(patterns: Iterable[str], universe: Iterable[str]) -> set[str]:
    """The normalized paths of ``universe`` matched by at least one pattern.

    Expansion never invents paths: a literal pattern yields its path only if
    the universe holds it. Raises ``ValueError`` for an invalid pattern or path.
    """
    compiled = [compile_pattern(pattern) for pattern in patterns]
    found: set[str] = set()
    for path in universe:
        path = normalize(path)
        if any(regex.fullmatch(path) for regex in compiled):
            found.add(path)
    return found


def literal_prefix(pattern: str) -> str:
    """The directory part of a pattern before its first wildcard (the whole path for a literal; ``/`` at least).

    Every path the pattern matches lies at or below it.
    """
    head = []
    for segment in normalize(pattern).split("/")[1:]:
        if any(ch in segment for ch in "*?["):
            break
        head.append(segment)
    return "/" + "/".join(head)


def within(roots: Iterable[str], path: str) -> bool:
    """Whether ``path`` is one of ``roots`` or lies below one.

    Roots are patterns: ``path`` is within a root when the root matches it or
    any of its ancestors, so the literal root ``/app`` holds ``/app/x/y`` and
    the root ``/home/*/.cache`` holds ``/home/u/.cache/pip``.
    """
    path = normalize(path)
    compiled = [compile_pattern(root) for root in roots]
    if not compiled:
        return False
    candidates = [path]
    while path != "/":
        path = path.rsplit("/", 1)[0] or "/"
        candidates.append(path)
    return any(regex.fullmatch(candidate) for regex in compiled for candidate in candidates)


def _translate(pattern: str) -> tuple[str, bool]:
    """Turn a normalized pattern into (regex source, is literal)."""
    segments = pattern.split("/")[1:] if pattern != "/" else []
    pieces: list[str] = []
    literal = True
    only_globstars = True
    for segment in segments:
        if set(segment) == {"*"} and len(segment) >= 2:
            pieces.append(_GLOBSTAR)
            literal = False
            continue
        only_globstars = False
        piece, segment_literal = _translate_segment(segment)
        pieces.append("/" + piece)
        literal = literal and segment_literal
    body = "".join(pieces)
    if only_globstars:
        # A pattern of nothing but '**' segments (or "/" itself) can match zero
        # segments, which as a path is the root "/".
        return f"(?:/|{body})", literal
    return body, literal


def _translate_segment(segment: str) -> tuple[str, bool]:
    """Translate one path segment (no '/') into regex source and a literal flag."""
    out: list[str] = []
    literal = True
    i, n = 0, len(segment)
    while i < n:
        char = segment[i]
        if char == "*":
            while i < n and segment[i] == "*":  # '**' glued to text is just '*'
                i += 1
            out.append("[^/]*")
            literal = False
            continue
        if char == "?":
            out.append("[^/]")
            literal = False
        elif char == "[":
            parsed = _translate_class(segment, i)
            if parsed is None:
                out.append(re.escape(char))
            else:
                regex, i = parsed
                out.append(regex)
                literal = False
                continue
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out), literal


def _translate_class(segment: str, start: int) -> tuple[str, int] | None:
    """Translate the bracket expression at ``segment[start]``.

    Returns (regex, index after the closing ']'), or None when there is no
    closing bracket, in which case the '[' is literal text.
    """
    parsed = _class_members(segment, start)
    if parsed is None:
        return None
    (negate, ranges), end = parsed
    items: list[str] = []
    for low, high in ranges:
        if low > high:
            raise ValueError(f"empty character range {low}-{high}")
        items.append(re.escape(low) if low == high else f"{re.escape(low)}-{re.escape(high)}")
    # A negated class must still stay inside one segment.
    regex = f"[^/{''.join(items)}]" if negate else f"[{''.join(items)}]"
    return regex, end
