"""The standalone HTML report: one offline file, the widget's sections, nothing of the user's runs.

Hostile strings come from a real run: a ``torch.profiler.record_function("<script>...")`` range
recorded in a real trace and a cell whose source holds ``</script>`` and an ``<img onerror>``.
The page is parsed (html.parser) and, where ``/usr/bin/chromium`` exists, loaded in Chromium;
PNG screenshots land in ``test-artifacts/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gpu_notebook.records import OpStat, Report
from gpu_notebook.views.html_report import render_html, write_html
from gpu_notebook.views.report_widget import report_widget
from tests.test_views import (
    CLOSE_SCRIPT,
    IMG_PAYLOAD,
    PATCH_DIFF,
    PATCHED_CELL,
    PAYLOADS,
    SCRIPT_PAYLOAD,
    TagCollector,
    html_values,
    parse_html,
    synthetic_comparison,
    synthetic_gpu_report,
)

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
PAGE_TAGS = {
    "a",
    "b",
    "body",
    "code",
    "details",
    "div",
    "h2",
    "h3",
    "head",
    "html",
    "li",
    "meta",
    "p",
    "pre",
    "script",
    "span",
    "style",
    "summary",
    "table",
    "td",
    "th",
    "title",
    "tr",
    "ul",
    "svg",
    "g",
    "rect",
    "text",  # the flame graph
}
# A payload that would change the DOM if it ever ran: Chromium's DOM dump would show it.
DOM_PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"

HOSTILE_CELL = f'''
# a comment a user could write: {CLOSE_SCRIPT} {IMG_PAYLOAD} {DOM_PAYLOAD}
model = mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01)
xs = torch.randn(64, 32); ys = torch.randn(64, 1)
for step in range(8):
    with torch.profiler.record_function("{SCRIPT_PAYLOAD}"):
        loss = ((model(xs) - ys) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
raise RuntimeError("{IMG_PAYLOAD}")
'''


@pytest.fixture(scope="module")
def hostile_report(ip: Any, tmp_path_factory: Any) -> Report:
    """A real run of HOSTILE_CELL; the record_function name, read back from the real trace,
    joins the top operators so the trace's own string reaches every section that lists ops."""
    from gpu_notebook.traces.kineto import load_trace

    export = tmp_path_factory.mktemp("hostile")
    ip.run_cell_magic("gpucheck", f"-q -w 1 -s 3 -o _html_hostile --export {export}", HOSTILE_CELL)
    report = ip.user_ns["_html_hostile"]
    assert isinstance(report, Report) and report.run.status == "error"
    (trace,) = export.glob("*.trace.json.gz")  # the cell's own copy is gone with the cell
    names = [n for n in load_trace(str(trace)).names if SCRIPT_PAYLOAD in n]
    assert names, "the profiler trace recorded the hostile record_function range"
    ops = (*report.analysis.top_ops, OpStat(name=names[0], calls=3, total_us=900.0, self_us=10.0))
    return dataclasses.replace(report, analysis=dataclasses.replace(report.analysis, top_ops=ops))


@pytest.fixture(scope="module")
def cpu_report(ip: Any) -> Report:
    from tests import cells

    ip.run_cell_magic("gpucheck", "-q -o _html_cpu", cells.SLOW_INPUT)
    report = ip.user_ns["_html_cpu"]
    assert isinstance(report, Report)
    return report


def csp_of(page: str) -> str:
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)"', page)
    assert match, "the page declares a Content-Security-Policy"
    return html.unescape(match.group(1))


def sha256_source(body: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(body.encode()).digest()).decode() + "'"


def assert_only_our_scripts(parsed: TagCollector) -> None:
    """Each <script> is bokeh's INLINE bundle or bokeh's embed call; no script has a src."""
    from bokeh.resources import INLINE

    bundles = {js.strip() for js in INLINE.js_raw}
    assert parsed.scripts, "bokeh's scripts are inlined"
    for attrs, body in parsed.scripts:
        assert "src" not in attrs
        assert body.strip() in bundles or "embed_items" in body, body[:200]
        assert "alert(1)" not in body


# ---------------------------------------------------------------------------------------------


def test_the_file_is_self_contained(cpu_report: Report) -> None:
    report = synthetic_gpu_report(comparison=synthetic_comparison())
    for shown in (report, cpu_report):
        page = render_html(shown)
        parsed = parse_html(page)
        doc_links = {f.proposal.doc_url for f in shown.findings if f.proposal is not None}
        for tag, attrs in parsed.tags:
            assert tag in PAGE_TAGS, f"<{tag}> {attrs}"
            assert "src" not in attrs, f"<{tag}> loads {attrs['src']!r}"
            href = attrs.get("href")
            if href is not None:
                # The only URLs are links a reader may click (fix documentation), never loads.
                assert tag == "a" and href in doc_links and href.startswith("https://"), (tag, href)
        assert "cdn.bokeh.org" not in page
        assert not re.search(r"<link\b", page)
        assert "default-src 'none'" in csp_of(page)
        assert_only_our_scripts(parsed)


