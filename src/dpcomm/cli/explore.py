"""``dpcomm explore``: start the explorer (a local web app) and say where it listens."""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import signal
import webbrowser
from typing import Any

from dpcomm.cli.output import bounded_int
from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.explorer import DEFAULT_HOST, DEFAULT_PORT

EXPLORE_DESCRIPTION = """\
Start the explorer, a local web app: controls for T, σ, n, d, δ, the grouping sets or
iterations and the sources; live, the best valid ε and the certified lower bound (one round and
composed), the network load and channels per node, the expected fraction of tuples used, and a
traffic-analysis attacker's success beside the most (ε, δ)-DP allows; the planner's least
network load against ε (choosing a point sets the controls); the dpcomm commands and the Python
code of the configuration; a query run with the countermeasure beside its exact answer. It
serves every script and style itself (no connection beyond this machine). Needs the optional
dependency Dash: pip install 'dpcomm[explore]'.
"""

#: What ``dpcomm explore`` says when Dash is not installed.
MISSING_DASH = (
    "the explorer needs the optional dependency Dash: pip install 'dpcomm[explore]' "
    "(or, in a checkout, make, which installs the dev extras)"
)


def host_address(text: str) -> str:
    """An argparse type: an IP address to listen on, or ``localhost``."""
    if text == "localhost":
        return text
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an IP address (127.0.0.1, 0.0.0.0 for every interface, ::1) or "
            f"localhost, got {text!r}"
        ) from None


def _stop(_signal: int, _frame: Any) -> None:
    raise SystemExit(0)  # SIGTERM: leave as Ctrl+C does, stopping the worker processes


def command_explore(args: argparse.Namespace) -> int:
    """``dpcomm explore``: serve until interrupted (or terminated)."""
    if importlib.util.find_spec("dash") is None:
        raise DpcommError(MISSING_DASH)
    from dpcomm.explorer import check_free, serve

    try:
        check_free(host=args.host, port=args.port)
    except InvalidParameterError as error:  # named by its flag
        raise InvalidParameterError("--port", error.allowed, error.given) from error
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}/"
    print(f"dpcomm explorer: {url} (Ctrl+C stops it)", flush=True)
    if args.open:
        webbrowser.open(url)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        serve(host=args.host, port=args.port)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def add_explore_command(commands: Any) -> None:
    """Register ``explore`` on the top-level subparsers."""
    explore = commands.add_parser(
        "explore",
        help="the explorer: σ, n, d and the rest as controls, privacy and costs live (a web app)",
        description=EXPLORE_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explore.add_argument(
        "--host",
        type=host_address,
        default=DEFAULT_HOST,
        help=f"IP address to listen on (default {DEFAULT_HOST}, this machine only; 0.0.0.0 "
        "for every interface)",
    )
    explore.add_argument(
        "--port",
        type=bounded_int(1, 65535),
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT})",
    )
    explore.add_argument(
        "--open", action="store_true", help="open the page in the default web browser"
    )
    explore.set_defaults(handler=command_explore)
