"""The explorer's release: its controls, what is published, and a budget's ledger.

Layout and one callback (the release's numbers computed in a worker process of their own, the
ledger read in the server's): every number shown is a field of
`dpcomm.experiments.explore_release.ReleaseNumbers` (the release report a run gives before
drawing noise) or `dpcomm.experiments.explore_release.LedgerNumbers`, formatted, with its full
value in a ``data-value`` attribute (what the browser test reads).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, Literal

from dash import Dash, Input, Output, dcc, html

from dpcomm.errors import DpcommError
from dpcomm.experiments.explore import ExplorerSettings, explore
from dpcomm.experiments.explore_release import (
    LedgerNumbers,
    ReleaseNumbers,
    ReleaseSettings,
    ledger_numbers,
    release_numbers,
)

#: The release's controls, in the order the callback reads them (then the ledger's path).
RELEASE_CONTROLS = (
    "release-mechanism",
    "release-epsilon",
    "release-delta",
    "release-low",
    "release-high",
)
RELEASE_DEFAULTS = ReleaseSettings()

#: A formatter of numbers (the app's: significant digits, ∞ and "—").
Format = Callable[..., str]


def _input(
    id_: str, value: float | str | None, *, kind: Literal["number", "text"] = "number"
) -> dcc.Input:
    step: dict[str, Any] = {"step": "any"} if kind == "number" else {}
    return dcc.Input(id=id_, type=kind, value=value, debounce=True, className="num", **step)


def _control(label: str, control: Any, hint: str = "") -> html.Div:
    return html.Div(
        [html.Label(label, className="label"), control, html.Div(hint, className="hint")],
        className="control",
    )


def release_controls() -> html.Div:
    """The release's controls (beside the traffic's) and the ledger's path."""
    defaults = RELEASE_DEFAULTS
    mechanisms = {
        "none": "none (the exact result)",
        "laplace": "Laplace",
        "gaussian": "Gaussian",
    }
    return html.Div(
        [
            html.H2("Release (central DP on the result)"),
            _control(
                "Mechanism",
                dcc.RadioItems(
                    id="release-mechanism",
                    options=[{"label": t, "value": v} for v, t in mechanisms.items()],
                    value=defaults.mechanism,
                    inline=True,
                ),
                "publishes COUNT(*) and AVG(m1) for every key of each grouping set",
            ),
            _control("ε2 of the release", _input("release-epsilon", defaults.epsilon)),
            _control("δ2 of the release", _input("release-delta", defaults.delta), "Gaussian only"),
            html.Div(
                [
                    _control("lo", _input("release-low", defaults.low)),
                    _control("hi", _input("release-high", defaults.high)),
                ],
                className="inline",
            ),
            html.Div("bounds each source clamps m1 to", className="hint"),
            _control(
                "Budget ledger",
                _input("ledger", "", kind="text"),
                "the path of a ledger file (dpcomm.Budget, --ledger): what it has spent",
            ),
        ],
        className="release-controls",
    )


def release_panel() -> html.Div:
    """Where the release's numbers and the ledger's are shown."""
    return html.Div(
        [
            html.H3("What is published, and the guarantee of traffic and release together"),
            html.Div(id="release-problem", className="problem"),
            html.Div(id="release"),
            html.H3("Budget"),
            html.Div(id="ledger-view"),
        ]
    )


def _value(id_: str, value: float | int | None, text: str) -> html.Span:
    data: dict[str, Any] = {"data-value": repr(value)}
    return html.Span(text, id=id_, className="value", **data)


def _table(rows: list[tuple[str, Any, str]]) -> html.Table:
    return html.Table(
        [html.Tr([html.Th(label), html.Td(value), html.Td(note)]) for label, value, note in rows]
    )


def release_view(numbers: ReleaseNumbers, number: Format) -> html.Div:
    """The release: ε of traffic and release together, ε1, ε2, each noise, the error."""
    report = numbers.report
    composed = report.composed_epsilon
    rows = [
        (
            "ε, traffic and release together",
            _value("release-epsilon-total", report.epsilon_total, number(report.epsilon_total)),
            f"at δ = {report.composed_delta:g}: the smaller of the PLD composition "
            f"({number(composed)}) and the sum ε1 + ε2 ({number(report.summed_epsilon)}); "
            "what a run reports and a budget is charged",
        ),
        (
            "ε1, the traffic",
            _value(
                "release-epsilon-traffic", numbers.traffic_epsilon, number(numbers.traffic_epsilon)
            ),
            "the plan's ε above",
        ),
        (
            "ε2, the release",
            _value("release-epsilon-two", report.epsilon, number(report.epsilon)),
            f"{report.mechanism}, δ2 = {report.delta:g}",
        ),
    ]
    for index, aggregate in enumerate(report.aggregates):
        rows.append(
            (
                f"noise of {aggregate.aggregate}",
                _value(
                    f"release-noise-{index}",
                    aggregate.standard_deviation,
                    f"± {number(aggregate.standard_deviation)}",
                ),
                f"standard deviation; {aggregate.noise}, sensitivity "
                f"{number(aggregate.sensitivity_l1)} (one row replaced), "
                f"ε {number(aggregate.epsilon)}",
            )
        )
    error = numbers.expected_relative_error
    rows.append(
        (
            "expected relative error of what is published",
            _value("release-error", error, f"{error:.1%}"),
            "root mean square over every published COUNT and SUM, noise and sampling, for a "
            "cell holding its share of the rows",
        )
    )
    return html.Div([_table(rows), html.Div(numbers.sql, className="hint")], className="numbers")


