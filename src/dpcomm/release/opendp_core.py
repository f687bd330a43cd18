"""OpenDP's core, the part the release calls, without the extras `opendp.prelude` imports.

``import opendp.prelude`` also imports OpenDP's extras (its scikit-learn, NumPy, Polars, ibis
and MBI integrations, scikit-learn and Polars with them): about 2 s of CPU in every process that
draws noise. The release needs only the core's domains, metrics, measures, transformations and
measurements (about 0.2 s). Use it as OpenDP's documentation uses the prelude, after
``from dpcomm.release import opendp_core as dp``: ``dp.m.make_laplace(...)``,
``dp.enable_features("contrib")``.
"""

from __future__ import annotations

from opendp import measurements as m, transformations as t
from opendp.domains import atom_domain, map_domain, vector_domain
from opendp.measures import max_divergence
from opendp.metrics import (
    absolute_distance,
    l01inf_distance,
    l02inf_distance,
    l1_distance,
    l2_distance,
    symmetric_distance,
)
from opendp.mod import enable_features

__all__ = [
    "absolute_distance",
    "atom_domain",
    "enable_features",
    "l01inf_distance",
    "l02inf_distance",
    "l1_distance",
    "l2_distance",
    "m",
    "map_domain",
    "max_divergence",
    "symmetric_distance",
    "t",
    "vector_domain",
]
