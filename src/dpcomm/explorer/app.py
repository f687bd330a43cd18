"""The explorer's page: controls, the numbers of :mod:`dpcomm.experiments.explore`, the front.

Layout and callbacks only: every number shown is a field of
:class:`~dpcomm.experiments.explore.ExplorerNumbers`,
:class:`~dpcomm.experiments.explore.AttackEstimate`,
:class:`~dpcomm.experiments.explore.FrontPoint` or
:class:`~dpcomm.experiments.explore.QueryComparison`, formatted. Each shown number carries its
full value in a ``data-value`` attribute (what the browser test reads).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import logging
import math
from dataclasses import asdict
from typing import Any

import dash
from dash import Dash, Input, Output, State, dcc, html

from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.experiments.explore import (
    MAX_CLUSTERS,
    AttackEstimate,
    ExplorerNumbers,
    ExplorerSettings,
    FrontPoint,
    attack,
    command_lines,
    explore,
    python_snippet,
    tradeoff_front,
)
from dpcomm.explorer import DEFAULT_HOST, DEFAULT_PORT
from dpcomm.explorer.query import query_against_exact

#: The largest d the slider offers (the planner's search goes as far); larger values are typed.
DUMMIES_SLIDER_MAX = 20_000
#: Rows of a query result shown.
SHOWN_ROWS = 50

#: The controls, in the order every callback reads them.
CONTROLS = (
    "workload",
    "mechanism",
    "targets",
    "sampling",
    "batch",
    "dummies",
    "delta",
    "clusters",
    "sources",
)

DEFAULTS = ExplorerSettings()

#: The example query of each table the query panel offers.
EXAMPLE_QUERIES = {
    "diabetes": "SELECT A, COUNT(*), AVG(I) FROM diabetes GROUP BY A",
    "synthetic": "SELECT g1, COUNT(*), AVG(m1) FROM t GROUP BY g1",
}


def _number(value: float | None, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits (∞ and "—" for None)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if math.isinf(value):
        return "∞"
    return f"{value:.{digits}g}"


def _value(id_: str, value: float | int | None, text: str | None = None) -> html.Span:
    """A shown number: its text, and its full value in ``data-value``."""
    shown = text if text is not None else _number(None if value is None else float(value))
    data: dict[str, Any] = {"data-value": repr(value)}
    return html.Span(shown, id=id_, className="value", **data)


def settings_of(values: dict[str, Any]) -> ExplorerSettings:
    """The controls' values as settings (an :class:`InvalidParameterError` names the control)."""
    for name, value in values.items():
        if value is None:
            raise InvalidParameterError(name, "a value", "nothing (empty or not a number)")
    return ExplorerSettings(
        workload=values["workload"],
        mechanism=values["mechanism"],
        num_targets=values["targets"],
        sampling_rate=values["sampling"],
        batch_size=values["batch"],
        num_dummies=values["dummies"],
        delta=values["delta"],
        num_clusters=values["clusters"],
        num_sources=values["sources"],
    )


def _settings_json(settings: ExplorerSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True)


# ---------------------------------------------------------------------------------- layout
def _labelled(label: str, control: Any, hint: str = "") -> html.Div:
    return html.Div(
        [html.Label(label, className="label"), control, html.Div(hint, className="hint")],
        className="control",
    )


def _number_input(id_: str, value: float, *, minimum: float, step: float | str) -> dcc.Input:
    return dcc.Input(
        id=id_, type="number", value=value, min=minimum, step=step, debounce=True, className="num"
    )


