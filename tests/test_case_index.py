"""The compact case index: a pack manifest read an entry at a time gives exactly what the whole parse gives."""

from __future__ import annotations

import json

import pytest

import assay.case_index as case_index
from assay.case_index import read_manifest_parts
from assay.documents import DocumentError, load_document
from assay.packs import Pack, compute_digest


def _manifest(cases, **members):
    document = {"spec_version": "1.0", "name": "tiny", "version": "1.0.0", "cases": cases, "fixtures": [], **members}
    document["digest"] = compute_digest(document)
    return document


def _entry(i, **changes):
    entry = {"id": f"c-{i:03d}", "family": ["DPI", "IPI"][i % 2], "path": f"cases/c-{i:03d}.json",
             "sha256": "sha256:" + f"{i:064x}", "size": 100 + i}  # fmt: skip
    return {**entry, **changes}


ODD = [
    _entry(0),
    _entry(1, path="elsewhere/one.yaml"),  # a path of no pattern
    _entry(2, extra={"nested": [1, 2]}),  # another shape: kept whole
    _entry(3, sha256="sha256:ABC"),  # not a hash of the usual form
    _entry(4, size=2.5),
    {"no": "id"},
    "not an object",
    _entry(0, family="TRI"),  # a later duplicate id wins, as in a dict
    _entry(5, path="cases/c-005.yaml", family="caf\u00e9 \U0001f600"),
]


RISING = [_entry(i) for i in range(6)]  # the usual manifest: ids found by bisection, no table of them
FALLING = [_entry(i) for i in (4, 5, 2, 3)]  # an id below the one before: the table is made from there
TWICE = [_entry(1), _entry(2), _entry(2, family="TRI"), _entry(3)]  # a later duplicate wins, as in a dict


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
@pytest.mark.parametrize("cases", [ODD, RISING, FALLING, TWICE], ids=["odd", "rising", "falling", "twice"])
def test_read_in_parts_equals_the_whole_parse(tmp_path, monkeypatch, chunk, cases):
    monkeypatch.setattr(case_index, "_CHUNK", chunk)  # values cut anywhere by the end of what was read
    document = _manifest(cases, description="x" * 300, license="CC0-1.0", size_limit=12345678)
    path = tmp_path / "pack.json"
    path.write_text("\ufeff" + json.dumps(document, indent=1, ensure_ascii=False), encoding="utf-8")
    whole = load_document(path).data
    parts = read_manifest_parts(path)
    assert list(parts.cases.entries()) == whole["cases"]
    assert {k: v for k, v in whole.items() if k != "cases"} == parts.members
    expected = {entry["id"]: entry for entry in whole["cases"] if isinstance(entry, dict) and "id" in entry}
    assert dict(parts.cases) == expected and list(parts.cases) == list(expected)
    assert len(parts.cases) == len(expected) and all(case_id in parts.cases for case_id in expected)
    assert "c-999" not in parts.cases and 3 not in parts.cases and None not in parts.cases
    assert all(parts.cases.family_of(case_id) == entry.get("family") for case_id, entry in expected.items())
    with pytest.raises(KeyError):
        parts.cases["c-999"]
    assert parts.digest() == compute_digest(whole) == whole["digest"]


def test_an_entry_given_out_cannot_change_the_index(tmp_path):
    path = tmp_path / "pack.json"
    path.write_text(json.dumps(_manifest(ODD)))
    parts = read_manifest_parts(path)
    parts.cases["c-002"]["extra"]["nested"].append(3)
    parts.cases["c-001"]["path"] = "../../etc/passwd"
    assert parts.cases["c-002"]["extra"] == {"nested": [1, 2]} and parts.cases["c-001"]["path"] == "elsewhere/one.yaml"
    assert parts.digest() == compute_digest(json.loads(path.read_text()))


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "a", "cases": [{"id": "x", "id": "y"}]}',  # a duplicate key within an entry
        '{"name": "a", "cases": [], "cases": []}',  # a duplicate member
        '{"name": "a", "name": "b", "cases": []}',
        '{"name": "a", "cases": [NaN]}',
        '{"name": "a", "cases": [{"size": 9007199254740993}]}',  # not exact as a double
        '{"name": "a", "cases": [{"id": "\\ud800"}]}',  # a lone surrogate
        '{"name": "a", "cases": [' + "[" * 200 + "]" * 200 + "]}",  # nested too deep
        '{"name": "a", "cases": [{"id": "x"}]} trailing',
        '{"name": "a", "cases": [{"id": "x"}',  # cut short
        '{"name": "a", "cases": [{"id": "x"},]}',
        '["not", "an", "object"]',
        "",
    ],
)
def test_what_the_strict_parse_refuses_is_refused(tmp_path, monkeypatch, text):
    monkeypatch.setattr(case_index, "_CHUNK", 5)
    path = tmp_path / "pack.json"
    path.write_text(text)
    with pytest.raises(DocumentError):
        read_manifest_parts(path)


def test_a_manifest_read_in_parts_falls_back_to_the_whole_parse_for_its_error(tmp_path):
    (tmp_path / "pack.json").write_text('{"name": "a", "version": "1", "cases": [{"id": "x", "id": "y"}]}')
    pack = Pack.from_directory(tmp_path)
    assert pack.name == "unreadable:" + str(tmp_path)
    with pytest.raises(Exception, match="duplicate key"):
        pack.case_index()


@pytest.mark.slow
def test_the_installed_packs_read_in_parts_as_whole(host):
    """Every pack the suite has, JSON or YAML: the same entries, the same digest, and an intact pack stays intact."""
    from conftest import EXAMPLE_PACK

    packs = [Pack.from_directory(EXAMPLE_PACK), *host.registry.items("packs").values()]
    for pack in packs:
        whole = Pack.from_directory(pack.root)
        expected = {e["id"]: e for e in whole.manifest.get("cases", []) if isinstance(e, dict) and "id" in e}
        assert dict(pack.case_index()) == expected, pack.root
        assert pack.parts.digest() == compute_digest(whole.manifest) == pack.claimed_digest
        assert pack.integrity_problem() is None, pack.root
