"""The development environment's packages work together: OpenDP's own Context API on Polars.

OpenDP's Rust core reads a Polars query plan only in the format of the Polars version it was
built against, and says which in its ``polars`` extra; ``.[dev]`` installs Polars through that
extra. Another Polars (a newer one a resolver would otherwise pick) makes every Context query on
a LazyFrame fail with "incompatible schema".
"""

from importlib import metadata

import opendp.prelude as dp
import polars as pl
from packaging.requirements import Requirement


def test_polars_is_the_version_opendp_reads():
    wanted = [
        Requirement(text)
        for text in metadata.requires("opendp") or []
        if text.startswith("polars") and 'extra == "polars"' in text
    ]
    assert wanted, "opendp's metadata names no polars for its polars extra"
    installed = metadata.version("polars")
    assert all(req.specifier.contains(installed) for req in wanted), (installed, wanted)


def test_opendp_context_api_releases_a_lazyframe_query():
    dp.enable_features("contrib")
    species = ["Adelie", "Chinstrap", "Gentoo"]
    frame = pl.LazyFrame({"species": species * 40, "body_mass_g": [3700.0, 3733.0, 5076.0] * 40})
    context = dp.Context.compositor(
        data=frame,
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(epsilon=1.0),
        split_evenly_over=1,
        margins=[dp.polars.Margin(by=["species"], invariant="keys", max_length=1000)],
    )
    query = context.query().group_by("species").agg(pl.len().dp.noise())
    released = query.release().collect().sort("species")
    assert released["species"].to_list() == species
    assert released["len"].dtype.is_integer()
    # OpenDP's default relation is add/remove one row: a count's sensitivity is 1, its Laplace
    # scale 1/ε (dpcomm's replace-one relation doubles it: docs/accounting.md, "Sensitivity").
    assert query.summarize()["scale"].to_list() == [1.0]
