"""The countermeasure codec round-trips every countermeasure (dict form and CLI options)."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from dpcomm.cli.execute import AGGREGATE_DEFAULTS, countermeasure_from_options
from dpcomm.cli.main import build_parser
from dpcomm.data.synthetic import synthetic_sql
from dpcomm.errors import InvalidParameterError
from dpcomm.plan.codec import (
    COUNTERMEASURE_KEYS,
    countermeasure_arguments,
    countermeasure_from_dict,
    countermeasure_to_dict,
)
from dpcomm.plan.countermeasures import LocalFlooding, NoCountermeasure, Scramblers

RATES = st.one_of(st.sampled_from([0.0, 1.0, 0.1, 1e-12]), st.floats(1e-12, 1.0))
COUNTS = st.integers(0, 10**9)

COUNTERMEASURES = st.one_of(
    st.just(NoCountermeasure()),
    st.builds(LocalFlooding, sampling_rate=RATES, num_dummies=COUNTS),
    st.builds(
        Scramblers,
        sampling_rate=RATES,
        batch_size=st.integers(1, 10**12),
        num_dummies=COUNTS,
        capped=st.booleans(),
    ),
)
PARSER = build_parser()
SQL = synthetic_sql(1)


@settings(max_examples=300, deadline=None)
@given(countermeasure=COUNTERMEASURES)
def test_the_dict_form_round_trips(countermeasure):
    form = countermeasure_to_dict(countermeasure)
    assert countermeasure_from_dict(form) == countermeasure
    assert countermeasure_from_dict(json.loads(json.dumps(form))) == countermeasure


@settings(max_examples=300, deadline=None)
@given(countermeasure=COUNTERMEASURES)
def test_the_options_round_trip_through_the_run_parser(countermeasure):
    arguments = countermeasure_arguments(countermeasure)
    args = PARSER.parse_args(["run", "aggregate", "--synthetic", "10", "--sql", SQL, *arguments])
    assert countermeasure_from_options(args, AGGREGATE_DEFAULTS) == countermeasure


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**13),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(["none", "local", "scrambler"]),
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.dictionaries(
        st.one_of(st.sampled_from(COUNTERMEASURE_KEYS), st.text(max_size=5)), VALUES, max_size=6
    )
)
def test_any_dict_reads_as_a_countermeasure_or_is_refused_in_one_line(data):
    try:
        countermeasure = countermeasure_from_dict(data)
    except InvalidParameterError as error:
        assert "\n" not in str(error)
    else:  # what is read writes back to what was given, up to the defaults
        assert countermeasure_from_dict(countermeasure_to_dict(countermeasure)) == countermeasure
        assert countermeasure.name == data["mechanism"]