def test_the_csp_admits_exactly_the_scripts_on_the_page() -> None:
    page = render_html(synthetic_gpu_report())
    parsed = parse_html(page)
    csp = csp_of(page)
    script_src = re.search(r"script-src ([^;]*);", csp)
    assert script_src is not None
    allowed = set(script_src.group(1).split())
    assert allowed == {sha256_source(body) for _, body in parsed.scripts}
    assert "'unsafe-inline'" not in script_src.group(1)


def test_hostile_trace_names_and_cell_source_are_only_text(hostile_report: Report) -> None:
    page = render_html(hostile_report)
    parsed = parse_html(page)
    for tag, attrs in parsed.tags:
        assert tag in PAGE_TAGS, f"injected <{tag}> {attrs}"
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
    assert_only_our_scripts(parsed)
    text = parsed.all_text
    assert SCRIPT_PAYLOAD in text  # the operator table, as text
    assert CLOSE_SCRIPT in text and IMG_PAYLOAD in text and DOM_PAYLOAD in text  # the cell
    assert f"The cell failed: RuntimeError: {IMG_PAYLOAD}; this report covers" in text
    # In the markup itself every payload is escaped.
    for payload in (SCRIPT_PAYLOAD, IMG_PAYLOAD, DOM_PAYLOAD):
        assert payload not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_synthetic_hostile_strings_everywhere_stay_text() -> None:
    report = synthetic_gpu_report(hostile=True, comparison=synthetic_comparison())
    page = render_html(report)
    parsed = parse_html(page)
    for tag, attrs in parsed.tags:
        assert tag in PAGE_TAGS, f"injected <{tag}> {attrs}"
        assert not any(name.startswith("on") for name in attrs)
        assert not (attrs.get("href") or "").lower().startswith("javascript:")
    for payload in PAYLOADS:
        assert payload in parsed.all_text
    assert_only_our_scripts(parsed)


def test_fixes_show_the_patched_cell_and_the_diff_as_pre_blocks() -> None:
    page = render_html(synthetic_gpu_report())
    assert "<button" not in page
    pres = re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S)
    texts = [parse_html(p).all_text for p in pres]
    assert PATCHED_CELL in texts
    assert PATCH_DIFF.rstrip("\n") in texts
    assert (
        '<span class="add">+loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True)</span>'
        in page
    )
    text = parse_html(page).all_text
    assert "No patch for this cell: the copies happen inside a helper" in text
    assert text.index("Will more GPUs help?") < text.index("Findings: 3 thing(s) to fix")


def test_the_page_has_the_widget_sections() -> None:
    report = synthetic_gpu_report(comparison=synthetic_comparison())
    page_text = parse_html(render_html(report)).all_text
    widget_text = "".join(parse_html(v).all_text for v in html_values(report_widget(report)))
    for section in (
        "Will more GPUs help?",
        "Before / after",
        "Findings: 3 thing(s)",
        "Where a step's time goes",
        "Timeline and phases per step",
        "GPU and CPU",
        "Top operators",
        "Measured cell",
    ):
        assert section in page_text and section in widget_text, section


def test_write_html_creates_the_folder_and_the_file(tmp_path: Path) -> None:
    target = write_html(synthetic_gpu_report(), tmp_path / "sub" / "report.html")
    assert target.is_file()
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------------------------------------
# Real Chromium
# ---------------------------------------------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium not installed (apt-get install chromium)"
)


def _our_flame_graph(tag: str, attrs: dict[str, str | None]) -> bool:
    """The views' own inline flame graph (views/flame.py): whether the run had stack samples
    (a graph) or none (its 'no stack samples' header) depends on how the machine ran the cell."""
    return (
        tag == "svg" and attrs.get("role") == "img" and (attrs.get("xmlns") or "").endswith("/svg")
    )


@needs_chromium
def test_chromium_dom_shows_no_injection(hostile_report: Report, tmp_path: Path) -> None:
    path = write_html(hostile_report, tmp_path / "hostile.html")
    result = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=3000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    dom = result.stdout
    assert "Will more GPUs help?" in dom
    assert 'data-pwned="1"' not in dom
    injected = [
        (tag, attrs)
        for tag, attrs in parse_html(dom).tags
        if (tag in ("img", "svg", "iframe") and not _our_flame_graph(tag, attrs))
        or any(a.startswith("on") for a in attrs)
    ]
    assert injected == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


