"""Property-based: whatever the mutation, the validator answers 0 or 1 with a message, never crashes."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK, examples, make_bundle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.bundle import ROWS_FILE, dump_row, seal_bundle, zip_bundle
from assay.cli import main
from assay.documents import load_document

LINE = re.compile(r"^\S[^\n]*?(:\d+)?: .+$")
_CODES: list[int] = []
SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


def _answer(capsys, *paths: Path, extra: tuple[str, ...] = ()) -> int:
    code = main(["validate", *extra, *map(str, paths)])
    out, err = capsys.readouterr()
    assert code in (0, 1), (code, out, err)
    if code == 1:
        lines = out.splitlines()
        assert lines, err
        assert all(LINE.match(line) for line in lines), lines
    else:
        assert out == "" and "valid" in err
    _CODES.append(code)
    return code


@pytest.fixture(scope="module")
def base_bundle(tmp_path_factory):
    from assay.plugins import load_plugins

    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return make_bundle(tmp_path_factory.mktemp("base") / "bundle", host.registry, seeds=[0])


CASES = sorted((EXAMPLE_PACK / "cases").glob("*.yaml"))


def _mutate(data, path: list, choice: int, replacement):
    """Drop, replace or retype the member at a path chosen by index arithmetic."""
    target = data
    for step in path[:-1]:
        target = target[step]
    key = path[-1]
    if choice == 0:
        del target[key]
    else:
        target[key] = replacement


def _paths(value, prefix=()):
    yield list(prefix)
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


@SETTINGS
@given(
    case_index=st.integers(0, len(CASES) - 1),
    pick=st.integers(0, 10**6),
    choice=st.integers(0, 2),
    replacement=json_values,
    as_json=st.booleans(),
)
def test_mutated_case_files(capsys, case_index, pick, choice, replacement, as_json):
    data = load_document(CASES[case_index]).data
    paths = [p for p in _paths(data) if p]
    _mutate(data, paths[pick % len(paths)], choice, replacement)
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / ("case.json" if as_json else "case.yaml")
        if as_json:
            target.write_text(json.dumps(data))
        else:
            from ruamel.yaml import YAML

            with open(target, "w") as handle:
                YAML(typ="safe", pure=True).dump(data, handle)
        _answer(capsys, target, extra=("--schema", "case"))


@SETTINGS
@given(file_pick=st.integers(0, 10**6), offset=st.integers(0, 10**6), byte=st.integers(0, 255), truncate=st.booleans())
def test_flipped_or_truncated_pack_files(capsys, file_pick, offset, byte, truncate):
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "pack"
        shutil.copytree(EXAMPLE_PACK, root)
        files = sorted(p for p in root.rglob("*") if p.is_file())
        target = files[file_pick % len(files)]
        data = bytearray(target.read_bytes())
        position = offset % max(len(data), 1)
        if truncate:
            data = data[:position]
        elif data:
            data[position] = byte
        target.write_bytes(bytes(data))
        _answer(capsys, root)


@SETTINGS
@given(
    row_pick=st.integers(0, 10**6),
    pick=st.integers(0, 10**6),
    choice=st.integers(0, 2),
    replacement=json_values,
    reseal=st.booleans(),
)
def test_mutated_bundle_rows(capsys, base_bundle, row_pick, pick, choice, replacement, reseal):
    with tempfile.TemporaryDirectory() as scratch:
        bundle = Path(scratch) / "bundle"
        shutil.copytree(base_bundle, bundle)
        rows = [json.loads(line) for line in (bundle / ROWS_FILE).read_text().splitlines()]
        row = rows[row_pick % len(rows)]
        paths = [p for p in _paths(row) if p]
        _mutate(row, paths[pick % len(paths)], choice, replacement)
        (bundle / ROWS_FILE).write_bytes(b"".join(dump_row(r) for r in rows))
        if reseal:
            seal_bundle(bundle, pack=json.loads((bundle / "bundle.json").read_text())["pack"], row_count=len(rows))
        _answer(capsys, bundle, extra=("--pack", str(EXAMPLE_PACK)))


@SETTINGS
@given(
    file_pick=st.integers(0, 10**6),
    offset=st.integers(0, 10**6),
    byte=st.integers(0, 255),
    mode=st.sampled_from(["flip", "truncate", "zip-flip", "zip-truncate"]),
)
def test_flipped_or_truncated_bundles_and_archives(capsys, base_bundle, file_pick, offset, byte, mode):
    with tempfile.TemporaryDirectory() as scratch:
        bundle = Path(scratch) / "bundle"
        shutil.copytree(base_bundle, bundle)
        if mode.startswith("zip"):
            target = Path(scratch) / "bundle.zip"
            zip_bundle(bundle, target)
        else:
            files = sorted(p for p in bundle.rglob("*") if p.is_file())
            target = files[file_pick % len(files)]
        data = bytearray(target.read_bytes())
        position = offset % max(len(data), 1)
        if mode.endswith("truncate"):
            data = data[:position]
        elif data:
            data[position] = byte
        target.write_bytes(bytes(data))
        _answer(capsys, target if mode.startswith("zip") else bundle, extra=("--pack", str(EXAMPLE_PACK)))


@SETTINGS
@given(
    drop=st.lists(st.integers(0, 10**6), max_size=3),
    repeat=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 50)), max_size=3),
    point=st.lists(
        st.tuples(
            st.sampled_from(["run_manifest", "rows", "metrics"]),
            st.sampled_from(
                ["missing.json", "rows.jsonl", "run.json", "metrics.json", "../outside.json", "bundle.json"]
            ),
        ),
        max_size=2,
    ),
    delete=st.lists(st.integers(0, 10**6), max_size=2),
    zipped=st.booleans(),
)
def test_manifests_with_missing_and_repeated_members(capsys, base_bundle, drop, repeat, point, delete, zipped):
    """bundle.json's files list and document paths edited as a cheater would: always an answer, never a crash."""
    with tempfile.TemporaryDirectory() as scratch:
        bundle = Path(scratch) / "bundle"
        shutil.copytree(base_bundle, bundle)
        manifest = json.loads((bundle / "bundle.json").read_text())
        files = manifest["files"]
        for pick in drop:
            if files:
                files.pop(pick % len(files))
        for pick, times in repeat:
            if files:
                files.extend(dict(files[pick % len(files)]) for _ in range(times))
        before = {member: manifest[member]["path"] for member, _ in point}
        for member, path in point:
            manifest[member]["path"] = path
        moved = any(manifest[member]["path"] != path for member, path in before.items())
        present = sorted(p for p in bundle.rglob("*") if p.is_file() and p.name != "bundle.json")
        for pick in delete:
            if present:
                present.pop(pick % len(present)).unlink()
        (bundle / "bundle.json").write_text(json.dumps(manifest))
        target = bundle
        if zipped:
            target = Path(scratch) / "bundle.zip"
            zip_bundle(bundle, target)
        code = _answer(capsys, target, extra=("--pack", str(EXAMPLE_PACK)))
        if drop or repeat or moved or delete:
            assert code == 1  # every such edit contradicts the seal or leaves a document unsealed


def test_mutations_exercised_both_answers():
    """Runs last in this module: the mutations above produced valid and invalid inputs alike."""
    if len(_CODES) < examples(60):
        pytest.skip("run together with the property tests above")
    assert _CODES.count(0) > 0 and _CODES.count(1) > 0
