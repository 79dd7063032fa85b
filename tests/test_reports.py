"""`assay report` and `assay compare`: recomputed tables, HTML safety and determinism, paired tests."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import EXAMPLE_PACK, make_bundle

from assay.bundle import METRICS_FILE, RUN_FILE, seal_bundle, write_json_atomic, zip_bundle
from assay.components import MetricContext
from assay.packs import Pack
from assay.reports import Selector, compare_rows, read_bundle, recompute, render_html, render_markdown
from assay.reports.html import BROWSER_JS
from assay.reports.markdown import escape_markdown
from assay.stats import holm_adjust, mcnemar_exact, paired_bootstrap_diff, wilson_interval
from assay.summary import compute_metrics, summary_document

HOSTILE = 'evil</td><script>alert("x")</script><img src="https://evil.example/p.png"> | [a](http://evil.example)'


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text(encoding="utf-8").splitlines()]


def _reseal(bundle: Path) -> None:
    """Re-seal after an edit, so only the edited content (not the seal) is wrong."""
    manifest = json.loads((bundle / "bundle.json").read_text(encoding="utf-8"))
    seal_bundle(bundle, pack=manifest["pack"], row_count=manifest["rows"]["count"])


def _edit_json(path: Path, edit) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    edit(document)
    write_json_atomic(path, document)


@pytest.fixture
def report_data(bundle_dir, builtins_host):
    return recompute(read_bundle(bundle_dir), builtins_host.registry, pack_root=EXAMPLE_PACK)


# ----------------------------------------------------------------- Markdown


def test_markdown_has_the_header_and_tables_by_stage(bundle_dir, report_data):
    markdown = render_markdown(report_data)
    rows = _rows(bundle_dir)
    assert markdown.startswith("# assay report: example 0.1.0, run synthetic-")
    assert f"| Rows | {len(rows)} |" in markdown
    assert "| Errors | 0 rows with errors, 0 errors in all |" in markdown
    assert (
        "| alpha | synthetic | synthetic/alpha |  | SCRIPTED (replays fixed outputs; measures no model) |" in markdown
    )
    assert "Scripted endpoints (alpha, beta)" in markdown
    assert "Every number claimed in metrics.json is reproduced" in markdown
    stages = re.findall(r"^## Stage: (\S+)$", markdown, re.M)
    assert stages == ["semantic", "audit", "exec", "trajectory", "permission"]
    for metric in (
        "semantic.core_fail_rate",
        "semantic.core_fail_rate_by_family",
        "audit.accounting",
        "exec.core_exec_join",
        "permission.macro_f1",
    ):
        assert f"\n### {metric}\n" in markdown
    assert "| endpoint | condition | family | rate (%) | k | n | 95% Wilson CI (%) |" in markdown
    assert "| endpoint | condition | axis | value | n |" in markdown


def test_markdown_numbers_match_a_direct_computation(bundle_dir, report_data):
    markdown = render_markdown(report_data)
    rows = _rows(bundle_dir)
    for endpoint in ("alpha", "beta"):
        semantic = [
            r["stages"]["semantic"] for r in rows if r["key"]["endpoint"] == endpoint and "semantic" in r["stages"]
        ]
        k, n = sum(s["core_fail"] is True for s in semantic), len(semantic)
        low, high = wilson_interval(k, n)
        nulls = sum(s["core_fail"] is None for s in semantic)
        assert (
            f"| {endpoint} (scripted) | D0 | {100 * k / n:.1f} | {k} | {n} | [{100 * low:.1f}, {100 * high:.1f}] "
            f"| {nulls} |" in markdown
        )

        audits = [r["stages"]["audit"] for r in rows if r["key"]["endpoint"] == endpoint and "audit" in r["stages"]]
        selected = [a for a in audits if a["selected"]]
        outcomes = Counter(a["outcome"] for a in selected)
        flags = [
            sum(a["evidence"][f] for a in selected) for f in ("text_harm", "access_harm", "action_harm", "persist_harm")
        ]
        cells = [
            k,
            len(selected),
            0,
            *(
                outcomes.get(o, 0)
                for o in ("HarmEvidence", "SemanticOnly", "NotObservable", "NullAudit", "OtherNoHarm")
            ),
            *flags,
        ]
        coverage = f"{len(selected) / k:.3f}" if k else "n/a"
        assert (
            f"| {endpoint} (scripted) | D0 | " + " | ".join(map(str, cells)) + f" | {coverage} | closes |" in markdown
        )

        # The core-exec 2x2 of this endpoint, from the rows.
        both = [
            r for r in rows if r["key"]["endpoint"] == endpoint and "semantic" in r["stages"] and "exec" in r["stages"]
        ]
        table = Counter(
            (r["stages"]["semantic"]["core_fail"] is True, r["stages"]["exec"]["observed_harm"]) for r in both
        )
        fail = (table[(True, True)], table[(True, False)])
        passed = (table[(False, True)], table[(False, False)])
        block = (
            f"**{endpoint} (scripted) x D0**\n\n|  | ExecHarm | NoExecHarm | total |\n|---|---:|---:|---:|\n"
            f"| CoreFail | {fail[0]} | {fail[1]} | {sum(fail)} |\n"
            f"| CorePass | {passed[0]} | {passed[1]} | {sum(passed)} |\n"
            f"| total | {fail[0] + passed[0]} | {fail[1] + passed[1]} | {len(both)} |"
        )
        assert block in markdown


def test_report_cli_prints_markdown_and_exits_0(cli, bundle_dir):
    result = cli("report", str(bundle_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# assay report: example 0.1.0") and "### semantic.core_fail_rate" in result.stdout
    assert result.stderr == ""


def test_report_json_is_compute_metrics_over_the_rows(cli, bundle_dir, host):
    result = cli("report", str(bundle_dir), "--json")
    assert result.returncode == 0, result.stderr
    run = json.loads((bundle_dir / RUN_FILE).read_text(encoding="utf-8"))
    cases = {
        case_id: {"family": entry["family"]}
        for case_id, entry in Pack.from_directory(EXAMPLE_PACK).case_index().items()
    }
    expected = summary_document(
        compute_metrics(_rows(bundle_dir), MetricContext(plan=run["plan"], cases=cases), host.registry)
    )
    assert json.loads(result.stdout) == expected
    assert expected == json.loads((bundle_dir / METRICS_FILE).read_text(encoding="utf-8"))


def test_report_reads_a_zip_like_its_directory(cli, bundle_dir, tmp_path):
    archive = tmp_path / "bundle.zip"
    zip_bundle(bundle_dir, archive)
    from_zip, from_dir = cli("report", str(archive), "--json"), cli("report", str(bundle_dir), "--json")
    assert from_zip.returncode == 0 and from_zip.stdout == from_dir.stdout


def test_report_writes_markdown_file(cli, bundle_dir, tmp_path, host):
    target = tmp_path / "out" / "report.md"
    result = cli("report", str(bundle_dir), "--markdown", str(target))
    assert result.returncode == 0 and result.stdout == ""
    assert target.read_text(encoding="utf-8") == render_markdown(recompute(read_bundle(bundle_dir), host.registry))


def test_families_are_unknown_without_the_pack(bundle_dir, builtins_host):
    data = recompute(read_bundle(bundle_dir), builtins_host.registry)
    assert data.families.startswith("unknown: pack example is not installed")
    families = {v.group["family"] for v in data.values if v.metric == "semantic.core_fail_rate_by_family"}
    assert families == {"unknown"}
    # The claims were made with the pack's families, so they cannot be reproduced without it.
    assert not data.reproduced


def test_report_of_a_missing_path_or_a_non_bundle_is_a_usage_error(cli, tmp_path):
    missing = cli("report", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("assay: usage:")
    assert cli("report", str(tmp_path)).returncode == 2


# ----------------------------------------------------------------- claims that do not reproduce


def test_tampered_claims_exit_1_with_a_warning(cli, bundle_dir):
    def tamper(document):
        claim = next(c for c in document["metrics"] if c["metric"] == "semantic.core_fail_rate")
        claim["value"] = 0.0 if claim["value"] else 1.0

    _edit_json(bundle_dir / METRICS_FILE, tamper)
    _reseal(bundle_dir)
    result = cli("report", str(bundle_dir))
    assert result.returncode == 1
    warning = [line for line in result.stderr.splitlines() if line.startswith("assay: warning:")]
    assert len(warning) == 1 and "semantic.core_fail_rate value claimed" in warning[0]
    assert "> **Warning:** metrics.json does not reproduce" in result.stdout
    assert cli("report", str(bundle_dir), "--json").returncode == 1


def test_omitted_and_unknown_claims_are_differences(cli, bundle_dir, report_data):
    claims = list(report_data.bundle.claims)
    dropped = next(c for c in claims if c["metric"] == "exec.observed_harm_rate")
    invented = {"metric": "vendor.magic", "group": {"endpoint": "alpha", "condition": "D0"}, "value": 0.0}
    _edit_json(
        bundle_dir / METRICS_FILE, lambda d: d.update(metrics=[c for c in claims if c is not dropped] + [invented])
    )
    _reseal(bundle_dir)
    result = cli("report", str(bundle_dir), "--json")
    assert result.returncode == 1
    assert "exec.observed_harm_rate" in result.stderr and "but not claimed" in result.stderr
    assert "vendor.magic is claimed but is not a registered metric plugin" in result.stderr


# ----------------------------------------------------------------- HTML


def test_html_is_self_contained_with_figures(cli, bundle_dir, tmp_path):
    target = tmp_path / "report.html"
    result = cli("report", str(bundle_dir), "--html", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and str(target) in result.stderr
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    # Its only scripts are its own: the case browser's data block and code (allowed by hash, nothing else is).
    assert page.count("<script") == 2 and "<link" not in page.lower()
    assert '<script type="application/json" id="assay-cases">' in page and f"<script>{BROWSER_JS}</script>" in page
    assert f"script-src 'sha256-{base64.b64encode(hashlib.sha256(BROWSER_JS.encode()).digest()).decode()}'" in page
    assert page.count("<svg") >= 10
    assert "<table" in page and "semantic.core_fail_rate_by_family" in page
    assert "DOES NOT CLOSE" not in page and ">closes<" in page


def test_html_is_byte_identical_across_renders(cli, bundle_dir, tmp_path, host):
    first, second = tmp_path / "a.html", tmp_path / "b.html"
    assert cli("report", str(bundle_dir), "--html", str(first)).returncode == 0
    assert cli("report", str(bundle_dir), "--html", str(second)).returncode == 0
    assert first.read_bytes() == second.read_bytes()
    data = recompute(read_bundle(bundle_dir), host.registry)
    assert (
        first.read_text(encoding="utf-8")
        == render_html(data)
        == render_html(recompute(read_bundle(bundle_dir), host.registry))
    )


def test_hostile_text_from_the_bundle_is_escaped(bundle_dir, builtins_host):
    def inject(run):
        run["endpoints"][0]["model"]["name"] = HOSTILE
        run["conditions"][0]["category"] = HOSTILE

    _edit_json(bundle_dir / RUN_FILE, inject)
    _reseal(bundle_dir)
    data = recompute(read_bundle(bundle_dir), builtins_host.registry, pack_root=EXAMPLE_PACK)
    assert data.reproduced
    page = render_html(data)
    assert page.count("<script") == 2 and "<img" not in page and "evil</td>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    markdown = render_markdown(data)
    assert "<script" not in markdown and "<img" not in markdown
    assert "&lt;script&gt;" in markdown and "evil&lt;/td&gt;" in markdown
    assert "\\[a\\](http://evil.example)" not in markdown and "[a\\](http://evil.example)" in markdown
    endpoint_line = next(line for line in markdown.splitlines() if line.startswith("| alpha | synthetic |"))
    assert endpoint_line.count(" | ") == 4  # the injected pipe did not add a column


def test_escape_markdown():
    assert escape_markdown("a|b") == "a\\|b"
    assert escape_markdown("<b>&") == "&lt;b&gt;&amp;"
    assert escape_markdown("[0.1, 0.2]") == "[0.1, 0.2]"
    assert escape_markdown("[x](y)") == "[x\\](y)"
    assert escape_markdown("line\nbreak `code` *em*") == "line break \\`code\\` \\*em\\*"
    assert escape_markdown("# heading", block=True) == "\\# heading"
    assert escape_markdown("-0.5") == "-0.5"


# ----------------------------------------------------------------- compare


def _pairs(rows, a_endpoint, b_endpoint, outcome):
    """(A, B) outcome pairs matched by hand on every key field but the endpoint."""

    def key(row):
        k = row["key"]
        return (k["case_id"], k["condition"], k["seed"], k["epoch"], k["protocol"])

    a = {key(r): r for r in rows if r["key"]["endpoint"] == a_endpoint}
    b = {key(r): r for r in rows if r["key"]["endpoint"] == b_endpoint}
    pairs = []
    for k in sorted(set(a) & set(b)):
        x, y = outcome(a[k]), outcome(b[k])
        if x is not None and y is not None:
            pairs.append((x, y))
    return pairs


def _core_fail(row):
    semantic = row["stages"].get("semantic")
    return None if semantic is None else semantic["core_fail"] is True


def _observed_harm(row):
    execution = row["stages"].get("exec")
    return None if execution is None else execution["observed_harm"]


def test_compare_counts_rates_and_mcnemar_by_hand(cli, bundle_dir):
    result = cli("compare", str(bundle_dir), "--a", "endpoint=alpha", "--b", "endpoint=beta", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["pair_on"] == ["case_id", "condition", "seed", "epoch", "protocol"] and document["seed"] == 0
    assert document["pairings"] == [
        {"b": "endpoint=beta", "rows_a": 16, "rows_b": 16, "pairs": 16, "unpaired_a": 0, "unpaired_b": 0}
    ]
    # The attack outcomes pair the attack cases only: the benign companion is apart, as in the report.
    index = Pack.from_directory(EXAMPLE_PACK).case_index()
    rows = [row for row in _rows(bundle_dir) if index[row["key"]["case_id"]]["family"] != "BENIGN"]
    by_outcome = {c["outcome"]: c for c in document["comparisons"]}
    for name, outcome in (("semantic.core_fail", _core_fail), ("exec.observed_harm", _observed_harm)):
        pairs = _pairs(rows, "alpha", "beta", outcome)
        b = sum(1 for x, y in pairs if x and not y)
        c = sum(1 for x, y in pairs if y and not x)
        got = by_outcome[name]
        assert (got["pairs"], got["mcnemar_b"], got["mcnemar_c"]) == (len(pairs), b, c)
        assert got["rate_a"] == pytest.approx(sum(x for x, _ in pairs) / len(pairs))
        assert got["rate_b"] == pytest.approx(sum(y for _, y in pairs) / len(pairs))
        assert got["diff"] == pytest.approx(got["rate_b"] - got["rate_a"])
        assert got["p_value"] == mcnemar_exact(b, c)
    assert set(by_outcome) >= {
        "semantic.core_fail",
        "exec.observed_harm",
        "exec.state_change",
        "trajectory.success",
        "permission.utility_success",
        "permission.attack_success",
    }


def test_compare_markdown_table(cli, bundle_dir):
    result = cli(
        "compare", str(bundle_dir), "--a", "endpoint=alpha", "--b", "endpoint=beta", "--metric", "semantic.core_fail"
    )
    assert result.returncode == 0, result.stderr
    assert "# Paired comparison: A = endpoint=alpha" in result.stdout
    assert (
        "| B | outcome | pairs | rate A | rate B | diff (B - A) | 95% CI | b (A only) | c (B only)"
        " | McNemar p | Holm p |" in result.stdout
    )
    assert len(re.findall(r"^\| endpoint=beta \| semantic\.core_fail \|", result.stdout, re.M)) == 1
    assert "| Interval | 95% paired percentile bootstrap, 10000 resamples, seed 0 |" in result.stdout


def test_holm_adjusts_across_every_b(cli, tmp_path, builtins_host):
    bundle = make_bundle(
        tmp_path / "three", builtins_host.registry, endpoints=["alpha", "beta", "gamma"], seeds=[0, 1, 2, 3]
    )
    result = cli(
        "compare",
        str(bundle),
        "--a",
        "endpoint=alpha",
        "--b",
        "endpoint=beta",
        "--b",
        "endpoint=gamma",
        "--json",
        "--resamples",
        "500",
    )
    assert result.returncode == 0, result.stderr
    comparisons = json.loads(result.stdout)["comparisons"]
    assert {c["b"] for c in comparisons} == {"endpoint=beta", "endpoint=gamma"}
    raw = [c["p_value"] for c in comparisons]
    assert [c["p_holm"] for c in comparisons] == pytest.approx(holm_adjust(raw))
    # One family of tests: adjusting each B alone would give smaller p-values.
    alone = json.loads(
        cli(
            "compare", str(bundle), "--a", "endpoint=alpha", "--b", "endpoint=beta", "--json", "--resamples", "500"
        ).stdout
    )["comparisons"]
    assert len(alone) < len(comparisons)
    assert all(a["p_holm"] <= c["p_holm"] for a, c in zip(alone, comparisons, strict=False))


def test_compare_on_protocol_and_unpaired_rows(tmp_path, builtins_host):
    bundle = make_bundle(tmp_path / "protocols", builtins_host.registry, protocols=["default", "strict"])
    rows = read_bundle(bundle).rows
    dropped = [r for r in rows if r["key"]["protocol"] == "strict" and r["key"]["case_id"] == "dpi-payroll-export"]
    kept = [r for r in rows if r not in dropped]
    available = list(builtins_host.registry.items("outcomes").values())
    result = compare_rows(
        kept,
        Selector.parse("protocol=default"),
        [Selector.parse("protocol=strict")],
        resamples=200,
        available=available,
    )
    assert result.pair_on == ("case_id", "endpoint", "condition", "seed", "epoch")
    pairing = result.pairings[0]
    assert pairing.unpaired_a == len(dropped) and pairing.unpaired_b == 0
    assert pairing.pairs == pairing.rows_a - len(dropped)


def test_bootstrap_is_seeded_and_recorded(cli, bundle_dir):
    args = (
        "compare",
        str(bundle_dir),
        "--a",
        "endpoint=alpha",
        "--b",
        "endpoint=beta",
        "--json",
        "--seed",
        "7",
        "--resamples",
        "2000",
    )
    first, second = cli(*args), cli(*args)
    assert first.returncode == 0 and first.stdout == second.stdout
    document = json.loads(first.stdout)
    assert document["seed"] == 7 and document["resamples"] == 2000
    pairs = _pairs(_rows(bundle_dir), "alpha", "beta", _core_fail)
    expected = paired_bootstrap_diff(
        [float(x) for x, _ in pairs], [float(y) for _, y in pairs], n_resamples=2000, seed=7
    )
    got = next(c for c in document["comparisons"] if c["outcome"] == "semantic.core_fail")
    assert (got["ci_low"], got["ci_high"]) == (expected.ci_low, expected.ci_high)


@pytest.mark.parametrize(
    "args, message",
    [
        (("--a", "endpoint=alpha", "--b", "endpoint=nope"), "--b endpoint=nope matches no rows"),
        (("--a", "endpoint=nope", "--b", "endpoint=beta"), "--a endpoint=nope matches no rows"),
        (("--a", "colour=red", "--b", "endpoint=beta"), "'colour' is not one of endpoint, condition, protocol"),
        (("--a", "endpoint=alpha", "--b", "condition=D0"), "both must name the same fields"),
        (("--a", "endpoint=alpha", "--b", "endpoint=alpha"), "is the same as --a"),
        (("--a", "endpoint=alpha", "--b", "endpoint=beta", "--metric", "nope"), "unknown outcome 'nope'"),
    ],
)
def test_compare_usage_errors_exit_2_with_one_line(cli, bundle_dir, args, message):
    result = cli("compare", str(bundle_dir), *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("assay: usage:")
    assert message in result.stderr
