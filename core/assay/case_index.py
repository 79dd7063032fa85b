"""A pack manifest's case list, read a case at a time and held compactly.

A generated pack may list hundreds of thousands of cases. Parsed whole, each
manifest entry (id, family, path, sha256, size) is a dict of five objects,
over half a kilobyte, and the parse itself holds the text besides: a pack of
200,000 cases took 150 MB to hold and 220 MB to read. What a run, a
validation or a report needs of the list is an entry by id and the pack's
digest; here each entry of the usual shape is kept in about 150 bytes (its id,
a family number, a path pattern, the hash as 32 bytes, the size) and made
again, exactly, when asked for. The manifest's JSON text is read a slice at a
time with the strict parser's own rules, an entry at a time.

Anything unusual (a YAML manifest, an entry of another shape, a manifest
this reader does not follow) is kept as parsed, or read the ordinary way:
what the index gives is always exactly what the whole parse gives.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .documents import (
    MAX_DOCUMENT_BYTES,
    DocumentError,
    check_tree,
    strict_json_decoder,
)
from .hashing import canonical_json

__all__ = ["CaseIndex", "ManifestParts", "parts_of", "read_manifest_parts"]

#: How much of the manifest's text is read at a time.
_CHUNK = 1 << 20

_WHITESPACE = " \t\n\r"

_HASH_PREFIX = "sha256:"
_HEX = frozenset("0123456789abcdef")

#: Path patterns an entry's path may follow (``cases/<id><suffix>``), by number; 0 is a path kept as given.
_SUFFIXES = ("", ".json", ".yaml", ".yml")


class CaseIndex(Mapping[str, Mapping[str, Any]]):
    """Case id to its manifest entry, as the whole parse would give it (a new dict each time it is asked for).

    ``entries()`` gives every element of the manifest's case list in order,
    ids or not (what the pack's digest is over).
    """

    def __init__(self) -> None:
        self._ids: list[str | None] = []  # per element; None for one kept whole
        # id -> its last element (a later duplicate wins, as in a dict). None while every element is of the usual
        # shape and the ids rise: then an id is found by bisection in _ids, without a table of every case (the
        # usual manifest is sorted; a table of a million ids would be a third of the index).
        self._row: dict[str, int] | None = None
        self._families: list[str] = []
        self._family_number: dict[str, int] = {}
        self._family = bytearray()
        self._pattern = bytearray()
        self._paths: dict[int, str] = {}
        self._hashes = bytearray()
        self._sizes = array("q")
        self._whole: dict[int, Any] = {}  # elements of another shape, as parsed

    def add(self, entry: Any) -> None:
        """Append one element of the case list."""
        element = len(self._ids)
        compact = self._compact(entry)
        if compact is None:
            self._ids.append(None)
            self._family.append(0)
            self._pattern.append(0)
            self._hashes.extend(bytes(32))
            self._sizes.append(0)
            self._whole[element] = entry
            if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                self._table()[entry["id"]] = element
            else:
                self._table()
            return
        case_id, family, pattern, path, digest, size = compact
        if self._row is None and self._ids and not self._ids[-1] < case_id:  # type: ignore[operator]
            self._table()
        self._ids.append(case_id)
        self._family.append(family)
        self._pattern.append(pattern)
        if pattern == 0:
            self._paths[element] = path
        self._hashes.extend(digest)
        self._sizes.append(size)
        if self._row is not None:
            self._row[case_id] = element

    def _table(self) -> dict[str, int]:
        """The id table, made from the elements so far the first time an element breaks the rising order."""
        if self._row is None:
            self._row = {case_id: element for element, case_id in enumerate(self._ids) if case_id is not None}
        return self._row

    def _element(self, case_id: object) -> int:
        """The element of ``case_id``; KeyError when the index has no such id."""
        if self._row is not None:
            return self._row[case_id]  # type: ignore[index]
        if isinstance(case_id, str):
            ids = self._ids
            element = bisect_left(ids, case_id)  # type: ignore[type-var]
            if element < len(ids) and ids[element] == case_id:
                return element
        raise KeyError(case_id)

    def _compact(self, entry: Any) -> tuple[str, int, int, str, bytes, int] | None:
        """The entry in compact form, or None when it is not of the usual shape (then it is kept whole)."""
        if not isinstance(entry, dict) or entry.keys() != {"id", "family", "path", "sha256", "size"}:
            return None
        case_id, family, path, digest, size = (entry[k] for k in ("id", "family", "path", "sha256", "size"))
        if not (isinstance(case_id, str) and isinstance(family, str) and isinstance(path, str)):
            return None
        if not (isinstance(digest, str) and len(digest) == 71 and digest.startswith(_HASH_PREFIX)):
            return None
        if not _HEX.issuperset(digest[7:]) or type(size) is not int or not 0 <= size < 1 << 62:
            return None
        number = self._family_number.get(family)
        if number is None:
            if len(self._families) >= 255:
                return None
            number = self._family_number[family] = len(self._families)
            self._families.append(family)
        pattern = next(
            (i for i, suffix in enumerate(_SUFFIXES) if i and path == f"cases/{case_id}{suffix}"),
            0,
        )
        return case_id, number, pattern, path, bytes.fromhex(digest[7:]), size

    def _entry(self, element: int) -> Any:
        if element in self._whole:
            return self._whole[element]
        case_id = self._ids[element]
        assert case_id is not None
        pattern = self._pattern[element]
        return {
            "id": case_id,
            "family": self._families[self._family[element]],
            "path": self._paths[element] if pattern == 0 else f"cases/{case_id}{_SUFFIXES[pattern]}",
            "sha256": _HASH_PREFIX + self._hashes[32 * element : 32 * element + 32].hex(),
            "size": self._sizes[element],
        }

    def entries(self) -> Iterator[Any]:
        """Every element of the case list, in order, as parsed (dicts made afresh)."""
        for element in range(len(self._ids)):
            entry = self._entry(element)
            yield _copy(entry) if element in self._whole else entry

    def __getitem__(self, case_id: str) -> Mapping[str, Any]:
        element = self._element(case_id)
        entry: Mapping[str, Any] = _copy(self._entry(element)) if element in self._whole else self._entry(element)
        return entry

    def family_of(self, case_id: str) -> Any:
        """A case's family (None when its entry names none), without making its entry."""
        element = self._element(case_id)
        if element in self._whole:
            return self._whole[element].get("family")
        return self._families[self._family[element]]

    def __contains__(self, case_id: object) -> bool:
        if self._row is not None:
            return case_id in self._row
        try:
            self._element(case_id)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._row) if self._row is not None else iter(self._ids)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._row) if self._row is not None else len(self._ids)

    @property
    def elements(self) -> int:
        """How many elements the case list has (with those that have no id)."""
        return len(self._ids)


