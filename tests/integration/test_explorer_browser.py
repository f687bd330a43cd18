"""``dpcomm explore`` in a real browser: the page's numbers are the library's.

A real server (``dpcomm explore`` on a free port) is driven by headless Chromium (the
``chromium`` fixture): σ and d are moved, ε and the load read from the page and compared with
``dpcomm.account`` and the cost model; a point of the planner's front is picked (the controls
take its values, the page its ε and load); the page's ``dpcomm run`` command is run; the page
loads nothing from another origin. The test saves the screenshot the README shows.
"""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import keep_screenshot

import dpcomm
from dpcomm.calibration import plan_costs
from dpcomm.experiments.explore import ExplorerSettings, explore
from dpcomm.experiments.explore_release import ReleaseSettings, release_numbers

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "explorer.png"
#: The configuration the page opens with (small: the planner's front takes about a second).
START = {"targets": 10, "sources": 200, "batch": 50, "sampling": 0.2, "dummies": 20}
#: Longest wait for the server or the page (the suite runs on two busy cores).
WAIT = 90.0

pytest.importorskip("dash")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def explorer_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``dpcomm explore`` serving on a free port; stopped after the module."""
    port = _free_port()
    log = tmp_path_factory.mktemp("explorer") / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "dpcomm", "explore", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"dpcomm explore did not serve {url}: {log.read_text()}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _wait(chromium: Any, condition: Any, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(chromium, WAIT, poll_frequency=0.05).until(condition)
    except TimeoutException:
        pytest.fail(f"the page never showed {what}")


def _shown_settings(chromium: Any) -> dict[str, Any] | None:
    """The settings the numbers on the page were computed for (None while there are none)."""
    from selenium.webdriver.common.by import By

    found = chromium.find_elements(By.ID, "numbers-of")
    if not found:
        return None
    try:
        text = found[0].get_attribute("data-settings")
    except Exception:  # replaced while being read: read again
        return None
    return None if text is None else json.loads(text)


def _numbers_for(chromium: Any, **expected: Any) -> ExplorerSettings:
    """Wait until the page's numbers are those of settings with ``expected`` fields."""

    def shown(driver: Any) -> dict[str, Any] | None:
        settings = _shown_settings(driver)
        if settings and all(settings[k] == v for k, v in expected.items()):
            return settings
        return None

    return ExplorerSettings(**_wait(chromium, shown, f"numbers for {expected}"))


def _value(chromium: Any, element_id: str) -> tuple[float, str]:
    """A number of the page: its full value (``data-value``) and its text."""
    from selenium.webdriver.common.by import By

    element = chromium.find_element(By.ID, element_id)
    return float(element.get_attribute("data-value")), element.text