def _controls() -> html.Div:
    settings = DEFAULTS
    return html.Div(
        [
            html.H2("Configuration"),
            _labelled(
                "Workload",
                dcc.RadioItems(
                    id="workload",
                    options=[
                        {"label": "Aggregate (G grouping sets)", "value": "aggregate"},
                        {"label": "K-means (I iterations, K = T)", "value": "kmeans"},
                    ],
                    value=settings.workload,
                ),
            ),
            _labelled(
                "Countermeasure",
                dcc.RadioItems(
                    id="mechanism",
                    options=[
                        {"label": "scramblers (σ, n, d per scrambler)", "value": "scrambler"},
                        {"label": "local sampling + flooding (σ, d per source)", "value": "local"},
                    ],
                    value=settings.mechanism,
                ),
            ),
            _labelled(
                "σ, sampling rate",
                dcc.Slider(
                    id="sampling",
                    min=0,
                    max=1,
                    step=0.01,
                    value=settings.sampling_rate,
                    marks={0: "0", 0.25: "0.25", 0.5: "0.5", 0.75: "0.75", 1: "1"},
                ),
            ),
            _labelled(
                "d, dummies",
                dcc.Slider(
                    id="dummies",
                    min=0,
                    max=DUMMIES_SLIDER_MAX,
                    step=1,
                    value=settings.num_dummies,
                    marks={v: f"{v:,}" for v in (0, 5_000, 10_000, 15_000, 20_000)},
                ),
                "per scrambler, or per source (local: at most T − 1)",
            ),
            _labelled(
                "n, sources per scrambler",
                _number_input("batch", settings.batch_size, minimum=1, step=1),
                "the S sources are cut into ⌈S/n⌉ balanced batches",
            ),
            _labelled(
                "T, targets per cluster",
                _number_input("targets", settings.num_targets, minimum=2, step=1),
            ),
            _labelled(
                "G grouping sets / I iterations",
                _number_input("clusters", settings.num_clusters, minimum=1, step=1),
                f"composed (at most {MAX_CLUSTERS})",
            ),
            _labelled(
                "S, sources", _number_input("sources", settings.num_sources, minimum=1, step=1)
            ),
            _labelled(
                "δ of the whole plan",
                _number_input("delta", settings.delta, minimum=0, step="any"),
            ),
        ],
        className="panel controls",
    )


def _numbers_panel() -> html.Div:
    return html.Div(
        [
            html.H2("Privacy and costs"),
            html.Div(id="problem", className="problem"),
            html.Div(id="numbers"),
            html.H3("Traffic-analysis attacker"),
            dcc.Loading(html.Div(id="attack"), type="dot"),
        ],
        className="panel numbers",
    )


def _front_panel() -> html.Div:
    return html.Div(
        [
            html.H2("Least network load against ε (the planner)"),
            html.Div(
                [
                    html.Label("at least this fraction of tuples used ", className="label"),
                    _number_input("min-utility", 0.9, minimum=0, step=0.05),
                ],
                className="inline",
            ),
            dcc.Loading(
                dcc.Graph(id="front", config={"displaylogo": False}, style={"height": "340px"}),
                type="dot",
            ),
            html.Div(id="front-table"),
            dcc.Store(id="front-points"),
        ],
        className="panel front",
    )


def _code_panel() -> html.Div:
    return html.Div(
        [
            html.H2("Run it"),
            html.Div(
                [html.Span("dpcomm commands "), dcc.Clipboard(target_id="commands")],
                className="inline",
            ),
            html.Pre(id="commands", className="code"),
            html.Div(
                [html.Span("Python "), dcc.Clipboard(target_id="snippet")], className="inline"
            ),
            html.Pre(id="snippet", className="code"),
        ],
        className="panel code-panel",
    )


def _query_panel() -> html.Div:
    return html.Div(
        [
            html.H2("A query with this countermeasure, against the exact answer"),
            dcc.RadioItems(
                id="query-table",
                options=[
                    {"label": "the diabetes table (10,000 rows: A, B, I)", "value": "diabetes"},
                    {"label": "a synthetic table of S rows (g1..g4, m1, m2)", "value": "synthetic"},
                    {"label": "an uploaded CSV file", "value": "upload"},
                ],
                value="diabetes",
                inline=True,
            ),
            dcc.Upload(
                id="upload",
                children=html.Div("Drop a CSV file here, or click to choose one"),
                className="upload",
            ),
            html.Div(id="upload-name", className="hint"),
            dcc.Textarea(id="sql", value=EXAMPLE_QUERIES["diabetes"], className="sql"),
            html.Button("Run the query", id="run-query", n_clicks=0),
            dcc.Loading(html.Div(id="query-result"), type="dot"),
        ],
        className="panel query",
    )


