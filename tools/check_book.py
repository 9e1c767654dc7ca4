"""Open every page of the built book in headless Chromium and fail on what a reader would see broken.

    python tools/check_book.py _build/html [--screenshots _build/screenshots]

Per page (file:// URLs, no server, no network): an error or traceback shown on the page (error outputs,
"Traceback ...", "XxxError: ..." in an output cell, docutils system messages or unresolved references),
an image that fails to load or is empty (naturalWidth 0), a formula left unrendered (raw \\( \\[ $$ text,
MathJax missing, or a TeX error inside a formula), a broken internal link (a local file that does not exist,
or an #anchor that the target page lacks), and anything the page loads from another host (scripts, styles,
images, frames); at a 1,280 x 900 window, a table wider than the content column or scrolling sideways, a claims
table whose first column holds over 100 characters, and on the reproduction page a first figure further than
1,350 px from the top. A full-page screenshot of each page goes to --screenshots. Exit status 1 when any page
fails. Uses Debian's `chromium` and `chromium-driver` (`make check-book` installs them when missing).
"""

from __future__ import annotations

import argparse
import base64
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service

SKIP_DIRS = {"_static", "_sources", "_images", "_downloads"}
MAX_SCREENSHOT_HEIGHT = 12_000
WINDOW = (1280, 900)  # a laptop's browser window, the width every layout check reads the page at
MAX_TITLE = 100  # characters in the first column of a claims table: a short title, not the claim's statement
# Pages whose first figure must start within a screen and a half of the top (the book's front door).
FIRST_SCREEN = {"book/reproduction.html": 1350}

# Runs in the page once it has loaded; calls back when MathJax (if the page has math) has finished.
WAIT_FOR_MATH = """
const done = arguments[arguments.length - 1];
if (!document.querySelector('.math.notranslate')) { done('no math'); return; }
if (!document.querySelector('script[src*="MathJax.js"]')) { done('the page has math but loads no MathJax'); return; }
const started = Date.now();
(function wait() {
  if (window.MathJax && MathJax.Hub && MathJax.isReady) { MathJax.Hub.Queue(() => done('rendered')); }
  else if (Date.now() - started > 20000) { done('MathJax did not load'); }
  else { setTimeout(wait, 100); }
})();
"""

