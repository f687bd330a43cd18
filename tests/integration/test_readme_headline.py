"""The README's headline table is what `dpcomm headline` computes (no hand-edited numbers)."""

from pathlib import Path

import pytest

from dpcomm.calibration import describe_batches, plan_countermeasures
from dpcomm.experiments.headline import headline_markdown, headline_rows

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.slow
def test_readme_table_matches_the_command():
    computed = headline_markdown(headline_rows())
    table = [line for line in computed.splitlines() if line.startswith("|")]
    text = README.read_text()
    for line in table:
        assert line in text, f"README headline row differs from `dpcomm headline`: {line}"


@pytest.mark.slow
def test_readme_plan_sentence_matches_the_planner():
    result = plan_countermeasures(
        num_sources=10_000,
        num_targets=20,
        grouping_sets=1,
        epsilon=1.0,
        delta=1e-4,
        max_channels=200,
    )
    text = " ".join(README.read_text().split())
    overhead = result.network_load_messages / result.nonprivate_load_messages
    configuration = result.configuration
    assert configuration.batch_sizes is not None
    batches = describe_batches(configuration.batch_sizes)  # "121 scramblers: 51 of 158 ..."
    scramblers, sizes = batches.split(": ")
    expected = (
        f"finds a configuration with {result.network_load_messages:,} messages in all "
        f"(×{overhead:.2f}) and at most {result.max_channels_per_node:,} channels per node: "
        f"{result.num_sources:,} sources recruited with σ = {configuration.sampling_rate:g} in "
        f"{scramblers} ({sizes}) adding d = {configuration.num_dummies} dummies each"
    )
    assert expected in text
