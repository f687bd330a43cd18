"""Layer 7: engines that execute a plan's roles: in memory, over a network, on Dask.

Every engine returns a `Run`; the pipeline (`dpcomm.pipeline`) prepares and reports it.
Names are imported on first use (a network worker imports only what it runs).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.engine.dask_engine import DaskEngine as DaskEngine
    from dpcomm.engine.engines import (
        Engine as Engine,
        MemoryEngine as MemoryEngine,
        make_engine as make_engine,
    )
    from dpcomm.engine.memory import simulate as simulate
    from dpcomm.engine.run import Run as Run, prepare as prepare

__getattr__, __dir__ = attach(__name__, __file__)