def _copy(value: Any) -> Any:
    """A deep copy of parsed JSON (so a caller's change never reaches the index)."""
    return json.loads(json.dumps(value))


class ManifestParts:
    """A pack manifest as :func:`read_manifest_parts` reads it: its members, the case list as a
    :class:`CaseIndex`."""

    def __init__(self, members: dict[str, Any], cases: CaseIndex, has_cases: bool) -> None:
        self.members = members  # every member but ``cases``
        self.cases = cases
        self.has_cases = has_cases  # whether the manifest has a ``cases`` member (a list)

    def digest(self) -> str:
        """The pack digest (canonical JSON of the manifest without ``digest``, then sha256), over the entries one
        at a time: exactly :func:`assay.packs.compute_digest` of the whole manifest."""
        hasher = hashlib.sha256()
        members = {k: v for k, v in self.members.items() if k != "digest"}
        names = sorted([*members, *(["cases"] if self.has_cases else [])], key=lambda k: k.encode("utf-16-be"))
        hasher.update(b"{")
        for position, name in enumerate(names):
            if position:
                hasher.update(b",")
            hasher.update(canonical_json(name) + b":")
            if name != "cases":
                hasher.update(canonical_json(members[name]))
                continue
            hasher.update(b"[")
            for index, entry in enumerate(self.cases.entries()):
                if index:
                    hasher.update(b",")
                hasher.update(canonical_json(entry))
            hasher.update(b"]")
        hasher.update(b"}")
        return "sha256:" + hasher.hexdigest()


def parts_of(manifest: Mapping[str, Any]) -> ManifestParts:
    """The parts of a manifest already parsed whole."""
    index = CaseIndex()
    cases = manifest.get("cases")
    if isinstance(cases, list):
        for entry in cases:
            index.add(entry)
    members = {k: v for k, v in manifest.items() if k != "cases" or not isinstance(v, list)}
    return ManifestParts(members, index, isinstance(cases, list))


