"""The documentation site in a real browser (headless Chromium): what a reader sees.

The site is built strictly once (``docs_site``) and served over HTTP on loopback; the pages are
read after their scripts ran. Formulas must be typeset by the site's own MathJax (SVG in the
page, no TeX source left), docstring examples must be code blocks with their ``>>>`` prompts,
and two pages are saved as the screenshots the README links (docs/images/).
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import keep_screenshot

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


@pytest.fixture(scope="module")
def served_site(docs_site: Path) -> Iterator[str]:
    """The built site over HTTP on a free loopback port (as a reader's browser gets it)."""
    handler = functools.partial(
        type("Quiet", (http.server.SimpleHTTPRequestHandler,), {"log_message": lambda *a: None}),
        directory=str(docs_site),
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _open(chromium: Any, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    chromium.get(url)
    WebDriverWait(chromium, 30).until(
        lambda driver: driver.execute_script("return document.readyState") == "complete"
    )


def test_formulas_are_typeset_by_the_sites_mathjax(chromium: Any, served_site: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    _open(chromium, f"{served_site}/accounting/")
    typeset = WebDriverWait(chromium, 60).until(
        lambda driver: driver.execute_script(
            "const all = document.querySelectorAll('.arithmatex');"
            "const done = document.querySelectorAll('.arithmatex mjx-container svg');"
            "return all.length > 0 && done.length >= all.length ? [all.length, done.length] : false"
        )
    )
    assert typeset[0] >= 50
    # No formula left as TeX source, none in MathJax's error colour.
    source_left = chromium.execute_script(
        "return [...document.querySelectorAll('.arithmatex')]"
        ".filter(e => !e.querySelector('mjx-container')).map(e => e.textContent).slice(0, 3)"
    )
    assert source_left == []
    errors = chromium.execute_script("return document.querySelectorAll('mjx-merror').length")
    assert errors == 0
    hosts = chromium.execute_script(
        "return [...new Set(performance.getEntriesByType('resource')"
        ".map(r => new URL(r.name).host))]"
    )
    assert hosts == [served_site.removeprefix("http://")], hosts
    formula = chromium.execute_script(
        "return document.querySelector('.arithmatex mjx-container').getBoundingClientRect().top"
    )
    chromium.execute_script(f"window.scrollTo(0, {max(0, formula - 300)})")
    keep_screenshot(IMAGES / "docs-accounting.png", chromium.get_screenshot_as_png())


def test_api_examples_are_code_blocks_with_their_prompts(chromium: Any, served_site: str) -> None:
    _open(chromium, f"{served_site}/api/front-door/")
    blocks = chromium.execute_script(
        "return [...document.querySelectorAll('pre code')].map(c => c.innerText)"
        ".filter(t => t.includes('>>> '))"
    )
    assert len(blocks) >= 5
    assert any(">>> import dpcomm" in block and "\n" in block for block in blocks)
    text = chromium.execute_script("return document.querySelector('article').innerText")
    assert ":func:" not in text and ":class:" not in text
    assert (
        chromium.execute_script("return document.querySelectorAll('article blockquote').length")
        == 0
    )
    first = chromium.execute_script(
        "const c = [...document.querySelectorAll('pre code')]"
        ".find(c => c.innerText.includes('>>> '));"
        "c.scrollIntoView(); window.scrollBy(0, -200); return c.innerText"
    )
    assert first.startswith(">>>")
    keep_screenshot(IMAGES / "docs-api.png", chromium.get_screenshot_as_png())
