"""``dpcomm explore``: σ, n, d and the rest as controls, their privacy and costs live, in a browser.

A local web app (Dash, whose scripts and styles it serves from the installed package: it works
offline). Every number it shows is computed by `dpcomm.experiments.explore`; this package
only lays them out. `make_app` builds the app, `serve` runs it.

Dash is an optional dependency: ``pip install 'dpcomm[explore]'``.
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.explorer.app import check_free as check_free, make_app as make_app, serve as serve

__getattr__, __dir__ = attach(__name__, __file__)

#: Where ``dpcomm explore`` listens unless told otherwise.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "check_free", "make_app", "serve"]