# Runs after the math: returns what a reader would see broken on this page.
INSPECT = r"""
const MAX_TITLE = arguments[0];
const out = {errors: [], images: [], math: [], loads: [], links: []};
const article = document.querySelector('main') || document.body;
// 1. errors and tracebacks
const shownErrors = '.output.traceback, .output.error, .output.stderr, div.system-message, .problematic';
for (const el of article.querySelectorAll(shownErrors)) {
  out.errors.push(el.className + ': ' + el.innerText.slice(0, 200));
}
for (const el of article.querySelectorAll('.cell_output, .output')) {
  const text = el.innerText;
  const m = text.match(/Traceback \(most recent call last\)|^\s*\w*(Error|Exception): .*$/m);
  if (m) out.errors.push('output cell: ' + m[0].slice(0, 200));
}
// 2. images
for (const img of document.images) {
  if (!img.complete || img.naturalWidth === 0 || img.naturalHeight === 0) out.images.push(img.getAttribute('src'));
}
// 3. math
const hasMath = !!document.querySelector('.math.notranslate');
if (hasMath && !(window.MathJax && window.MathJax.Hub)) out.math.push('the page has math but MathJax is not loaded');
for (const el of document.querySelectorAll('.math.notranslate')) {   // Sphinx's formulas, not MathJax's spans
  if (el.querySelector('.MathJax_Error') || !el.querySelector('.MathJax, .MathJax_SVG, .MathJax_CHTML')) {
    out.math.push('not rendered: ' + el.innerText.slice(0, 120));
  }
}
const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA']);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  let parent = node.parentElement, inCode = false;
  while (parent && parent !== article) {
    if (skip.has(parent.tagName) || parent.classList.contains('highlight')) { inCode = true; break; }
    parent = parent.parentElement;
  }
  if (inCode) continue;
  const m = node.textContent.match(/\\\(|\\\[|\$\$|\\begin\{/);
  if (m) out.math.push('raw TeX left in the text: ' + node.textContent.trim().slice(0, 120));
}
if (window.MathJax && MathJax.Hub && MathJax.Hub.getAllJax) {
  const hasError = (node) => !!node && (node.type === 'merror' || (node.data || []).some(hasError));
  for (const jax of MathJax.Hub.getAllJax()) {
    if (hasError(jax.root)) out.math.push('TeX error in: ' + jax.originalText.slice(0, 120));
  }
}
if (/Math Processing Error/.test(document.body.innerText)) out.math.push('MathJax shows "Math Processing Error"');
// 4. loads from other hosts
const remote = (url) => /^(https?:)?\/\//i.test(url || '');
const loaders = 'script[src], img[src], iframe[src], source[src], video[src], audio[src]';
for (const el of document.querySelectorAll(loaders)) {
  if (remote(el.getAttribute('src'))) out.loads.push(el.tagName.toLowerCase() + ' ' + el.getAttribute('src'));
}
for (const el of document.querySelectorAll('link[href]')) {
  const rel = (el.getAttribute('rel') || '').toLowerCase();
  if (/stylesheet|preload|icon|modulepreload|prefetch/.test(rel) && remote(el.getAttribute('href'))) {
    out.loads.push('link ' + rel + ' ' + el.getAttribute('href'));
  }
}
for (const entry of performance.getEntriesByType('resource')) {
  if (!entry.name.startsWith('file:') && !entry.name.startsWith('data:')) out.loads.push('fetched ' + entry.name);
}
// 6. layout at this window's width: a table wider than the content column (or scrolling sideways), a claims
// table whose first column holds more than a short title, and where the first figure starts
out.wide = []; out.long = [];
const column = (document.querySelector('.bd-article-container') || article).getBoundingClientRect();
for (const table of article.querySelectorAll('table')) {
  const box = table.getBoundingClientRect(), name = (table.querySelector('th, td') || table).innerText.slice(0, 40);
  let scrolls = false;
  for (let el = table; el && el !== article; el = el.parentElement) {
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible') { scrolls = true; break; }
  }
  if (box.right > column.right + 1 || box.left < column.left - 1 || scrolls) {
    out.wide.push(`table starting "${name}" is ${Math.round(Math.max(box.width, table.scrollWidth))} px wide ` +
                  `in a column of ${Math.round(column.width)} px` + (scrolls ? ' (scrolls sideways)' : ''));
  }
  if (table.classList.contains('claims-table')) {
    for (const row of table.querySelectorAll('tbody tr')) {
      const title = row.cells[0] ? row.cells[0].innerText.split('\n')[0] : '';
      if (title.length > MAX_TITLE) out.long.push(title.slice(0, 60) + '... (' + title.length + ' characters)');
    }
  }
}
const figures = [...article.querySelectorAll('.cell_output img, figure img')].map((img) => img.getBoundingClientRect().top + window.scrollY);
out.firstFigure = figures.length ? Math.min(...figures) : null;
// 5. links and assets, checked in Python
for (const el of document.querySelectorAll('a[href], link[href], script[src], img[src]')) {
  out.links.push(el.getAttribute('href') || el.getAttribute('src'));
}
return out;
"""


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)


_ANCHORS: dict[Path, set[str]] = {}


def anchors(page: Path) -> set[str]:
    if page not in _ANCHORS:
        parser = _Anchors()
        parser.feed(page.read_text(errors="replace"))
        _ANCHORS[page] = parser.ids
    return _ANCHORS[page]


def broken_links(page: Path, root: Path, links: list[str]) -> list[str]:
    """Local links and assets of `page` whose file is missing, or whose #anchor the target lacks."""
    broken = []
    for link in sorted(set(links)):
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:")):
            continue
        target = page.resolve() if not parts.path else (page.parent / unquote(parts.path)).resolve()
        if parts.path and target.is_dir():
            target = target / "index.html"
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif not target.is_relative_to(root.resolve()):
            broken.append(f"{link} (outside the book)")
        elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in anchors(target):
            broken.append(f"{link} (no #{parts.fragment} on {target.name})")
    return broken