def layout() -> html.Div:
    """The page."""
    return html.Div(
        [
            html.H1("dpcomm explorer"),
            html.P(
                "Choose the countermeasure of a plan's data-dependent clusters; its privacy, "
                "costs and utility follow. Every number is computed by the dpcomm library.",
                className="lead",
            ),
            html.Div(
                [_controls(), _numbers_panel(), _front_panel()],
                className="row",
            ),
            html.Div([_code_panel(), _query_panel()], className="row"),
        ],
        className="page",
    )


# ---------------------------------------------------------------------------------- views
def _numbers_view(numbers: ExplorerNumbers) -> html.Div:
    settings = numbers.settings
    one, composed = numbers.one_round, numbers.composed
    clusters = settings.num_clusters
    noun = settings.cluster_noun + ("s" if clusters != 1 else "")
    roles = ", ".join(f"{role} {count:,}" for role, count in numbers.channels_by_role.items())
    rows = [
        ("ε, one round", _value("epsilon-one", one.epsilon), f"method: {one.method}"),
        ("certified lower bound, one round", _value("lower-one", one.lower_bound), ""),
        (
            f"ε, {clusters} {noun} composed",
            _value("epsilon-composed", composed.epsilon),
            f"method: {composed.method} (what a run reports)",
        ),
        ("certified lower bound, composed", _value("lower-composed", composed.lower_bound), ""),
        (
            "network load (messages)",
            _value("load", numbers.network_load_messages, f"{numbers.network_load_messages:,}"),
            f"×{_number(numbers.load_overhead, 3)} the non-private "
            f"{numbers.nonprivate_load_messages:,}",
        ),
        (
            "secure channels per node (at most)",
            _value("channels", numbers.max_channels_per_node, f"{numbers.max_channels_per_node:,}"),
            roles,
        ),
        (
            "expected fraction of tuples used",
            _value("utility", numbers.tuples_used_fraction, f"{numbers.tuples_used_fraction:.1%}"),
            f"S_t = {numbers.sources_to_recruit:,} sources deliver S tuples in expectation",
        ),
    ]
    if numbers.batches is not None:
        rows.append(("batches of one cluster", html.Span(numbers.batches), ""))
    data: dict[str, Any] = {"data-settings": _settings_json(settings)}
    table = html.Table(
        [html.Tr([html.Th(label), html.Td(value), html.Td(note)]) for label, value, note in rows]
    )
    return html.Div(table, id="numbers-of", **data)


def _attack_view(estimate: AttackEstimate) -> html.Div:
    spread = (
        "" if math.isnan(estimate.standard_error) else f" ± {_number(estimate.standard_error, 2)}"
    )
    return html.Div(
        [
            html.Table(
                [
                    html.Tr(
                        [
                            html.Th("guesses a source's compute node"),
                            html.Td(
                                [
                                    _value(
                                        "attack-accuracy",
                                        estimate.accuracy,
                                        f"{estimate.accuracy:.1%}",
                                    ),
                                    spread,
                                ]
                            ),
                        ]
                    ),
                    html.Tr(
                        [
                            html.Th("most any attacker can under (ε, δ)"),
                            html.Td(
                                _value("attack-bound", estimate.bound, f"{estimate.bound:.1%}")
                            ),
                        ]
                    ),
                    html.Tr(
                        [
                            html.Th("best guess from the prior alone"),
                            html.Td(
                                _value(
                                    "attack-baseline", estimate.baseline, f"{estimate.baseline:.1%}"
                                )
                            ),
                        ]
                    ),
                ]
            ),
            html.Div(
                f"{estimate.rounds} simulated rounds of one cluster over {estimate.sources:,} "
                f"uniform synthetic sources; the attacker sees all traffic and knows every other "
                f"source's data. The bound holds at ε = {_number(estimate.epsilon)}, "
                f"δ = {estimate.delta:g} (one round).",
                className="hint",
            ),
        ]
    )


