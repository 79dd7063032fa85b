"""Reports and comparisons of large bundles: rows read again from a private copy on each walk, never all held."""

from __future__ import annotations

import json
import os
import stat
import tracemalloc
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK, make_bundle

import assay
from assay.components import MetricValue
from assay.errors import AssayError, SpecError
from assay.plugins import load_plugins
from assay.reports import Selector, compare_rows, read_bundle, recompute, render_html, render_markdown, write_html
from assay.reports.rowfile import RowFile, spool_rows


def _lines(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text(encoding="utf-8").splitlines()]


def test_a_row_file_gives_back_each_row_in_order_by_walk_index_and_slice(bundle_dir):
    rows = read_bundle(bundle_dir).rows
    expected = _lines(bundle_dir)
    assert isinstance(rows, RowFile) and len(rows) == len(expected) > 4
    assert list(rows) == expected and list(rows) == expected  # walked twice: read again, the same
    assert rows[0] == expected[0] and rows[-1] == expected[-1] and rows[3] == expected[3]
    assert rows[1:4] == expected[1:4] and rows[::-2] == expected[::-2]
    with pytest.raises(IndexError):
        rows[len(expected)]


def test_blank_lines_are_skipped_and_a_bad_line_is_named(tmp_path):
    source = tmp_path / "rows.jsonl"
    source.write_bytes(b'{"a": 1}\n\n  \n{"a": 2}')  # no final newline on the last line
    rows = spool_rows(source, "bundle/rows.jsonl", lambda row, number: None)
    assert list(rows) == [{"a": 1}, {"a": 2}] and rows[1] == {"a": 2}
    source.write_bytes(b'{"a": 1}\n{"a": \n')
    with pytest.raises(SpecError, match=r"^bundle/rows.jsonl:2: not a JSON row"):
        spool_rows(source, "bundle/rows.jsonl", lambda row, number: None)


def test_a_bundle_changed_after_it_was_read_does_not_change_the_report(bundle_dir, builtins_host):
    """The attack: rows checked against the spec, then swapped on disk before the report walks them again. The
    report reads its own private copy, so it shows what was checked."""
    files = read_bundle(bundle_dir)
    checked = list(files.rows)
    hostile = dict(checked[0], final_output="<script>swapped after the check</script>", errors="not a list")
    (bundle_dir / "rows.jsonl").write_text(json.dumps(hostile) + "\n", encoding="utf-8")
    assert list(files.rows) == checked
    markdown = render_markdown(recompute(files, builtins_host.registry, pack_root=EXAMPLE_PACK))
    assert "swapped after the check" not in markdown and f"| Rows | {len(checked)} |" in markdown


def test_the_private_copy_is_owner_only_and_removed_when_closed(bundle_dir):
    rows = read_bundle(bundle_dir).rows
    assert isinstance(rows, RowFile)
    path = rows._path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    rows.close()
    assert not path.exists() and not path.parent.exists()


def test_a_zip_is_read_into_the_same_rows(bundle_dir, tmp_path):
    from assay.bundle import zip_bundle

    zip_bundle(bundle_dir, tmp_path / "bundle.zip")
    assert list(read_bundle(tmp_path / "bundle.zip").rows) == _lines(bundle_dir)


class _FailingMetric:
    """A labelled test double: a metric plugin that fails on every row it is given."""

    name = "test.fails_on_rows"
    description = "Raises on any row."
    stage = "semantic"

    def accumulate(self, context):
        return self

    def add(self, row):
        raise KeyError("no such member")

    def values(self):
        return [MetricValue(self.name, {}, 0.0, None, 0)]

    def compute(self, rows, context):
        for row in rows:
            self.add(row)
        return self.values()


class _FailingToStart(_FailingMetric):
    """A labelled test double: a metric plugin whose accumulator cannot be made."""

    def accumulate(self, context):
        raise KeyError("no such member")


class _FailingPlugin:
    def __init__(self, metric):
        self.metric = metric

    @assay.hookimpl
    def register_metrics(self, register):
        register(self.metric)


@pytest.mark.parametrize("metric", [_FailingMetric(), _FailingToStart()], ids=["on-a-row", "on-start"])
def test_one_walk_computes_every_metric_and_a_failure_names_its_metric(bundle_dir, metric):
    host = load_plugins(environ={"ASSAY_DISABLE_PLUGIN_AUTOLOAD": "1"})
    host.register(_FailingPlugin(metric), "failing-metric")
    with pytest.raises(AssayError, match=r"metric test\.fails_on_rows cannot be recomputed: KeyError"):
        recompute(read_bundle(bundle_dir), host.registry, pack_root=EXAMPLE_PACK)


def test_the_html_written_a_piece_at_a_time_is_the_rendered_page(bundle_dir, builtins_host, tmp_path):
    data = recompute(read_bundle(bundle_dir), builtins_host.registry, pack_root=EXAMPLE_PACK)
    write_html(tmp_path / "report.html", data)
    assert (tmp_path / "report.html").read_text(encoding="utf-8") == render_html(data)


