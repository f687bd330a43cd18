"""The documentation site a reader gets: code blocks, links, formulas, no tracker history.

The site is built strictly once (``docs_site``); its HTML is read here as a browser gets it.
The sources are checked too, so that a page or docstring not yet in the site cannot carry a
Sphinx role or an issue number into it later.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROLES = "func|class|meth|mod|attr|data|exc|obj|const"
ROLE = re.compile(rf":(?:py:)?(?:{ROLES}):`")
#: A role as a page shows it: Markdown turns its backquotes into a code element.
SHOWN_ROLE = re.compile(rf"(?<![\w/]):(?:py:)?(?:{ROLES}):(?=\S)")
ISSUE = re.compile(r"issue ?#?[0-9]+", re.I)


class Page(HTMLParser):
    """A page's text, split by where it stands: in code (``pre``/``code``), in math
    (``class="arithmatex"``) or in prose; its ``blockquote`` count and the assets it loads."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, in code, in math)
        self.code: list[str] = []
        self.math: list[str] = []
        self.prose: list[str] = []
        self.blockquotes = 0
        self.assets: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        code, math = self.stack[-1][1:] if self.stack else (False, False)
        code = code or tag in ("pre", "code")
        math = math or "arithmatex" in (attributes.get("class") or "").split()
        self.blockquotes += tag == "blockquote"
        if tag == "script" and attributes.get("src"):
            self.assets.append(attributes["src"] or "")
        if tag == "link" and attributes.get("rel") not in ("canonical", "alternate", None):
            self.assets.append(attributes.get("href") or "")  # stylesheets, icons, preconnects
        if tag not in ("br", "img", "input", "link", "meta", "hr", "source", "wbr"):
            self.stack.append((tag, code, math))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        code, math = self.stack[-1][1:] if self.stack else (False, False)
        (self.code if code else self.math if math else self.prose).append(data)


def pages(site: Path) -> dict[str, Page]:
    return {
        path.relative_to(site).as_posix(): Page(path.read_text(encoding="utf-8"))
        for path in sorted(site.rglob("*.html"))
        if "assets" not in path.parts
    }


@pytest.fixture(scope="module")
def site_pages(docs_site):
    return pages(docs_site)


def test_the_site_has_every_page_of_the_nav(site_pages):
    for page in ("index.html", "tutorial/index.html", "accounting/index.html"):
        assert page in site_pages
    assert sum(name.startswith("api/") for name in site_pages) >= 9


def test_docstring_examples_render_as_code_blocks(site_pages):
    api = {name: page for name, page in site_pages.items() if name.startswith("api/")}
    prompts = sum("".join(page.code).count(">>>") for page in api.values())
    assert prompts >= 100  # the docstrings' doctest lines, each in a code block
    for name, page in api.items():
        assert ">>>" not in "".join(page.prose), f"{name}: a >>> prompt outside a code block"
        assert page.blockquotes == 0, f"{name}: {page.blockquotes} blockquotes (a >>> as Markdown)"


def test_no_raw_role_and_every_reference_resolved(site_pages):
    for name, page in site_pages.items():
        text = "".join(page.prose) + "".join(page.code)
        assert not SHOWN_ROLE.search(text), f"{name}: a Sphinx role: {SHOWN_ROLE.search(text)}"
        prose = "".join(page.prose)
        assert not re.search(r"\]\[[\w.]*\]", prose), f"{name}: an unresolved cross-reference"


def test_no_issue_number_in_the_site(site_pages):
    for name, page in site_pages.items():
        found = ISSUE.search("".join(page.prose + page.code))
        assert found is None, f"{name}: {found.group(0)!r}"


def test_formulas_are_math_rendered_by_the_sites_own_mathjax(docs_site, site_pages):
    accounting = site_pages["accounting/index.html"]
    assert len(accounting.math) >= 50
    prose = "".join(accounting.prose)
    for markup in ("_{", "^{", "]_+", "\\frac", "\\sigma"):
        assert markup not in prose, f"formula markup {markup!r} outside math"
    mathjax = [src for src in accounting.assets if src.endswith("mathjax/tex-svg.js")]
    assert mathjax, accounting.assets
    served = (docs_site / "accounting" / mathjax[0]).resolve()
    assert served.is_relative_to(docs_site.resolve()) and "MathJax" in served.read_text()
    for name, page in site_pages.items():  # every asset from the site itself, none from a CDN
        remote = [src for src in page.assets if re.match(r"(https?:)?//", src)]
        assert not remote, f"{name} loads {remote}"


def test_sources_carry_no_role_and_no_issue_number():
    sources = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "src").rglob("*.py")]
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in sorted(sources)
        for pattern in (ROLE, ISSUE)
        for match in pattern.finditer(path.read_text(encoding="utf-8"))
    ]
    assert len(sources) > 100 and not found, found
