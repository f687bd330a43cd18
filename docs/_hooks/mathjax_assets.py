"""MkDocs hook: MathJax from a Python package into the site, so formulas render offline.

The pages load MathJax 3 from the site itself (``assets/mathjax/``), never from a CDN. Its files
come from the ``django-static-mathjax`` wheel (MathJax 3.2.2's ``es5`` build, installed by the
``dev`` extra; the package has no dependency, Django included). Only what the pages use is
added: the TeX-to-SVG component (SVG output draws the glyphs as paths, so no web font has to
load), the TeX extensions it loads on demand, and the menu and accessibility modules.
"""

from importlib.resources import files
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

#: Where the site holds MathJax (``extra_javascript`` names ``ASSETS/tex-svg.js``).
ASSETS = "assets/mathjax"
#: The parts of MathJax's ``es5`` folder the pages use.
PARTS = ("tex-svg.js", "input/tex/extensions", "ui", "a11y")


def mathjax_es5() -> Path:
    """MathJax's ``es5`` folder as installed."""
    return Path(str(files("mathjax"))) / "static" / "mathjax" / "es5"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add MathJax's files to the site's."""
    root = mathjax_es5()
    for part in PARTS:
        path = root / part
        for source in sorted(path.rglob("*") if path.is_dir() else [path]):
            if source.is_file():
                uri = f"{ASSETS}/{source.relative_to(root).as_posix()}"
                files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
