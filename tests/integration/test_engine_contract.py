"""The engine contract (:mod:`engine_contract`) for the in-memory and the network engines.

The network engine runs here over its in-memory transport (every node a coroutine, sealed
fixed-size frames, the batch commit, no sockets), so the contract runs in seconds; one round
over real TLS between processes is in ``test_deployment.py``.
"""

from engine_contract import EngineContract

from dpcomm.engine.engines import MemoryEngine
from dpcomm.engine.network.deploy import NetworkEngine


class TestMemoryEngine(EngineContract):
    def engine(self):
        return MemoryEngine()


class TestNetworkEngine(EngineContract):
    def engine(self):
        return NetworkEngine(transport="memory", timeout=60, idle_seconds=5)
