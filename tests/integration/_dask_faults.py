"""Faults injected into a Dask cluster, for the tests: a worker that dies mid-run.

:class:`KillWorkerOnce` is a worker plugin: the worker process that starts the ``nth`` task of
a kind (``_stage_task``, ``_channels_task``, ...) kills itself with SIGKILL, as the kernel's
OOM killer or a lost machine would, once per run: a file created exclusively (``token``) says
that a worker already did, so neither the other workers nor the one the nanny restarts die
again.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin


class KillWorkerOnce(WorkerPlugin):
    """SIGKILL the worker that starts its ``nth`` task named ``prefix``-..., once per ``token``."""

    def __init__(self, prefix: str, token: str, nth: int = 1) -> None:
        self.prefix = prefix
        self.token = token
        self.nth = nth
        self.started = 0

    def transition(self, key: Any, start: str, finish: str, **kwargs: Any) -> None:
        del start, kwargs
        if finish != "executing" or not str(key).startswith(f"{self.prefix}-"):
            return
        self.started += 1
        if self.started < self.nth:
            return
        try:
            os.close(os.open(self.token, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            return  # a worker was already killed in this run
        os.kill(os.getpid(), signal.SIGKILL)