def _front_figure(points: tuple[FrontPoint, ...], current: ExplorerNumbers | None) -> Any:
    import plotly.graph_objects as go

    figure = go.Figure()
    figure.add_trace(
        go.Scatter(
            x=[p.epsilon for p in points],
            y=[p.network_load_messages for p in points],
            mode="lines+markers",
            name="least load (planner)",
            marker={"size": 12},
            customdata=list(range(len(points))),
            text=[
                f"{p.description}<br>fraction of tuples used {p.utility:.1%}, "
                f"{p.max_channels_per_node:,} channels"
                for p in points
            ],
            hovertemplate="ε = %{x:.4g}, %{y:,} messages<br>%{text}<extra></extra>",
        )
    )
    if current is not None and math.isfinite(current.composed.epsilon):
        figure.add_trace(
            go.Scatter(
                x=[current.composed.epsilon],
                y=[current.network_load_messages],
                mode="markers",
                name="this configuration",
                marker={"size": 14, "symbol": "x", "color": "crimson"},
                hovertemplate="ε = %{x:.4g}, %{y:,} messages<extra>this configuration</extra>",
            )
        )
    figure.update_layout(
        margin={"l": 60, "r": 10, "t": 10, "b": 40},
        xaxis_title="ε of the whole plan",
        yaxis_title="network load (messages)",
        legend={"orientation": "h", "y": -0.25},
        clickmode="event",
    )
    return figure


def _front_table(points: tuple[FrontPoint, ...]) -> html.Table:
    header = html.Tr([html.Th(h) for h in ("ε", "messages", "configuration", "")])
    rows = [
        html.Tr(
            [
                html.Td(_number(p.epsilon)),
                html.Td(f"{p.network_load_messages:,}"),
                html.Td(p.description),
                html.Td(
                    html.Button("use", id={"kind": "use-point", "index": index}, className="small")
                ),
            ],
            className="front-point",
        )
        for index, p in enumerate(points)
    ]
    return html.Table([header, *rows], className="front-list")


def _frame_table(frame: Any) -> html.Table:
    shown = frame.head(SHOWN_ROWS)
    header = html.Tr([html.Th(str(c)) for c in shown.columns])

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "NULL"
        if isinstance(value, float):
            return _number(value, 6)
        text = str(value)
        return "NULL" if text == "<NA>" else text

    rows = [html.Tr([html.Td(cell(v)) for v in row]) for row in shown.itertuples(index=False)]
    return html.Table([header, *rows], className="result")


