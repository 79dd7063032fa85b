"""Canonical hashing and source-located document parsing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from assay.documents import DocumentError, json_pointer_lines, parse_json_text, parse_yaml_text
from assay.hashing import canonical_json, digest_bytes, digest_document, is_digest


def test_canonical_json_follows_rfc8785():
    # RFC 8785 sorts keys by UTF-16 code units and writes numbers in ECMAScript form.
    assert (
        canonical_json({"b": 1, "a": [1.0, "x"], "\u20ac": 2, "\r": 3}) == '{"\\r":3,"a":[1,"x"],"b":1,"€":2}'.encode()
    )
    assert canonical_json(1e21) == b"1e+21" and canonical_json(0.000001) == b"0.000001"


def test_digest_format_and_stability():
    assert digest_bytes(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert digest_document({"a": 1, "b": 2}) == digest_document({"b": 2, "a": 1})
    assert digest_document({"a": 1}) != digest_document({"a": 2})
    assert is_digest(digest_bytes(b"")) and not is_digest("sha256:ABC") and not is_digest(None)


def test_yaml_lines_and_plain_data():
    doc = parse_yaml_text("a:\n  - 1\n  - b: x\nc: 2026-01-01\nd: 1.5\n", Path("x.yaml"))
    assert doc.data == {"a": [1, {"b": "x"}], "c": "2026-01-01", "d": 1.5}
    assert (doc.line_of("/a/1/b"), doc.line_of("/c"), doc.line_of("/a/1/missing")) == (3, 4, 3)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [("a: [\nb: c\n", 3, "malformed YAML"), ("a: 1\na: 2\n", 2, "duplicate key"), ("? [1]\n: x\n", 1, "not a string")],
)
def test_yaml_errors(text, line, fragment):
    with pytest.raises(DocumentError) as info:
        parse_yaml_text(text, Path("x.yaml"))
    assert fragment in info.value.message and info.value.line == line


def test_json_lines():
    text = '{\n  "a": [\n    1,\n    {"b": "x\\"y"}\n  ],\n  "c": null\n}'
    doc = parse_json_text(text, Path("x.json"))
    assert doc.line_of("/a/1/b") == 4 and doc.line_of("/c") == 6
    assert json_pointer_lines('{"a/b": {"~": 1}}') == {"": 1, "/a~1b": 1, "/a~1b/~0": 1}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [('{"a": 1,\n"a": 2}', "duplicate key"), ('{"a": NaN}', "NaN"), ("{\n\n  oops", "malformed JSON")],
)
def test_json_errors(text, fragment):
    with pytest.raises(DocumentError) as info:
        parse_json_text(text, Path("x.json"))
    assert fragment in info.value.message
