"""The pieces that keep a run's memory flat: the row log's plan-position index and the plan matrix."""

from __future__ import annotations

import random

import orjson
import pytest

import assay.engine.rowlog as rowlog
from assay.engine.planner import build_plan
from assay.engine.rowlog import RowLog, drop_error_rows
from assay.plan_matrix import PlanMatrix


def _plan(cases=40):
    return build_plan([f"c{i:03d}" for i in range(cases)], ["e1", "e2"], ["D0", "D3"], [0, 1], ["semantic"])


def _row(item, errors=()):
    return {"key": item.key(), "errors": list(errors), "pad": "x" * (item.seed * 37 + 11)}


def test_rows_appended_in_any_order_are_read_back_in_plan_order(tmp_path, monkeypatch):
    monkeypatch.setattr(rowlog, "_WINDOW", 256)  # the window moves back and forth over the log
    plan = _plan()
    items = list(plan.items())
    shuffled = items[:]
    random.Random(4).shuffle(shuffled)
    log = RowLog(tmp_path / "rows.jsonl", plan.position, len(plan))
    for item in shuffled:
        log.append(item.ident(), _row(item))
        log.append(item.ident(), _row(item, ["a second row for the item is ignored"]))
    log.close()
    lines = list(log.lines_in_plan_order())
    assert [orjson.loads(line)["key"] for line in lines] == [item.key() for item in items]
    assert all(line.endswith(b"\n") and not orjson.loads(line)["errors"] for line in lines)
    assert log.count == len(plan) and not list(log.missing())


def test_a_killed_log_resumes_with_each_item_once(tmp_path):
    plan = _plan()
    items = list(plan.items())
    path = tmp_path / "rows.jsonl"
    log = RowLog(path, plan.position, len(plan))
    for item in items[:50]:
        log.append(item.ident(), _row(item))
    log.close()
    with open(path, "ab") as handle:
        handle.write(b'{"key": {"case_id": "c0')  # killed mid-write
    resumed = RowLog(path, plan.position, len(plan))
    assert resumed.dropped_partial and resumed.count == 50
    assert [plan.item_at(p) for p in resumed.missing()] == items[50:]
    for item in items:
        resumed.append(item.ident(), _row(item))
    resumed.close()
    assert path.read_bytes().count(b"\n") == len(plan)
    assert [orjson.loads(line)["key"] for line in resumed.lines_in_plan_order()] == [i.key() for i in items]


def test_error_rows_are_dropped_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(rowlog, "_CHUNK", 64)
    plan = _plan(5)
    path = tmp_path / "rows.jsonl"
    log = RowLog(path, plan.position, len(plan))
    items = list(plan.items())
    for n, item in enumerate(items):
        log.append(item.ident(), _row(item, ["boom"] if n % 3 == 0 else []))
    log.close()
    kept = [line for line in path.read_bytes().splitlines(keepends=True) if not orjson.loads(line)["errors"]]
    assert drop_error_rows(path) == len(items) - len(kept)
    assert path.read_bytes() == b"".join(kept)


def test_positions_are_plan_order_and_invert():
    plan = _plan(7)
    for position, item in enumerate(plan.items()):
        assert plan.position(item.ident()) == position and plan.item_at(position) == item
    assert plan.position(("c999", "e1", "D0", 0, 0, "default")) is None
    assert plan.position(("c001", "e1", "D0", 0, 5, "default")) is None


@pytest.mark.parametrize(
    "axis",
    [["b", "a", "c"], ["a", "b", "c"], [3, 1, 2], [1, 2, 3], ["a", "a", "b"], [0, "x"], range(4)],
)
def test_an_axis_finds_what_a_dict_would(axis):
    """Sorted axes are bisected, the others looked up: either way, a value's place is the one a dict of the
    axis's distinct values gives (1 and 1.0 alike, a string never a number, an unhashable value nowhere)."""
    matrix = PlanMatrix([axis])
    table: dict = {}
    for value in axis:
        table.setdefault(value, len(table))
    for probe in [*axis, 1.0, True, "1", 7, None, "zz", ["list"]]:
        try:
            expected = table.get(probe)
        except TypeError:
            expected = None
        assert matrix.find(0, probe) == expected, probe
    assert [matrix.values_at(p)[0] for p in range(matrix.size)] == list(table)


def test_a_hostile_plan_axis_costs_nothing_to_index():
    matrix = PlanMatrix([["a"], range(10**15)])
    assert matrix.size == 10**15 and matrix.position(("a", 10**15 - 1)) == 10**15 - 1
    assert matrix.position(("a", 10**15)) is None


def test_a_path_is_regular_below_a_root_exactly_when_the_scan_lists_it(tmp_path):
    """The pack integrity check asks of each manifest path what the set of every file would say, without the set."""
    import os

    from assay.packs import is_regular_below, regular_files

    root = tmp_path / "pack"
    (root / "cases" / "deep").mkdir(parents=True)
    (root / "cases" / "a.json").write_text("{}")
    (root / "cases" / "deep" / "b.json").write_text("{}")
    (tmp_path / "outside.json").write_text("{}")
    os.symlink(tmp_path / "outside.json", root / "cases" / "link.json")
    os.symlink(root / "cases" / "deep", root / "cases" / "dirlink")
    os.mkfifo(root / "cases" / "fifo")
    listed = regular_files(root)
    probes = [
        "cases/a.json", "cases/deep/b.json", "cases/link.json", "cases/dirlink/b.json", "cases/fifo", "cases",
        "cases/deep", "./cases/a.json", "cases//a.json", "cases/./a.json", "cases/deep/../a.json", "/cases/a.json",
        "../outside.json", "cases/a.json/", "cases/missing.json", "", "cases/a.json\x00", None, 7, ["cases/a.json"],
    ]  # fmt: skip
    for probe in probes:
        expected = isinstance(probe, str) and probe in listed
        assert is_regular_below(root, probe) == expected, probe
    assert listed == {"cases/a.json", "cases/deep/b.json"}