# ------------------------------------------------------------------------------- callbacks
def _register(app: Dash) -> None:
    inputs = [Input(name, "value") for name in CONTROLS]

    @app.callback(
        Output("numbers", "children"),
        Output("problem", "children"),
        Output("commands", "children"),
        Output("snippet", "children"),
        *inputs,
    )
    def update_numbers(*values: Any) -> tuple[Any, ...]:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            numbers = explore(settings)
        except DpcommError as error:
            return dash.no_update, str(error), dash.no_update, dash.no_update
        return _numbers_view(numbers), "", command_lines(settings), python_snippet(settings)

    @app.callback(Output("attack", "children"), *inputs)
    def update_attack(*values: Any) -> Any:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            return _attack_view(attack(settings))
        except DpcommError as error:
            return html.Div(str(error), className="problem")

    @app.callback(
        Output("front", "figure"),
        Output("front-table", "children"),
        Output("front-points", "data"),
        Input("min-utility", "value"),
        *inputs,
    )
    def update_front(min_utility: Any, *values: Any) -> tuple[Any, Any, Any]:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            if min_utility is None:
                raise InvalidParameterError("min-utility", "a fraction in [0, 1]", None)
            points = tradeoff_front(settings, min_utility=float(min_utility))
            current = explore(settings)
        except DpcommError as error:
            return _front_figure((), None), html.Div(str(error), className="problem"), []
        if not points:
            note = html.Div(
                "No configuration meets any ε of the grid with this fraction of tuples used.",
                className="problem",
            )
            return _front_figure((), current), note, []
        return (
            _front_figure(points, current),
            _front_table(points),
            [asdict(p) for p in points],
        )

    @app.callback(
        Output("mechanism", "value"),
        Output("sampling", "value"),
        Output("batch", "value"),
        Output("dummies", "value"),
        Input("front", "clickData"),
        Input({"kind": "use-point", "index": dash.ALL}, "n_clicks"),
        State("front-points", "data"),
        State("batch", "value"),
        prevent_initial_call=True,
    )
    def pick_point(
        click: Any, _uses: Any, stored: list[dict[str, Any]] | None, batch: Any
    ) -> tuple[Any, ...]:
        triggered = dash.ctx.triggered_id
        index: int | None = None
        if triggered == "front":
            index = next(
                (
                    int(p["customdata"])
                    for p in (click or {}).get("points", [])
                    if p.get("curveNumber") == 0 and "customdata" in p
                ),
                None,
            )
        elif isinstance(triggered, dict) and dash.ctx.triggered[0].get("value"):
            index = int(triggered["index"])
        if index is None or not stored or index >= len(stored):
            return (dash.no_update,) * 4
        point = FrontPoint(**stored[index])
        batch_size = batch if point.batch_size is None else point.batch_size
        return point.mechanism, point.sampling_rate, batch_size, point.num_dummies

    @app.callback(
        Output("sql", "value"),
        Input("query-table", "value"),
        prevent_initial_call=True,
    )
    def example_query(table: str) -> Any:
        return EXAMPLE_QUERIES.get(table, dash.no_update)  # an upload keeps the query typed

    @app.callback(Output("upload-name", "children"), Input("upload", "filename"))
    def upload_name(filename: str | None) -> str:
        return "" if not filename else f"uploaded: {filename} (query it as any table name)"

    @app.callback(
        Output("query-result", "children"),
        Input("run-query", "n_clicks"),
        State("query-table", "value"),
        State("upload", "contents"),
        State("sql", "value"),
        *[State(name, "value") for name in CONTROLS],
        prevent_initial_call=True,
    )
    def run_query(_clicks: int, table: str, contents: str | None, sql: str, *values: Any) -> Any:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            data = _query_data(table, contents, settings)
            comparison = query_against_exact(sql or "", data, settings)
        except DpcommError as error:
            return html.Div(str(error), className="problem")
        return html.Div(
            [
                html.Div(
                    [
                        "ε = ",
                        _value("query-epsilon", comparison.epsilon),
                        f" at δ = {comparison.delta:g}; ",
                        _value(
                            "query-tuples", comparison.tuples_used, f"{comparison.tuples_used:,}"
                        ),
                        f" of {comparison.num_sources:,} tuples used. Each aggregate beside "
                        "its exact value (DuckDB over the same table).",
                    ],
                    className="hint",
                ),
                _frame_table(comparison.result),
            ]
        )


def _query_data(table: str, contents: str | None, settings: ExplorerSettings) -> Any:
    """The table the query panel runs on, as a pandas DataFrame."""
    from dpcomm import datasets

    if table == "diabetes":
        return datasets.diabetes()
    if table == "synthetic":
        return datasets.synthetic(rows=settings.num_sources, seed=0)
    if not contents:
        raise InvalidParameterError("upload", "a CSV file (drop one on the upload area)", None)
    import pandas as pd

    try:
        raw = base64.b64decode(contents.split(",", 1)[-1])
        return pd.read_csv(io.BytesIO(raw))
    except (binascii.Error, ValueError, UnicodeDecodeError) as error:
        raise InvalidParameterError("upload", "a CSV file", f"unreadable ({error})") from error


def make_app() -> Dash:
    """The explorer as a Dash app (scripts and styles served from the installed packages)."""
    from pathlib import Path

    app = Dash(
        __name__,
        title="dpcomm explorer",
        update_title="",
        serve_locally=True,
        assets_folder=str(Path(__file__).with_name("assets")),
    )
    app.layout = layout()
    _register(app)
    return app


def serve(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve the explorer at http://host:port/ until interrupted (Flask's threaded server)."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    make_app().run(host=host, port=port, debug=False)
