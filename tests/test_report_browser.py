"""The HTML report in a real headless browser (Debian's Chromium, driven over the DevTools protocol).

The page opens from ``file://`` with no network; its one script (allowed by hash, nothing else is) builds the
case browser; a user filters the work items, opens one, and reads its transcript. An answer that is markup
(a model's, so untrusted) stays text: it is shown, never run. A screenshot of the summary screen is written,
as ``scripts/report_screenshot.py`` writes the one in the docs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.engine.run import RunSettings, execute_run
from assay.reports import read_bundle, recompute
from assay.reports.html import write_html
from assay.testing.browser import HeadlessBrowser
from assay.testing.openai_server import LoopbackServer

PAYLOAD = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> {{7*7}}'


def _rows(bundle: Path) -> list[dict]:
    return [json.loads(line) for line in (bundle / "rows.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def staged_page(tmp_path_factory, host) -> tuple[Path, Path]:
    """A scripted safeclaw run (two endpoints, one condition, all three stages) and its HTML report."""
    out = tmp_path_factory.mktemp("browser")
    outcome = execute_run(
        RunSettings(
            pack="safeclaw",
            endpoints=["scripted:mixed", "scripted:refuse"],
            defenses=["D0"],
            sample="stratified:1",
            out=out / "run",
            progress=False,
        ),
        host=host,
    )
    page = out / "report.html"
    write_html(page, recompute(read_bundle(outcome.bundle), host.registry))
    return page, outcome.bundle


def test_a_reader_filters_the_cases_opens_one_and_reads_its_transcript(children, staged_page):
    page, bundle = staged_page
    rows = _rows(bundle)
    failed = [r for r in rows if r["stages"].get("semantic", {}).get("core_fail") is True]
    assert failed, "the scripted mixed agent complies with some attacks"
    with HeadlessBrowser() as browser:
        browser.open(page.resolve().as_uri())
        listed = browser.evaluate("document.querySelectorAll('#cb-rows tr').length")
        assert listed == len(rows)  # the script ran under the page's own CSP and listed every work item

        def choose(select: str, value: str) -> None:
            browser.evaluate(
                f"(function () {{ var s = document.getElementById({json.dumps(select)}); s.value = "
                f"{json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
            )

        choose("cb-endpoint", "scripted-mixed (scripted)")
        cells = browser.evaluate(
            "Array.from(document.querySelectorAll('#cb-rows tr')).map(r => r.children[1].textContent)"
        )
        assert cells and set(cells) == {"scripted-mixed (scripted)"}
        choose("cb-outcome", "semantic.core_fail")
        choose("cb-value", "yes")
        shown = browser.evaluate(
            "Array.from(document.querySelectorAll('#cb-rows tr')).map(r => r.children[0].textContent)"
        )
        assert sorted(shown) == sorted(r["key"]["case_id"] for r in failed)
        browser.evaluate("document.querySelector('#cb-rows tr').click()")
        detail = browser.evaluate("document.getElementById('cb-detail').textContent")
        opened = next(r for r in failed if r["key"]["case_id"] == shown[0])
        assert shown[0] in detail and "Transcript" in detail
        assert opened["final_output"][:80] in detail  # the answer the judge saw
        user_turn = next(m for m in opened["transcript"]["messages"] if m["role"] == "user")
        assert user_turn["content"][:80] in detail
        assert "oracle_results" in detail and "state_diff" in detail  # the exec stage's verdicts
        png = browser.screenshot(1280, 860)
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_markup_in_a_models_answer_is_shown_never_run(children, tmp_path, host):
    with LoopbackServer(script=[{"match": ".*", "replies": [PAYLOAD]}]) as server:
        outcome = execute_run(
            RunSettings(
                pack="example",
                endpoints=[f"openai:model=echo,base_url={server.openai_base_url},id=echo"],
                stages=["semantic"],
                out=tmp_path / "run",
                progress=False,
            ),
            host=host,
        )
    page = tmp_path / "report.html"
    write_html(page, recompute(read_bundle(outcome.bundle), host.registry))
    with HeadlessBrowser() as browser:
        browser.open(page.resolve().as_uri())
        assert browser.evaluate("document.querySelectorAll('#cb-rows tr').length") == len(_rows(outcome.bundle))
        browser.evaluate("document.querySelector('#cb-rows tr').click()")
        detail = browser.evaluate("document.getElementById('cb-detail').textContent")
        assert PAYLOAD in detail  # shown as the text it is
        assert browser.evaluate("typeof window.__pwned") == "undefined"
        assert browser.evaluate("document.querySelectorAll('img').length") == 0
        assert browser.evaluate("document.scripts.length") == 2  # the data block and the page's own script
