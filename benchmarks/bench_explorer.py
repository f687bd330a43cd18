"""Benchmark: the explorer's update after a control change (goal: ≤ 300 ms for n, d ≤ 1,000).

Two measurements:

* library: :func:`dpcomm.experiments.explore.explore` (everything the numbers panel shows) for
  every configuration of a grid with n, d ≤ 1,000 (σ, n, d, G = 1, 4 and 20, S = 1,000 and
  10,000),
  each computed once, wall and CPU time per update: "session" keeps the library's caches as a
  session does (configurations sharing a batch size share its accounting), "cold" clears every
  cache of dpcomm before each update;
* browser: ``dpcomm explore`` on a free port driven by headless Chromium (Debian's, as the
  test suite drives it): σ and d are typed into their sliders' boxes one after the other, and
  the time until the page shows the numbers of the new configuration is measured (server
  round trip and drawing, timed in the page: from the box losing focus to the new numbers in
  the page), the same for the release panel (the default Laplace release, beside the numbers
  in a request of its own), with the server process's CPU time per update.

Usage: python benchmarks/bench_explorer.py [--no-browser]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from dpcomm.experiments.explore import ExplorerSettings, explore

#: Grouping sets composed (G) in the measured configurations.
CLUSTERS = (1, 4, 20)


def _summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return (
        f"median {statistics.median(ordered) * 1e3:.0f} ms, p90 {p90 * 1e3:.0f} ms, "
        f"max {ordered[-1] * 1e3:.0f} ms ({len(ordered)} updates)"
    )


def _clear_caches() -> None:
    """Clear the caches of every dpcomm module imported (functools caches, the PLD rows)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("dpcomm"):
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and not isinstance(value, type):
                    value.cache_clear()


def bench_library(*, cold: bool) -> None:
    """``explore`` on a grid of configurations with n, d ≤ 1,000."""
    explore(ExplorerSettings())  # imports and first-use caches out of the timing
    walls: dict[int, list[float]] = {g: [] for g in CLUSTERS}
    cpus: dict[int, list[float]] = {g: [] for g in CLUSTERS}
    worst: tuple[float, ExplorerSettings] | None = None
    grid = itertools.product(
        CLUSTERS, (1_000, 10_000), (10, 100, 1_000), (0.05, 0.2, 0.5, 0.9), (0, 10, 100, 1_000)
    )
    for clusters, sources, batch, sigma, dummies in grid:
        settings = ExplorerSettings(
            num_targets=20,
            sampling_rate=sigma,
            batch_size=batch,
            num_dummies=dummies,
            num_clusters=clusters,
            num_sources=sources,
        )
        if cold:
            _clear_caches()
        explore.cache_clear()
        wall, cpu = time.perf_counter(), time.process_time()
        explore(settings)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        walls[clusters].append(wall)
        cpus[clusters].append(cpu)
        if worst is None or wall > worst[0]:
            worst = (wall, settings)
    kind = "cold" if cold else "session"
    for clusters in CLUSTERS:
        print(f"library ({kind}), G = {clusters}: wall {_summary(walls[clusters])}")
        print(f"library ({kind}), G = {clusters}: CPU  {_summary(cpus[clusters])}")
    if worst is not None:
        print(f"slowest ({kind}): {worst[0] * 1e3:.0f} ms wall for {worst[1]}")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: Resolves with performance.now() once the page shows numbers (``id`` ``numbers-of``) or the
#: release (``release-of``) of settings with ``field`` = ``value``.
SHOWN_SCRIPT = """
const [field, value, id, done] = arguments;
const settings = (element) => id === 'numbers-of'
  ? JSON.parse(element.getAttribute('data-settings'))
  : JSON.parse(element.getAttribute('data-of')).settings;
const shown = () => {
  const element = document.getElementById(id);
  return element !== null && settings(element)[field] === value;
};
if (shown()) { done(performance.now()); return; }
const observer = new MutationObserver(() => {
  if (shown()) { observer.disconnect(); done(performance.now()); }
});
observer.observe(document.body, {subtree: true, childList: true, attributes: true});
"""


def bench_browser(clusters: int) -> None:
    """σ and d typed into the page one after the other; time until the page shows them."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        print("browser: skipped (no chromium/chromedriver: make browser-tools)")
        return
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "dpcomm", "explore", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    options.add_argument("--window-size=1500,1000")
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        url = f"http://127.0.0.1:{port}/"
        for _ in range(600):
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                time.sleep(0.1)
        # n = 1,000 sources per scrambler and d up to 1,000: the goal's largest instances.
        session.get(f"{url}?sources=10000&batch=1000&dummies=100&sampling=0.2&clusters={clusters}")

        def shown() -> dict[str, object] | None:
            found = session.find_elements(By.ID, "numbers-of")
            try:
                text = found[0].get_attribute("data-settings") if found else None
            except Exception:
                return None
            return None if text is None else json.loads(text)

        def wait_for(**expected: object) -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                settings = shown()
                if settings and all(settings[k] == v for k, v in expected.items()):
                    return
                time.sleep(0.005)
            raise RuntimeError(f"the page never showed {expected}")

        wait_for(num_sources=10000, batch_size=1000, num_clusters=clusters)
        time.sleep(5)  # the attacker and the front settle
        session.set_script_timeout(120)
        walls: list[float] = []
        releases: list[float] = []
        cpus: list[float] = []
        changes = [("sampling", "sampling_rate", s) for s in (0.3, 0.45, 0.6, 0.15, 0.05)]
        changes += [("dummies", "num_dummies", d) for d in (200, 400, 700, 1000, 50)]
        for control, field, value in changes:
            box = session.find_element(By.CSS_SELECTOR, f"#{control} input")
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(str(value))
            # Timed in the page: from the box losing focus to the numbers of the new value in
            # the page (a mutation observer, no polling by the driver).
            session.execute_script(
                "arguments[0].addEventListener('blur', () => { window.changed = "
                "performance.now(); }, {once: true});",
                box,
            )
            cpu = _cpu_seconds(server.pid)
            box.send_keys(Keys.TAB)
            shown_at = session.execute_async_script(SHOWN_SCRIPT, field, value, "numbers-of")
            changed_at = session.execute_script("return window.changed")
            walls.append((shown_at - changed_at) / 1e3)
            released_at = session.execute_async_script(SHOWN_SCRIPT, field, value, "release-of")
            releases.append((released_at - changed_at) / 1e3)
            cpus.append(_cpu_seconds(server.pid) - cpu)
            time.sleep(1.0)
        where = f"browser, G = {clusters} (S = 10,000, n = 1,000, d ≤ 1,000)"
        print(f"{where}: in the page {_summary(walls)}")
        print(f"{where}: the release panel in the page {_summary(releases)}")
        print(f"{where}: server CPU per update (both panels) {_summary(cpus)}")
        print(f"{where}: every update in ms: " + ", ".join(f"{w * 1e3:.0f}" for w in walls))
    finally:
        session.quit()
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-browser", action="store_true", help="the library part only")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    bench_library(cold=False)
    bench_library(cold=True)
    if not args.no_browser:
        for clusters in CLUSTERS:
            bench_browser(clusters)


if __name__ == "__main__":
    main()