def _report_and_compare_peak(bundle: Path, registry) -> int:
    """Peak traced bytes of a Markdown and an HTML report and a comparison of ``bundle``."""
    tracemalloc.start()
    try:
        data = recompute(read_bundle(bundle), registry, pack_root=EXAMPLE_PACK)
        render_markdown(data)
        write_html(bundle.parent / "report.html", data)
        outcomes = list(registry.items("outcomes").values())
        compare_rows(
            read_bundle(bundle).rows,
            Selector.parse("endpoint=alpha"),
            [Selector.parse("endpoint=beta")],
            available=outcomes,
            resamples=50,
        )
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_report_memory_does_not_grow_with_the_rows(tmp_path, builtins_host):
    """Eight times the rows: the report and the comparison hold counts and per-key outcomes, not rows. Holding
    the rows as Python objects (what reports did) grows the peak by about three times the added file size; this
    allows half of it, for the per-key outcomes a paired comparison keeps (a few dozen bytes a row)."""
    small = make_bundle(tmp_path / "small" / "bundle", builtins_host.registry, seeds=list(range(5)))
    large = make_bundle(tmp_path / "large" / "bundle", builtins_host.registry, seeds=list(range(40)))
    added = os.path.getsize(large / "rows.jsonl") - os.path.getsize(small / "rows.jsonl")
    assert added > 2_000_000
    small_peak = _report_and_compare_peak(small, builtins_host.registry)
    large_peak = _report_and_compare_peak(large, builtins_host.registry)
    assert large_peak - small_peak < added / 2, (small_peak, large_peak, added)


class _Fixed:
    """A labelled test double: an outcome giving the row's own ``value`` member (or raising what it names)."""

    name, kinds, scale = "fixed", (), "binary"

    def of(self, row):
        if row["value"] == "raise":
            raise LookupError("no verdict")
        return row["value"]


def test_a_selection_gives_back_each_value_as_the_outcome_gave_it():
    from assay.reports.compare import _KeyValues, _Selection

    values = [True, False, None, 0.25, 3, 2**60, "text", {"odd": 1}, float("inf"), 0, 1.0, -0.0, "raise"]
    key_values = _KeyValues(("case_id",))
    selection = _Selection([_Fixed()], ("case_id",))
    for number, value in enumerate(values):
        selection.add({"key": {"case_id": f"case-{number}", "endpoint": "e"}, "value": value}, key_values)
    for number, value in enumerate(values[:-1]):
        got = selection.value(0, number)
        assert got == value and type(got) is type(value) and repr(got) == repr(value), (value, got)
    with pytest.raises(LookupError, match="no verdict"):  # raised only when read, as the row's own would be
        selection.value(0, len(values) - 1)
    assert list(key_values.values("case_id"))[selection.field("case_id")[1]] == "case-1"
    assert list(key_values.values("endpoint"))[selection.field("endpoint")[1]] == "e"
    assert len(selection) == len(values) and selection.odd(0)


def _keys_in_code_order(keys, limit=None, monkeypatch=None):
    """The pair keys of one selection, sorted by the codes _encode_keys gives them."""
    from assay.reports import compare

    if limit is not None:
        monkeypatch.setattr(compare, "_CODE_LIMIT", limit)
    fields = ("case_id", "seed", "protocol")
    key_values = compare._KeyValues(fields)
    selection = compare._Selection([_Fixed()], fields)
    for key in keys:
        selection.add({"key": dict(zip(fields, key, strict=True), endpoint="e"), "value": True}, key_values)
    compare._encode_keys([selection], key_values, fields)
    assert len(set(selection.codes.tolist())) == len(set(keys))
    return [keys[at] for at in selection.codes.argsort(kind="stable")]


@pytest.mark.parametrize("limit", [None, 40], ids=["wide", "renumbered"])
def test_pair_codes_order_keys_as_their_tuples_sort(limit, monkeypatch):
    """The codes pairs are matched and ordered by sort as the key tuples do (the bootstrap's input order depends on
    it), also when a field would overflow them and the codes so far are renumbered first."""
    import random

    chooser = random.Random(7)
    keys = [
        (f"case-{chooser.randrange(30)}", chooser.choice([0, 1, 5, 12, -3]), chooser.choice(["p", "q", "aa"]))
        for _ in range(300)
    ]
    keys = list(dict.fromkeys(keys))
    assert _keys_in_code_order(keys, limit, monkeypatch) == sorted(keys)


def test_a_key_field_mixing_types_is_named(monkeypatch):
    from assay.errors import AssayError

    with pytest.raises(AssayError, match="key field seed mixes values that cannot be ordered"):
        _keys_in_code_order([("c", 1, "p"), ("c", "one", "p")])


def test_a_key_column_widens_as_its_numbers_grow_and_keeps_them():
    """A byte a row while a field has few values; a case id numbered past 255, then past 65,535, widens the column
    without losing a number."""
    from assay.reports.compare import _Column

    column = _Column()
    numbers = [0, 7, 255, 3, 256, 1, 65_535, 65_536, 2, 70_000]
    widths = []
    for number in numbers:
        column.append(number)
        widths.append(column.as_array().itemsize)
    assert column.as_array().tolist() == numbers and len(column) == len(numbers)
    assert widths == [1, 1, 1, 1, 2, 2, 2, 4, 4, 4]
    assert _Column().as_array().size == 0 and _Column().as_array().dtype.kind == "u"  # an index, even when empty