@needs_chromium
def test_chromium_draws_the_charts_offline_and_no_dialog_opens(
    hostile_report: Report, cpu_report: Report
) -> None:
    """Playwright on Debian's Chromium: bokeh renders under the CSP, no alert, no CSP error;
    screenshots of each report and of the widget's HTML are saved for a person to look at."""
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    gpu_report = synthetic_gpu_report(comparison=synthetic_comparison())
    pages = {
        "report-gpu-synthetic": render_html(gpu_report),
        "report-cpu-real": render_html(cpu_report),
        "report-failed-hostile": render_html(hostile_report),
    }
    widget_page = (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:12px">'
        + "".join(html_values(report_widget(gpu_report)))
        + "</body></html>"
    )
    for name, page in pages.items():
        (ARTIFACTS / f"{name}.html").write_text(page, encoding="utf-8")
    (ARTIFACTS / "widget-gpu-synthetic.html").write_text(widget_page, encoding="utf-8")
    (ARTIFACTS / "live-view.html").write_text(live_view_page(), encoding="utf-8")

    dialogs: list[str] = []
    problems: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    def on_console(message: Any) -> None:
        if message.type == "error":
            problems.append(message.text)

    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1200, "height": 1600}, offline=True)
        try:
            for name in [*pages, "widget-gpu-synthetic"]:
                page = context.new_page()
                page.on("dialog", on_dialog)
                page.on("console", on_console)
                page.on("pageerror", lambda e: problems.append(str(e)))
                page.goto((ARTIFACTS / f"{name}.html").as_uri())
                frame = page.frames[-1] if name.startswith("widget") else page.main_frame
                if name.startswith("widget"):
                    assert len(page.frames) == 2, "the charts live in their own iframe"
                frame.wait_for_selector("canvas", state="attached", timeout=15_000)
                assert frame.locator("canvas").count() >= 2, f"{name}: bokeh drew no chart"
                page.wait_for_timeout(800)  # let bokeh finish its layout before the picture
                assert page.evaluate("document.body.getAttribute('data-pwned')") is None
                page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
                page.screenshot(path=str(ARTIFACTS / f"{name}-full.png"), full_page=True)
                if name.startswith("widget"):
                    # A full-page picture leaves the (out-of-process) iframe blank: scroll to it.
                    page.locator("iframe").scroll_into_view_if_needed()
                    page.wait_for_timeout(300)
                    page.screenshot(path=str(ARTIFACTS / f"{name}-charts.png"))
                page.close()
            live = context.new_page()
            live.set_viewport_size({"width": 900, "height": 130})
            live.goto((ARTIFACTS / "live-view.html").as_uri())
            assert live.locator("svg polyline").count() == 2
            live.screenshot(path=str(ARTIFACTS / "live-view.png"))
        finally:
            browser.close()
    assert dialogs == []
    assert problems == []
    for name in [*pages, "widget-gpu-synthetic"]:
        assert (ARTIFACTS / f"{name}.png").stat().st_size > 10_000


def live_view_page() -> str:
    """The live box after 80 sampler ticks of a two-GPU run, as a page."""
    from gpu_notebook.views.live import LiveView
    from tests.test_views import FakeClock, live_status

    clock = FakeClock()
    view = LiveView(cell_id=None, clock=clock)
    for k in range(80):
        clock.now += 0.25
        util = 30.0 + 50.0 * ((k * 7) % 10) / 10
        view.update(live_status(0.25 * k, util=(util, 0.8 * util), cpu=140.0, steps=k // 2))
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:12px;'
        'font:14px sans-serif">' + "".join(html_values(view.box)) + "</body></html>"
    )


def test_screenshot_folder_is_git_ignored() -> None:
    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    result = subprocess.run(
        ["git", "check-ignore", "-q", "test-artifacts/x.png"], cwd=root, check=False
    )
    assert result.returncode == 0, "test-artifacts/ must stay out of git"


@pytest.mark.parametrize("represents", [True, False])
def test_the_run_shape_sentences_keep_their_spaces(represents: bool) -> None:
    from gpu_notebook.records import RunSegment, RunShape
    from gpu_notebook.views.html_report import run_shape_section
    from tests.scenarios import synthetic as syn

    seg = RunSegment(first_step=2, last_step=4, median_s=0.01, total_s=0.03)
    shape = RunShape(
        steps=100, total_s=1.0, median_s=0.01, p90_s=0.012, jitter=1.2, first_median_s=0.01,
        last_median_s=0.01, slope_s_per_step=0.0, segments=(seg,) * 10, windows=(seg,),
        window_median_s=0.01, window_covers=0.9 if represents else 0.2, represents=represents,
    )  # fmt: skip
    rep = syn.make_report("for x in loader:\n    step(x)\n", step_median_s=0.01)
    rep = dataclasses.replace(rep, analysis=dataclasses.replace(rep.analysis, shape=shape))
    text = re.sub(r"<[^>]+>", "", run_shape_section(rep))
    assert "steps 2-4. Steps like theirs hold" in text, text
    then = "the window does not represent" if not represents else "the window represents"
    assert f"of the run's time: {then}" in text, text