def _type_into(chromium: Any, css: str, text: str) -> None:
    """Replace the value of the input at ``css`` and leave it (a slider's box takes it then)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    field = chromium.find_element(By.CSS_SELECTOR, css)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(text, Keys.TAB)


def _check_against_library(chromium: Any, settings: ExplorerSettings) -> None:
    """ε (one round, composed), lower bound, load and channels as dpcomm computes them."""
    mechanism = dpcomm.ScramblerMechanism(
        num_targets=settings.num_targets,
        sampling_rate=settings.sampling_rate,
        batch_size=settings.batch_size,  # S is a multiple of n: every batch has n sources
        num_dummies=settings.num_dummies,
    )
    report = dpcomm.account(mechanism, delta=settings.delta, monte_carlo_samples=0)
    epsilon, text = _value(chromium, "epsilon-one")
    assert epsilon == report.guarantee.epsilon
    assert text == f"{report.guarantee.epsilon:.4g}"
    assert _value(chromium, "lower-one")[0] == report.lower_bound
    composed, text = _value(chromium, "epsilon-composed")  # one grouping set: the same round
    assert composed == pytest.approx(report.guarantee.epsilon, rel=1e-9)
    assert text == f"{report.guarantee.epsilon:.4g}"
    costs = plan_costs(
        settings.countermeasure,
        num_sources=settings.num_sources,
        num_targets=settings.num_targets,
        workload="aggregate",
        num_clusters=1,
    )
    load, text = _value(chromium, "load")
    assert load == costs.messages
    assert text == f"{costs.messages:,}"
    assert _value(chromium, "channels")[0] == costs.max_channels


def test_the_explorer_shows_the_librarys_numbers(
    chromium: Any, explorer_url: str, cli: Any
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    query = "&".join(f"{k}={v}" for k, v in START.items())
    chromium.get(f"{explorer_url}?{query}")
    settings = _numbers_for(chromium, sampling_rate=0.2, num_dummies=20, num_sources=200)
    _check_against_library(chromium, settings)

    # Move σ, then d: the numbers follow, and are the library's.
    _type_into(chromium, "#sampling input", "0.35")
    settings = _numbers_for(chromium, sampling_rate=0.35, num_dummies=20)
    _check_against_library(chromium, settings)
    _type_into(chromium, "#dummies input", "60")
    settings = _numbers_for(chromium, sampling_rate=0.35, num_dummies=60)
    _check_against_library(chromium, settings)
    assert explore(settings).composed.epsilon == _value(chromium, "epsilon-composed")[0]

    # Pick a point of the planner's front: the controls take its configuration.
    rows = _wait(
        chromium,
        lambda d: d.find_elements(By.CSS_SELECTOR, "tr.front-point") or None,
        "the planner's front",
    )
    points = [json.loads(row.get_attribute("data-point")) for row in rows]
    index = next(
        (i for i, p in enumerate(points) if p["mechanism"] == "scrambler"), len(points) - 1
    )
    point = points[index]
    markers = _wait(
        chromium,
        lambda d: (
            d.find_elements(By.CSS_SELECTOR, "#front .scatterlayer .trace:first-child path.point")
            or None
        ),
        "the front's markers",
    )
    assert len(markers) == len(points)
    # Plotly finds the point under the pointer (its drag layer lies on top of the markers).
    ActionChains(chromium).move_to_element(markers[index]).pause(0.2).click().perform()
    picked = {
        "mechanism": point["mechanism"],
        "sampling_rate": point["sampling_rate"],
        "num_dummies": point["num_dummies"],
    }
    if point["batch_size"] is not None:
        picked["batch_size"] = point["batch_size"]
    settings = _numbers_for(chromium, **picked)
    assert _value(chromium, "epsilon-composed")[0] == pytest.approx(point["epsilon"], rel=1e-9)
    assert _value(chromium, "load")[0] == point["network_load_messages"]

    # The page's `dpcomm run` command runs this configuration and reports the page's ε.
    commands = chromium.find_element(By.ID, "commands").text.splitlines()
    run_line = next(line for line in commands if line.startswith("dpcomm run "))
    outcome = cli(*shlex.split(run_line)[1:], "--json", "--quiet")
    assert outcome.status == 0, outcome.err
    reported = json.loads(outcome.out)["report"]["privacy"]["epsilon"]
    assert reported == pytest.approx(_value(chromium, "epsilon-composed")[0], rel=1e-9)

    # Everything the page loaded came from the explorer itself (it works offline).
    origin = explorer_url.rstrip("/")
    loaded = chromium.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)"
    )
    assert loaded and all(name.startswith(origin) for name in loaded), loaded

    # The query panel: a query over a synthetic table of S rows, the run beside DuckDB's answer.
    chromium.find_element(By.CSS_SELECTOR, "#query-table input[value='synthetic']").click()
    _wait(chromium, lambda d: "FROM t" in d.find_element(By.ID, "sql").get_attribute("value"), "")
    chromium.find_element(By.ID, "run-query").click()
    _wait(chromium, lambda d: d.find_elements(By.ID, "query-epsilon") or None, "the query's run")
    query_epsilon = _value(chromium, "query-epsilon")[0]
    assert query_epsilon == pytest.approx(_value(chromium, "epsilon-composed")[0], rel=1e-9)
    header = chromium.find_element(By.CSS_SELECTOR, "#query-result table.result tr").text
    assert "count_star() (exact)" in header

    _wait(chromium, lambda d: d.find_elements(By.ID, "attack-accuracy") or None, "the attacker")
    ActionChains(chromium).move_to_element(chromium.find_element(By.TAG_NAME, "h1")).perform()
    _save_whole_page(chromium, SCREENSHOT)


def _save_whole_page(chromium: Any, path: Path) -> None:
    """A screenshot of the whole page (the window grown to its height, then restored).

    Written unless the file already shows the same page (``keep_screenshot``).
    """
    size = chromium.get_window_size()
    height = chromium.execute_script("return document.documentElement.scrollHeight")
    chromium.set_window_size(size["width"], max(size["height"], int(height) + 120))
    try:
        png = chromium.get_screenshot_as_png()
    finally:
        chromium.set_window_size(size["width"], size["height"])
    keep_screenshot(path, png)


def _release_for(chromium: Any, release: dict[str, Any], **traffic: Any) -> tuple[Any, Any]:
    """Wait until the release shown is that of ``release`` (and traffic with ``traffic``)."""
    from selenium.webdriver.common.by import By

    def shown(driver: Any) -> tuple[Any, Any] | None:
        found = driver.find_elements(By.ID, "release-of")
        try:
            text = found[0].get_attribute("data-of") if found else None
        except Exception:  # replaced while being read: read again
            return None
        of = None if text is None else json.loads(text)
        if not of or any(of["release"][k] != v for k, v in release.items()):
            return None
        if any(of["settings"][k] != v for k, v in traffic.items()):
            return None
        return ExplorerSettings(**of["settings"]), ReleaseSettings(**of["release"])

    return _wait(chromium, shown, f"the release of {release}")


def _check_release(chromium: Any, settings: ExplorerSettings, release: ReleaseSettings) -> None:
    """The page's release is the library's, and what `dpcomm.run_sql` reports for it."""
    numbers = release_numbers(settings, release)
    report = numbers.report
    total, text = _value(chromium, "release-epsilon-total")
    assert total == report.epsilon_total and text == f"{report.epsilon_total:.4g}"
    assert _value(chromium, "release-epsilon-traffic")[0] == explore(settings).composed.epsilon
    assert _value(chromium, "release-epsilon-two")[0] == release.epsilon
    for index, aggregate in enumerate(report.aggregates):
        assert _value(chromium, f"release-noise-{index}")[0] == aggregate.standard_deviation
    error, text = _value(chromium, "release-error")
    assert error == numbers.expected_relative_error and text == f"{error:.1%}"
    # The front door releases it with the same guarantee (its noise aside).
    mechanism = (
        dpcomm.Laplace(release.epsilon)
        if release.mechanism == "laplace"
        else dpcomm.Gaussian(release.epsilon, release.delta)
    )
    run = dpcomm.run_sql(
        numbers.sql,
        dpcomm.datasets.synthetic(rows=settings.num_sources, seed=0),
        countermeasure=settings.countermeasure,
        num_targets=settings.num_targets,
        delta=settings.delta,
        seed=1,
        release=mechanism,
        bounds={"m1": (release.low, release.high)},
        keys={"g1": list(range(20))},
    )
    assert run.report.release is not None
    assert run.report.release.epsilon_total == total
    ran = [a.standard_deviation for a in run.report.release.aggregates]
    assert ran == [a.standard_deviation for a in report.aggregates]


def test_the_explorer_shows_the_release_and_the_ledger(
    chromium: Any, explorer_url: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    query = "&".join(f"{k}={v}" for k, v in START.items())
    chromium.get(f"{explorer_url}?{query}")
    settings, release = _release_for(chromium, {"mechanism": "laplace"}, num_sources=200)
    assert release == ReleaseSettings()
    _check_release(chromium, settings, release)

    # A Gaussian release with ε2, δ2 and the bounds typed as a person would.
    chromium.find_element(By.CSS_SELECTOR, "#release-mechanism input[value='gaussian']").click()
    _type_into(chromium, "#release-epsilon", "0.5")
    _type_into(chromium, "#release-delta", "1e-5")
    _type_into(chromium, "#release-low", "20")
    _type_into(chromium, "#release-high", "120")
    wanted = {"mechanism": "gaussian", "epsilon": 0.5, "delta": 1e-5, "low": 20.0, "high": 120.0}
    settings, release = _release_for(chromium, wanted, num_sources=200)
    _check_release(chromium, settings, release)

    # A ledger: what it has spent and has left, and whether a run of this release fits.
    budget = dpcomm.Budget(epsilon=6.0, delta=1e-3, ledger=tmp_path / "population.json")
    budget.charge(epsilon=1.25, delta=1e-5, kind="aggregate", query="q", method="exact")
    _type_into(chromium, "#ledger", str(budget.ledger))
    _wait(chromium, lambda d: d.find_elements(By.ID, "ledger-spent") or None, "the ledger")
    assert _value(chromium, "ledger-spent")[0] == budget.spent().epsilon
    assert _value(chromium, "ledger-remaining")[0] == budget.remaining()[0]
    total = release_numbers(settings, release).report.epsilon_total
    assert total < budget.remaining()[0]
    assert chromium.find_element(By.ID, "ledger-admits").text == "charged"
    # A release of ε2 = 4 takes the run beyond what is left: the page says it would be refused.
    _type_into(chromium, "#release-epsilon", "4")
    settings, release = _release_for(chromium, {**wanted, "epsilon": 4.0}, num_sources=200)
    _wait(
        chromium,
        lambda d: d.find_element(By.ID, "ledger-admits").text.startswith("refused") or None,
        "the ledger refusing the run",
    )
    assert release_numbers(settings, release).report.epsilon_total > budget.remaining()[0]
