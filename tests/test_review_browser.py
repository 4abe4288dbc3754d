"""The review page in a real browser: headless Chromium renders its charts with no console
message at all (the page has no scripts, so any message is an error or a blocked request), and a
1280 px screenshot is a real picture. Chromium: scripts/install-chromium.sh (Debian's package)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from advisor import load_catalog
from advisor.review import build_review, from_dir, render_html
from tests import synthetic_fleet as synthetic

FIXTURES = Path(__file__).parents[1] / (
    "benchmarks/results/probe-2026-11-30-nvidia-h200-driver580.159.04-torch2.11.0+cu130"
)
CONSOLE = re.compile(r":CONSOLE|Uncaught|console\.error", re.IGNORECASE)
CHARTS = ("gpus-by-accelerator", "ratios", "savings-by-host", "cost-0", "cost-1")


def chromium() -> str | None:
    for candidate in (os.environ.get("ADVISOR_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    return None


CHROMIUM = chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("CI"),  # in CI a missing browser is a failure
        reason="Chromium is not installed (bash scripts/install-chromium.sh, or "
        "apt-get install -y chromium; ADVISOR_CHROMIUM=PATH for another binary)",
    ),
]


def browse(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *extra,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A review of realistic data: the four real H200 runs plus a synthetic fleet."""
    catalog = load_catalog()
    d = tmp_path_factory.mktemp("reports")
    base = json.loads((FIXTURES / "probe-quick.json").read_text())
    for fixture in FIXTURES.glob("probe-*.json"):
        shutil.copy(fixture, d / fixture.name)
    for i, r in enumerate(synthetic.probe_reports(catalog, base, 600, 60)):
        (d / f"s-{i:04d}.json").write_text(json.dumps(r))
    for i, u in enumerate(synthetic.utilisation_reports(catalog, 60)):
        (d / f"u-{i:03d}.json").write_text(json.dumps(u))
    out = d.parent / "review.html"
    out.write_text(render_html(build_review(from_dir(d), catalog)))
    return out


def test_the_detector_sees_console_errors(tmp_path: Path) -> None:
    """A control: a page that logs, throws and loads from the network is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><html><body><svg></svg><img src='https://example.invalid/x.png'>"
        "<script>console.error('boom'); notDefined();</script></body></html>"
    )
    p = browse(bad, tmp_path / "profile", "--dump-dom")
    found = " ".join(console_lines(p.stderr))
    assert "boom" in found and "Uncaught ReferenceError" in found


def test_chromium_renders_every_chart_without_console_messages(page: Path, tmp_path: Path) -> None:
    p = browse(page, tmp_path / "profile", "--dump-dom")
    assert p.returncode == 0, p.stderr[-2000:]
    dom = p.stdout
    assert console_lines(p.stderr) == []
    for chart in CHARTS:
        assert re.search(rf'<svg[^>]*id="{chart}"', dom), chart
    assert dom.count("<svg") == len(CHARTS)
    assert dom.count("<rect") > 50  # bars drawn, not empty frames
    for section in ("inventory", "measured", "outliers", "savings", "workloads"):
        assert f'<section id="{section}">' in dom


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def test_screenshot_at_1280_px_is_a_real_picture(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "review.png"
    p = browse(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2400")
    assert p.returncode == 0, p.stderr[-2000:]
    assert console_lines(p.stderr) == []
    data = shot.read_bytes()
    width, height, raw = _png_pixels(data)
    assert (width, height) == (1280, 2400)
    assert len(data) > 50_000  # text and charts do not compress to nothing
    # many distinct byte values across the picture: not a blank or single-colour page
    assert len(set(raw[:: max(1, len(raw) // 200_000)])) > 100


MEASURE = """<script>
window.addEventListener('load', () => {
  const out = {tables: [], clipped: []};
  document.querySelectorAll('.panel').forEach(panel => {
    const table = panel.querySelector('table');
    if (!table) return;
    const right = panel.getBoundingClientRect().right;
    out.tables.push({
      section: panel.closest('section').id,
      scrolls: panel.scrollWidth > panel.clientWidth,
      hidden: [...table.querySelectorAll('thead th')]
        .filter(th => th.getBoundingClientRect().right > right).map(th => th.textContent),
    });
  });
  document.querySelectorAll('svg.chart').forEach(svg => {
    const width = svg.viewBox.baseVal.width;
    svg.querySelectorAll('text').forEach(t => {
      const box = t.getBBox();
      if (box.x < -0.5 || box.x + box.width > width + 0.5) out.clipped.push(t.textContent);
      if (t.textContent.includes('\\u2026') && svg.id.startsWith('cost-'))
        out.clipped.push(t.textContent);
    });
  });
  document.body.innerHTML = '<pre id="layout"></pre>';
  document.getElementById('layout').textContent = JSON.stringify(out);
});
</script></body>"""


def test_at_1280_px_tables_do_not_scroll_and_chart_labels_are_whole(
    page: Path, tmp_path: Path
) -> None:
    """Measured in the browser: every table fits its panel (ids and cost columns visible with
    no horizontal scrolling) and no chart text runs outside its SVG; instance-type ids in the
    cost charts are never shortened. The page forbids scripts; this copy adds one to measure."""
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probe = tmp_path / "measure.html"
    probe.write_text(text.replace("</body>", MEASURE))
    p = browse(probe, tmp_path / "profile", "--dump-dom", "--window-size=1280,2400")
    assert p.returncode == 0, p.stderr[-2000:]
    found = re.search(r'<pre id="layout">(.*?)</pre>', p.stdout, flags=re.S)
    assert found is not None, p.stdout[-2000:]
    layout = json.loads(html.unescape(found.group(1)))
    sections = {t["section"] for t in layout["tables"]}
    assert {"measured", "outliers", "savings", "workloads"} <= sections
    assert [t for t in layout["tables"] if t["scrolls"] or t["hidden"]] == []
    assert layout["clipped"] == []
