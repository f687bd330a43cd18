"""The explorer's page: controls, the numbers of `dpcomm.experiments.explore`, the front.

Layout and callbacks only: every number shown is a field of
`dpcomm.experiments.explore.ExplorerNumbers`,
`dpcomm.experiments.explore.AttackEstimate`,
`dpcomm.experiments.explore.FrontPoint` or
`dpcomm.experiments.explore.QueryComparison`, formatted. Each shown number carries its
full value in a ``data-value`` attribute (what the browser test reads).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import io
import json
import logging
import math
import multiprocessing
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
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
from dpcomm.experiments.explore_release import release_numbers
from dpcomm.explorer import DEFAULT_HOST, DEFAULT_PORT
from dpcomm.explorer.query import QueryComparison, query_against_exact
from dpcomm.explorer.release import (
    RELEASE_DEFAULTS,
    register_release,
    release_controls,
    release_panel,
)

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
#: The controls the planner's front depends on.
FRONT_CONTROLS = ("workload", "delta", "targets", "clusters", "sources")

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
    """The controls' values as settings (an `InvalidParameterError` names the control)."""
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


def controls_of_front(values: dict[str, Any]) -> dict[str, Any]:
    """The controls of `FRONT_CONTROLS` among ``values``."""
    return {name: values[name] for name in FRONT_CONTROLS}


#: One computation of the numbers at a time: two callbacks asking for the same configuration
#: at once would otherwise both compute it (the second now finds it in the cache).
_NUMBERS_LOCK = threading.Lock()


def numbers_of(settings: ExplorerSettings) -> ExplorerNumbers:
    """`explore` of ``settings``, one computation at a time in this process."""
    with _NUMBERS_LOCK:
        return explore(settings)


def _current(values: dict[str, Any]) -> ExplorerNumbers | None:
    """The numbers of the controls' configuration (None when it is not a valid one)."""
    try:
        return numbers_of(settings_of(values))
    except DpcommError:
        return None


def _settings_json(settings: ExplorerSettings) -> str:
    return json.dumps(asdict(settings), sort_keys=True)


# ---------------------------------------------------------------------------------- layout
def _labelled(label: str, control: Any, hint: str = "") -> html.Div:
    return html.Div(
        [html.Label(label, className="label"), control, html.Div(hint, className="hint")],
        className="control",
    )


def _choice(label: str, id_: str, choices: dict[str, str], value: str) -> html.Div:
    """A labelled radio control: ``choices`` maps each value to its label."""
    options = [{"label": text, "value": choice} for choice, text in choices.items()]
    return _labelled(label, dcc.RadioItems(id=id_, options=options, value=value))


def _number_input(id_: str, value: float, *, minimum: float, step: float | str) -> dcc.Input:
    return dcc.Input(
        id=id_, type="number", value=value, min=minimum, step=step, debounce=True, className="num"
    )


