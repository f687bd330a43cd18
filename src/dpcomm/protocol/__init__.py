"""Layer 4: what each node does, as vectorized functions over arrays (Sections 3 and 4).

Sources apply the local randomizer R_σ^d (:mod:`.source`), scramblers run Algorithm 1
(:mod:`.scrambler`), targets discard dummies (:func:`delivered_real`), and the observer sees
per-edge message counts (:mod:`.observation`). Every engine (simulator or networked runtime)
calls these functions, so the accountant's numbers apply to whatever an engine runs.
"""

from dpcomm.protocol.observation import EdgeCounts, edge_counts
from dpcomm.protocol.scrambler import (
    ScramblerAssignment,
    ScrambleResult,
    assign_scramblers,
    contiguous_assignment,
    scramble,
)
from dpcomm.protocol.source import (
    LocalOutput,
    RandomizedTargets,
    apply_local_randomizer,
    delivered_real,
    flood_targets,
    randomize_targets,
)

__all__ = [
    "EdgeCounts",
    "LocalOutput",
    "RandomizedTargets",
    "ScrambleResult",
    "ScramblerAssignment",
    "apply_local_randomizer",
    "assign_scramblers",
    "contiguous_assignment",
    "delivered_real",
    "edge_counts",
    "flood_targets",
    "randomize_targets",
    "scramble",
]