def ledger_view(ledger: LedgerNumbers, number: Format) -> html.Div:
    """A ledger's budget, what it has spent and what is left, and whether this run fits."""
    spent, left = ledger.spent, ledger.remaining
    verdict = {True: "charged", False: "refused (beyond what is left)", None: "—"}[ledger.admits]
    rows = [
        (
            "budget",
            html.Span(f"ε = {number(ledger.budget[0])}, δ = {ledger.budget[1]:g}"),
            ledger.path,
        ),
        (
            "spent",
            _value("ledger-spent", spent.epsilon, f"ε = {number(spent.epsilon)}"),
            f"δ = {spent.delta:g}, {spent.charges} charge{'s' if spent.charges != 1 else ''}",
        ),
        ("left", _value("ledger-remaining", left[0], f"ε = {number(left[0])}"), f"δ = {left[1]:g}"),
        ("a run of this configuration", _value("ledger-admits", ledger.admits, verdict), ""),
    ]
    return html.Div(_table(rows), className="numbers")


def _release_settings(values: tuple[Any, ...]) -> ReleaseSettings:
    mechanism, epsilon, delta, low, high = values
    return ReleaseSettings(mechanism=mechanism, epsilon=epsilon, delta=delta, low=low, high=high)


def _guarantee(
    run: Callable[..., Any], settings: ExplorerSettings, release: ReleaseSettings
) -> tuple[Any, tuple[float, float]]:
    """The release's numbers (None without one) and the (ε, δ) a run would be charged."""
    if release.mechanism == "none":
        composed = explore(settings).composed
        return None, (composed.epsilon, settings.delta)
    numbers = run(release_numbers, settings, release)
    return numbers, (numbers.report.epsilon_total, numbers.report.composed_delta)


def register_release(
    app: Dash,
    controls: tuple[str, ...],
    settings_of: Callable[[dict[str, Any]], ExplorerSettings],
    number: Format,
    run: Callable[..., Any],
) -> None:
    """The release's and the ledger's views of the traffic ``controls`` and the release's.

    The release's numbers are computed by ``run`` (a worker process of their own: its
    composition with the traffic takes tens of milliseconds, which would otherwise hold the
    server's interpreter lock while the numbers panel is computed); the ledger is read here.
    """
    inputs = [Input(name, "value") for name in (*controls, *RELEASE_CONTROLS, "ledger")]

    @app.callback(
        Output("release", "children"),
        Output("release-problem", "children"),
        Output("ledger-view", "children"),
        *inputs,
    )
    def update_release(*values: Any) -> tuple[Any, str, Any]:
        traffic = values[: len(controls)]
        chosen = values[len(controls) : len(controls) + len(RELEASE_CONTROLS)]
        path = values[-1]
        try:
            settings = settings_of(dict(zip(controls, traffic, strict=True)))
            release = _release_settings(chosen)
            numbers, charge = _guarantee(run, settings, release)
        except DpcommError as error:
            return None, str(error), None
        of: dict[str, Any] = {
            "data-of": json.dumps(
                {"settings": asdict(settings), "release": asdict(release)}, sort_keys=True
            )
        }
        if numbers is None:
            view = html.Div("No release: the result is exact over the delivered tuples (not DP).")
        else:
            view = release_view(numbers, number)
        shown = html.Div(view, id="release-of", **of)
        if not path:
            return shown, "", html.Div("Type a ledger's path to see what it has spent.")
        try:
            ledger = ledger_view(ledger_numbers(str(path), charge), number)
        except DpcommError as error:
            ledger = html.Div(str(error), className="problem")
        of_ledger: dict[str, Any] = {"data-path": str(path), **of}
        return shown, "", html.Div(ledger, id="ledger-of", **of_ledger)