def _controls(settings: ExplorerSettings) -> html.Div:
    return html.Div(
        [
            html.H2("Configuration"),
            _choice(
                "Workload",
                "workload",
                {
                    "aggregate": "Aggregate (G grouping sets)",
                    "kmeans": "K-means (I iterations, K = T)",
                },
                settings.workload,
            ),
            _choice(
                "Countermeasure",
                "mechanism",
                {
                    "scrambler": "scramblers (σ, n, d per scrambler)",
                    "local": "local sampling + flooding (σ, d per source)",
                },
                settings.mechanism,
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
            release_controls(),
        ],
        className="panel controls",
    )


def _numbers_panel() -> html.Div:
    return html.Div(
        [
            html.H2("Privacy and costs"),
            html.Div(id="address-problem", className="problem"),
            html.Div(id="problem", className="problem"),
            html.Div(id="numbers"),
            release_panel(),
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
                dcc.Graph(
                    id="front",
                    figure=_front_figure((), None),  # trace 1, the current point, from the start
                    config={"displaylogo": False},
                    style={"height": "340px"},
                ),
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


#: Every control's default value.
_DEFAULT_CONTROLS: dict[str, Any] = {
    "workload": DEFAULTS.workload,
    "mechanism": DEFAULTS.mechanism,
    "targets": DEFAULTS.num_targets,
    "sampling": DEFAULTS.sampling_rate,
    "batch": DEFAULTS.batch_size,
    "dummies": DEFAULTS.num_dummies,
    "delta": DEFAULTS.delta,
    "clusters": DEFAULTS.num_clusters,
    "sources": DEFAULTS.num_sources,
}

#: How each control's value is read from the page's address (``/?sampling=0.3&dummies=80``).
QUERY_TYPES: dict[str, type] = {
    "workload": str,
    "mechanism": str,
    "targets": int,
    "sampling": float,
    "batch": int,
    "dummies": int,
    "delta": float,
    "clusters": int,
    "sources": int,
}


def initial_settings(arguments: dict[str, str]) -> tuple[ExplorerSettings, str]:
    """The settings the address asks for (the defaults for the others), and what was wrong.

    ``arguments`` are the address's query parameters, named as the controls (`CONTROLS`).
    """
    values = dict(_DEFAULT_CONTROLS)
    try:
        for name, text in arguments.items():
            kind = QUERY_TYPES.get(name)
            if kind is None:
                raise InvalidParameterError(name, "one of " + ", ".join(CONTROLS), text)
            try:
                values[name] = kind(text)
            except ValueError as error:
                raise InvalidParameterError(name, f"a {kind.__name__}", text) from error
        return settings_of(values), ""
    except DpcommError as error:
        return DEFAULTS, f"{error} (the defaults are shown)"


def layout() -> html.Div:
    """The page (its controls are then set from the address: `initial_settings`)."""
    settings = DEFAULTS
    return html.Div(
        [
            dcc.Location(id="address", refresh=False),
            html.H1("dpcomm explorer"),
            html.P(
                "Choose the countermeasure of a plan's data-dependent clusters; its privacy, "
                "costs and utility follow. Every number is computed by the dpcomm library.",
                className="lead",
            ),
            html.Div(
                [_controls(settings), _numbers_panel(), _front_panel()],
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


def _marker(current: ExplorerNumbers | None) -> tuple[list[float], list[int]]:
    """The current configuration's point (ε composed, load), none where ε = ∞."""
    if current is None or not math.isfinite(current.composed.epsilon):
        return [], []
    return [current.composed.epsilon], [current.network_load_messages]


def _front_figure(points: tuple[FrontPoint, ...], current: ExplorerNumbers | None) -> Any:
    """The front (trace 0) and the current configuration (trace 1), as Plotly's JSON."""
    x, y = _marker(current)
    return {
        "data": [
            {
                "type": "scatter",
                "x": [p.epsilon for p in points],
                "y": [p.network_load_messages for p in points],
                "mode": "lines+markers",
                "name": "least load (planner)",
                "marker": {"size": 12},
                "customdata": list(range(len(points))),
                "text": [
                    f"{p.description}<br>fraction of tuples used {p.utility:.1%}, "
                    f"{p.max_channels_per_node:,} channels"
                    for p in points
                ],
                "hovertemplate": "ε = %{x:.4g}, %{y:,} messages<br>%{text}<extra></extra>",
            },
            {
                "type": "scatter",
                "x": x,
                "y": y,
                "mode": "markers",
                "name": "this configuration",
                "marker": {"size": 14, "symbol": "x", "color": "crimson"},
                "hovertemplate": "ε = %{x:.4g}, %{y:,} messages<extra>this configuration</extra>",
            },
        ],
        "layout": {
            "margin": {"l": 60, "r": 10, "t": 10, "b": 40},
            "xaxis": {"title": {"text": "ε of the whole plan"}, "zeroline": False},
            "yaxis": {"title": {"text": "network load (messages)"}},
            "legend": {"orientation": "h", "y": -0.25},
            "clickmode": "event",
        },
    }


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
            **_point_data(p),
        )
        for index, p in enumerate(points)
    ]
    return html.Table([header, *rows], className="front-list")


def _point_data(point: FrontPoint) -> dict[str, Any]:
    return {"data-point": json.dumps(asdict(point), sort_keys=True)}


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


# ------------------------------------------------------------------------- slow computations
def _start_worker(server: int) -> None:
    """Set up a worker: a lower priority than the server's, and an exit with the server.

    The worker yields the processor to the server (and to the browser, on the same machine),
    whose numbers panel answers every change. It exits when the explorer's server (process
    ``server``) is gone, however the server ended: the worker's parent (a fork server, or the
    server) is then gone too, and the worker would otherwise wait for jobs forever.
    """
    import os
    import time

    with contextlib.suppress(OSError):
        os.nice(10)

    parent = os.getppid()

    def alive() -> bool:
        try:
            os.kill(server, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # pragma: no cover - another user's process took the id
            return False
        return os.getppid() == parent

    def watch() -> None:
        while alive():
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


def _warm() -> None:
    """Import what the slow computations need (a worker's first job)."""
    import importlib

    for module in WORKER_PRELOAD:
        importlib.import_module(module)


#: What every worker imports once, in the process the workers are forked from.
WORKER_PRELOAD = [
    "dpcomm.experiments.explore",
    "dpcomm.experiments.explore_release",
    "dpcomm.experiments.attacker",
    "dpcomm.engine",
]


def _worker_context() -> Any:
    """Workers forked from a server process of their own that imported dpcomm once.

    ``forkserver`` (where the platform has it) rather than ``fork``: the explorer's server has
    threads by then; the fork server has none, and its imports are shared by every worker.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(WORKER_PRELOAD)
    return context


class Worker:
    """A process of its own for one kind of slow computation (attacker, front, release).

    The page's other numbers are computed in the server's process; a computation of seconds
    there would hold its interpreter lock and delay them. A job supersedes the jobs of the
    same kind still queued (they are cancelled: their answer would be out of date), and the
    worker keeps its caches between jobs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._queued: Future[Any] | None = None

    def start(self) -> None:
        """Start the process and import what it needs, in the background."""
        self.submit(_warm)

    def submit(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue ``function(*args, **kwargs)``, cancelling the job still queued before it."""
        with self._lock:
            if self._pool is None:
                import os

                context = _worker_context()
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=context,
                    initializer=_start_worker,
                    initargs=(os.getpid(),),
                )
            if self._queued is not None:
                self._queued.cancel()
            future = self._pool.submit(function, *args, **kwargs)
            self._queued = future
            return future

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``function(*args, **kwargs)`` in the worker (``PreventUpdate`` if superseded)."""
        try:
            return self.submit(function, *args, **kwargs).result()
        except CancelledError as error:
            raise dash.exceptions.PreventUpdate from error

    def stop(self) -> None:
        """Stop the process now, even in the middle of a job (queued jobs are cancelled)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        # The executor would wait for a running job (seconds of planning) at exit: end it.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------------------- callbacks
def _register(app: Dash, attacker: Worker, planner: Worker, releaser: Worker) -> None:
    """Register the page's callbacks: settings, release, attack, front, query panel."""
    _register_settings(app)
    register_release(app, CONTROLS, settings_of, _number, releaser.run)
    _register_attack(app, attacker)
    _register_front(app, planner)
    _register_query(app)


def _register_settings(app: Dash) -> None:
    """The controls from the page's address, and the numbers, commands and code they give."""
    inputs = [Input(name, "value") for name in CONTROLS]

    @app.callback(
        *[Output(name, "value") for name in CONTROLS],
        Output("address-problem", "children"),
        Input("address", "search"),
    )
    def from_address(search: str | None) -> tuple[Any, ...]:
        from urllib.parse import parse_qsl

        settings, problem = initial_settings(dict(parse_qsl((search or "").lstrip("?"))))
        values = (
            settings.workload,
            settings.mechanism,
            settings.num_targets,
            settings.sampling_rate,
            settings.batch_size,
            settings.num_dummies,
            settings.delta,
            settings.num_clusters,
            settings.num_sources,
        )
        return (*values, problem)

    @app.callback(
        Output("numbers", "children"),
        Output("problem", "children"),
        Output("commands", "children"),
        Output("snippet", "children"),
        Output("front", "figure", allow_duplicate=True),
        *inputs,
        prevent_initial_call="initial_duplicate",
    )
    def update_numbers(*values: Any) -> tuple[Any, ...]:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            numbers = numbers_of(settings)
        except DpcommError as error:
            return dash.no_update, str(error), dash.no_update, dash.no_update, dash.no_update
        x, y = _marker(numbers)  # the current configuration's point beside the front
        figure = dash.Patch()
        figure["data"][1]["x"] = x
        figure["data"][1]["y"] = y
        return (
            _numbers_view(numbers),
            "",
            command_lines(settings),
            python_snippet(settings),
            figure,
        )


def _register_attack(app: Dash, attacker: Worker) -> None:
    """The attacker's view of the current configuration, computed in ``attacker``'s process."""

    @app.callback(Output("attack", "children"), *[Input(name, "value") for name in CONTROLS])
    def update_attack(*values: Any) -> Any:
        try:
            settings = settings_of(dict(zip(CONTROLS, values, strict=True)))
            return _attack_view(attacker.run(attack, settings))
        except DpcommError as error:
            return html.Div(str(error), className="problem")


def _register_front(app: Dash, planner: Worker) -> None:
    """The trade-off front (computed in ``planner``'s process), and picking one of its points."""

    @app.callback(
        Output("front", "figure"),
        Output("front-table", "children"),
        Output("front-points", "data"),
        Input("min-utility", "value"),
        *[Input(name, "value") for name in FRONT_CONTROLS],
        *[State(name, "value") for name in CONTROLS],
    )
    def update_front(min_utility: Any, *values: Any) -> tuple[Any, Any, Any]:
        # The front depends on S, T, G or I and δ only; the current point on every control.
        controls = dict(zip(CONTROLS, values[len(FRONT_CONTROLS) :], strict=True))
        try:
            front_settings = settings_of({**_DEFAULT_CONTROLS, **controls_of_front(controls)})
            if min_utility is None:
                raise InvalidParameterError("min-utility", "a fraction in [0, 1]", None)
            points = planner.run(tradeoff_front, front_settings, min_utility=float(min_utility))
        except DpcommError as error:
            return _front_figure((), None), html.Div(str(error), className="problem"), []
        current = _current(controls)
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
        Output("mechanism", "value", allow_duplicate=True),
        Output("sampling", "value", allow_duplicate=True),
        Output("batch", "value", allow_duplicate=True),
        Output("dummies", "value", allow_duplicate=True),
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


def _register_query(app: Dash) -> None:
    """The query panel: an example query per table, an uploaded table, the query's result."""

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
        return _query_view(comparison)


def _query_view(comparison: QueryComparison) -> Any:
    """The query's result beside the exact values, under its ε, δ and tuples used."""
    return html.Div(
        [
            html.Div(
                [
                    "ε = ",
                    _value("query-epsilon", comparison.epsilon),
                    f" at δ = {comparison.delta:g}; ",
                    _value("query-tuples", comparison.tuples_used, f"{comparison.tuples_used:,}"),
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


def make_app(
    *,
    attacker: Worker | None = None,
    planner: Worker | None = None,
    releaser: Worker | None = None,
) -> Dash:
    """The explorer as a Dash app (scripts and styles served from the installed packages).

    ``attacker``, ``planner`` and ``releaser`` run the attacker, the planner's front and the
    release's numbers (default: a worker process each, started on first use).
    """
    from pathlib import Path

    app = Dash(
        __name__,
        title="dpcomm explorer",
        update_title="",
        serve_locally=True,
        assets_folder=str(Path(__file__).with_name("assets")),
    )
    app.layout = layout
    _register(app, attacker or Worker(), planner or Worker(), releaser or Worker())
    return app


def check_free(*, host: str, port: int) -> None:
    """Refuse (naming ``port``) an address the server could not listen on."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as error:
            raise InvalidParameterError(
                "port", f"a port free on {host}", f"{port} ({error.strerror or error})"
            ) from error


def serve(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
    """Serve the explorer at http://host:port/ until interrupted (Flask's threaded server).

    The workers start, and the default configuration's numbers are computed, before the
    server listens: the first page needs no import.
    """
    check_free(host=host, port=port)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    attacker, planner, releaser = Worker(), Worker(), Worker()
    attacker.start()
    planner.start()
    releaser.start()
    releaser.submit(release_numbers, DEFAULTS, RELEASE_DEFAULTS)
    explore(DEFAULTS)
    try:
        app = make_app(attacker=attacker, planner=planner, releaser=releaser)
        app.run(host=host, port=port, debug=False)
    finally:
        attacker.stop()
        planner.stop()
        releaser.stop()
