"""A configuration is a plan countermeasure with its balanced batches; requests are validated."""

import pytest

from dpcomm.calibration import Configuration, PlanRequest, SearchOptions
from dpcomm.errors import InvalidParameterError
from dpcomm.plan import LocalFlooding, NoCountermeasure, Scramblers, balanced_batch_sizes


def test_a_configuration_holds_the_plan_countermeasure_and_its_batches():
    scramblers = Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=275)
    configuration = Configuration.for_sources(scramblers, num_sources=12_346)
    assert configuration.countermeasure is scramblers
    assert configuration.batch_sizes == balanced_batch_sizes(12_346, 100)
    assert (configuration.mechanism, configuration.sampling_rate) == ("scrambler", 0.2)
    assert (configuration.batch_size, configuration.num_dummies) == (100, 275)
    assert configuration.num_scramblers == 124
    assert configuration.describe() == (
        "124 scramblers of n=100, d=275 dummies each, sampling σ=0.2"
    )
    fewer = configuration.with_dummies(10)
    assert fewer.countermeasure == Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=10)
    assert fewer.batch_sizes == configuration.batch_sizes

    flooding = Configuration.for_sources(
        LocalFlooding(sampling_rate=0.5, num_dummies=3), num_sources=100
    )
    assert flooding.batch_sizes is None and flooding.batch_size is None
    assert flooding.num_scramblers is None and flooding.mechanism == "local"
    assert flooding.describe() == "local sampling σ=0.5, flooding d=3"


@pytest.mark.parametrize(
    ("countermeasure", "batch_sizes", "name"),
    [
        (LocalFlooding(sampling_rate=0.1), (10,), "batch_sizes"),
        (Scramblers(sampling_rate=0.1, batch_size=10), None, "batch_sizes"),
        (Scramblers(sampling_rate=0.1, batch_size=10), (), "batch_sizes"),
        (Scramblers(sampling_rate=0.1, batch_size=10, capped=True), (10,), "countermeasure"),
        (NoCountermeasure(), None, "countermeasure"),
    ],
)
def test_a_configuration_is_flooding_or_uncapped_scramblers_with_batches(
    countermeasure, batch_sizes, name
):
    with pytest.raises(InvalidParameterError) as caught:
        Configuration(countermeasure=countermeasure, batch_sizes=batch_sizes)
    assert caught.value.name == name


def test_the_search_options_are_validated():
    options = SearchOptions(sampling_rates=[0, 0.5], batch_sizes=[100.0], mechanisms=["local"])
    assert options.sampling_rates == (0.0, 0.5)
    assert options.batch_sizes == (100,)
    assert options.mechanisms == ("local",)
    for bad, name in [
        ({"sampling_rates": ()}, "sampling_rates"),
        ({"batch_sizes": ()}, "batch_sizes"),
        ({"batch_sizes": (0,)}, "batch_sizes"),
        ({"mechanisms": ("none",)}, "mechanisms"),
        ({"mechanisms": ()}, "mechanisms"),
        ({"max_dummies": -1}, "max_dummies"),
    ]:
        with pytest.raises(InvalidParameterError) as caught:
            SearchOptions(**bad)
        assert caught.value.name == name


def test_a_request_says_whether_a_channel_count_is_within_its_limit():
    common = {"num_sources": 10, "num_targets": 2, "workload": "aggregate", "num_clusters": 1}
    limited = PlanRequest(**common, epsilon=1.0, delta=1e-4, max_channels=5)
    assert limited.allows_channels(5) and not limited.allows_channels(6)
    assert PlanRequest(**common, epsilon=1.0, delta=1e-4).allows_channels(10**9)