def screenshot(driver, path: Path) -> None:
    """A full-page PNG (Chrome DevTools: capture beyond the viewport), height capped."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], MAX_SCREENSHOT_HEIGHT), "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def make_driver() -> webdriver.Chrome:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    chromedriver = shutil.which("chromedriver")
    if not browser or not chromedriver:
        raise SystemExit(
            "check_book: needs Debian's `chromium` and `chromium-driver` (apt-get install -y chromium "
            "chromium-driver); `make check-book` installs them"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--hide-scrollbars",
        "--allow-file-access-from-files",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=chromedriver))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(30)
    return driver


_REFRESH = re.compile(r'<meta[^>]+http-equiv="refresh"[^>]+url=([^"]+)"', re.I)


def check_page(driver, page: Path, root: Path, shots: Path | None) -> list[str]:
    redirect = _REFRESH.search(page.read_text(errors="replace"))
    if redirect:  # jupyter-book's index.html only forwards to the root page
        return broken_links(page, root, [redirect.group(1)])
    driver.get(page.resolve().as_uri())
    try:
        math_state = driver.execute_async_script(WAIT_FOR_MATH)
    except TimeoutException:
        math_state = "MathJax did not finish"
    found = driver.execute_script(INSPECT, MAX_TITLE)
    problems = [f"error on the page: {e}" for e in found["errors"]]
    problems += [f"image failed to load or is empty: {src}" for src in found["images"]]
    if math_state not in ("no math", "rendered"):
        problems.append(math_state)
    problems += [f"math: {m}" for m in found["math"]]
    problems += [f"loads from another host: {url}" for url in sorted(set(found["loads"]))]
    problems += [f"broken link: {link}" for link in broken_links(page, root, found["links"])]
    problems += [f"wider than the content column at {WINDOW[0]} px: {table}" for table in found["wide"]]
    problems += [f"claims-table first column over {MAX_TITLE} characters: {title}" for title in found["long"]]
    limit = FIRST_SCREEN.get(page.relative_to(root).as_posix())
    if limit is not None and (found["firstFigure"] is None or found["firstFigure"] > limit):
        where = "no figure" if found["firstFigure"] is None else f"the first figure at {found['firstFigure']:.0f} px"
        problems.append(f"{where}: the first figure must start within {limit} px of the top")
    if shots is not None:
        name = page.relative_to(root).with_suffix(".png").as_posix().replace("/", "__")
        screenshot(driver, shots / name)
    return problems


_REMOTE_TAG = re.compile(
    r'<(script|img|iframe|source|video|audio|embed)\b[^>]*\ssrc="((?:https?:)?//[^"]+)"'
    r'|<link\b(?=[^>]*\srel="(?:stylesheet|preload|icon|modulepreload|prefetch)")'
    r'[^>]*\shref="((?:https?:)?//[^"]+)"',
    re.I,
)
_REMOTE_CSS = re.compile(r'(?:@import\s+|url\(\s*)["\']?((?:https?:)?//[^"\')\s]+)', re.I)


def remote_loads(root: Path) -> list[str]:
    """A static scan of every HTML and CSS file of the build for loads from another host."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.suffix == ".html":
            found += [
                f"{path.relative_to(root)}: {m.group(2) or m.group(3)}"
                for m in _REMOTE_TAG.finditer(path.read_text(errors="replace"))
            ]
        elif path.suffix == ".css":
            text = re.sub(r"/\*.*?\*/", "", path.read_text(errors="replace"), flags=re.S)  # not comments
            found += [f"{path.relative_to(root)}: {m.group(1)}" for m in _REMOTE_CSS.finditer(text)]
    return found


def pages_of(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.html")
        if not SKIP_DIRS & set(p.relative_to(root).parts[:-1]) and not p.name.startswith("_")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path, help="the built book, e.g. _build/html")
    parser.add_argument("--screenshots", type=Path, default=None, help="folder for one PNG per page")
    args = parser.parse_args(argv)
    root = args.html.resolve()
    pages = pages_of(root)
    if not pages:
        print(f"check_book: no pages under {root}; build the book first (make book)")
        return 1
    if args.screenshots:
        shutil.rmtree(args.screenshots, ignore_errors=True)
        args.screenshots.mkdir(parents=True)
    failed = 0
    for load in remote_loads(root):
        failed += 1
        print(f"FAIL loads from another host: {load}")
    driver = make_driver()
    try:
        for page in pages:
            problems = check_page(driver, page, root, args.screenshots)
            failed += bool(problems)
            print(f"{'FAIL' if problems else 'ok  '} {page.relative_to(root)}")
            for problem in problems:
                print(f"       {problem}")
    finally:
        driver.quit()
    where = f"; screenshots in {args.screenshots}" if args.screenshots else ""
    print(f"check_book: {len(pages)} pages and a scan of every HTML/CSS file, {failed} problem(s){where}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
