"""A worker process of a local deployment: ``python -m dpcomm.engine.network.worker [GROUP.json]``.

The launcher (`dpcomm.engine.network.launcher.launch`) writes each process's node configs
and credential paths to a file and starts this module with a fresh interpreter, so that a worker
imports only what its nodes run (not the command line, the accountant or DuckDB's planner). The
protocol with the launcher is one JSON object per line:

* without an argument, the process reads the path of its group file from its first input line;
* the process that hosts the coordinator writes a report with its port once it listens, and
  one when every node but the sources registered;
* every other process reads ``P`` (one line) from its standard input before it starts;
* at the end each process writes a report with its nodes' outcome (or its error) and exits;
* a process whose standard input ends (the launcher is gone, killed or interrupted) exits at
  once: no node outlives the round's launcher.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

from dpcomm.engine.network.launcher import WorkerGroup, run_tls_group
from dpcomm.engine.network.names import COORDINATOR
from dpcomm.engine.network.node import INFRASTRUCTURE_REGISTERED
from dpcomm.engine.network.records import WorkerReport, decode, encode


def _emit(report: WorkerReport) -> None:
    sys.stdout.write(encode(report).decode() + "\n")
    sys.stdout.flush()


def _exit_when_input_ends() -> None:
    """Exit this process as soon as standard input ends (the launcher closed or lost it)."""

    def watch() -> None:
        while sys.stdin.readline():
            pass
        os._exit(3)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    """Run the nodes of a group file; report on standard output.

    The file is ``argv[0]``, or (started before the launcher has certified the nodes, so that
    this interpreter's imports overlap the certificates) the first line of standard input.
    """
    try:
        path = argv[0] if argv else sys.stdin.readline().strip()
        watched = bool(argv)
        group = decode(Path(path).read_bytes(), WorkerGroup)
        configs = group.configs()
        credentials = {name: paths.credentials(name) for name, paths in group.credentials.items()}

        hosts_coordinator = any(c.node == COORDINATOR for c in configs)
        if not watched and hosts_coordinator:
            _exit_when_input_ends()  # it reads nothing more from its input

        def on_listening(name: str, address: list[Any]) -> None:
            if name == str(COORDINATOR):
                _emit(WorkerReport(port=int(address[1])))

        def coordinator_port() -> int:
            line = sys.stdin.readline()
            if not line:
                os._exit(3)  # the launcher is gone before the round started
            if not watched:
                _exit_when_input_ends()
            return int(line)

        def on_event(event: str) -> None:
            if event == INFRASTRUCTURE_REGISTERED:
                _emit(WorkerReport(infrastructure=True))

        outcome = run_tls_group(
            configs,
            credentials,
            on_listening=on_listening,
            coordinator_port=coordinator_port,
            on_event=on_event,
        )
        _emit(WorkerReport(outcome=outcome))
        return 0
    except BaseException as error:  # reported to the launcher, never lost
        _emit(WorkerReport(error=f"{type(error).__name__}: {error}"))
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