class _Text:
    """The manifest's text, decoded a chunk at a time; ``text[start:]`` from ``start`` is what has been read."""

    def __init__(self, path: Path) -> None:
        self._handle = open(path, "rb")  # noqa: SIM115 - closed by close()
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.text, self.start, self.ended, self._read, self._first = "", 0, False, 0, True

    def more(self) -> bool:
        """Read another chunk; False at the end of the file."""
        if self.ended:
            return False
        raw = self._handle.read(_CHUNK)
        self._read += len(raw)
        if self._read > MAX_DOCUMENT_BYTES:
            raise DocumentError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB, so it was not read")
        try:
            chunk = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError:
            raise DocumentError("not UTF-8 text") from None
        if self._first and chunk:
            self._first = False
            chunk = chunk.removeprefix("\ufeff")
        if self.text and self.start > _CHUNK:  # let go of what has been parsed
            self.text, self.start = self.text[self.start :], 0
        self.text += chunk
        self.ended = not raw
        return bool(raw)

    def close(self) -> None:
        """Close the file."""
        self._handle.close()


class _Reader:
    """JSON values read from a :class:`_Text` with the strict parser's rules, one at a time."""

    def __init__(self, text: _Text) -> None:
        self._text = text
        self._decoder = strict_json_decoder()

    def char(self) -> str:
        """The next character that is not whitespace (without taking it); empty at the end."""
        t = self._text
        while True:
            while t.start < len(t.text) and t.text[t.start] in _WHITESPACE:
                t.start += 1
            if t.start < len(t.text) or not t.more():
                return t.text[t.start] if t.start < len(t.text) else ""

    def take(self, expected: str) -> None:
        """Take one structural character."""
        if self.char() != expected:
            raise DocumentError(f"malformed JSON: expected {expected!r}")
        self._text.start += 1

    def value(self, depth: int) -> Any:
        """The next value (at ``depth`` in the document), parsed whole."""
        self.char()
        t = self._text
        while True:
            try:
                value, end = self._decoder.raw_decode(t.text, t.start)
            except json.JSONDecodeError as exc:
                # A value cut by the end of what was read is read on; at the end of the file it is malformed.
                if t.more():
                    continue
                raise DocumentError(f"malformed JSON: {exc.msg}") from None
            except RecursionError:
                raise DocumentError("malformed JSON: nested too deep") from None
            except ValueError as exc:
                raise DocumentError(f"malformed JSON: {exc}") from None
            # A number may have been cut by the end of what was read ("12" of "123"): read on and parse it again.
            if end == len(t.text) and not t.ended and t.more():
                continue
            t.start = end
            check_tree(value, surrogates=True, depth=depth)
            return value


def read_manifest_parts(path: Path) -> ManifestParts:
    """A JSON pack manifest's parts, its case list read an entry at a time.

    Raises :class:`~assay.documents.DocumentError` for anything the strict
    whole parse would refuse (and, conservatively, for a manifest that is not
    an object): the caller then reads it the ordinary way, which says why.
    """
    text = _Text(path)
    try:
        reader = _Reader(text)
        reader.take("{")
        members: dict[str, Any] = {}
        index, has_cases = CaseIndex(), False
        if reader.char() == "}":
            reader.take("}")
        else:
            while True:
                if reader.char() != '"':
                    raise DocumentError("malformed JSON: expected a member name")
                name = reader.value(1)
                if name in members or (name == "cases" and has_cases):
                    raise DocumentError(f"malformed JSON: duplicate key {name!r}")
                reader.take(":")
                if name == "cases" and reader.char() == "[":
                    reader.take("[")
                    has_cases = True
                    if reader.char() == "]":
                        reader.take("]")
                    else:
                        while True:
                            index.add(reader.value(3))
                            if reader.char() == ",":
                                reader.take(",")
                                continue
                            reader.take("]")
                            break
                else:
                    members[name] = reader.value(2)
                if reader.char() == ",":
                    reader.take(",")
                    continue
                reader.take("}")
                break
        if reader.char():
            raise DocumentError("malformed JSON: extra data after the manifest")
        return ManifestParts(members, index, has_cases)
    finally:
        text.close()
