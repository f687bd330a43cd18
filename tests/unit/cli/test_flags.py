"""Library errors name the Python parameter; the CLI prints them with the flags of its parser."""

import pytest

from dpcomm.cli.main import build_parser
from dpcomm.cli.output import command_flags, flags_in, with_flags
from dpcomm.errors import DpcommError, InvalidParameterError


def flags_of(*argv: str) -> dict[str, str]:
    """The flags of the command ``dpcomm argv`` by their options' destinations."""
    parser = build_parser()
    return command_flags(parser, parser.parse_args(list(argv)))


RUN = ("run", "aggregate", "--sql", "SELECT A, COUNT(*) FROM t GROUP BY A")
ACCOUNT = ("account", "local", "--targets", "4", "--sampling", "0.5")


def test_an_invalid_parameter_is_printed_with_its_flag():
    error = InvalidParameterError("num_targets", "an integer >= 1", 0)
    assert str(error) == "invalid num_targets: expected an integer >= 1, got 0"
    assert with_flags(error, flags_of(*RUN)) == "invalid --targets: expected an integer >= 1, got 0"
    symbol = InvalidParameterError("num_targets T", "an integer >= 2", 1)
    assert with_flags(symbol, flags_of("plan", "--epsilon", "1", "--delta", "0")).startswith(
        "invalid --targets: expected an integer >= 2"
    )


def test_what_is_allowed_is_rewritten_but_not_the_value_given():
    error = InvalidParameterError("workdir", "no keys (or force=True)", "/tmp/max_groups")
    assert (
        with_flags(error, flags_of(*RUN))
        == "invalid --workdir: expected no keys (or --force), got '/tmp/max_groups'"
    )


def test_a_custom_message_keeps_its_words():
    error = DpcommError("5 of 9 sources were left out, more than max_left_out 0 allows "
                        "(raise timeout or idle_seconds)")  # fmt: skip
    assert with_flags(error, flags_of(*RUN)) == (
        "5 of 9 sources were left out, more than --max-left-out 0 allows "
        "(raise --timeout or --idle-seconds)"
    )
    flags = flags_of(*RUN)
    assert flags_in("the delta and the seed", flags) == "the delta and the seed"  # plain words
    assert flags_in("only with engine='dask'", flags) == "only with --engine dask"


@pytest.mark.parametrize(
    ("argv", "parameter", "flag"),
    [
        (ACCOUNT, "sampling_rate", "--sampling"),
        (ACCOUNT, "monte_carlo_samples",
         "--mc-samples"),
        (("run", "kmeans"), "start_seed", "--data-seed"),
        (("run", "kmeans"), "batch_size", "--batch"),
        (("pki", "init", "--dir", "d"), "valid_days", "--days"),
        (("budget", "--ledger", "f"), "budget_epsilon", "--budget-epsilon"),
    ],
)  # fmt: skip
def test_each_option_is_found_by_the_parameter_it_sets(argv, parameter, flag):
    assert flags_of(*argv)[parameter] == flag


def test_the_flags_are_the_commands():
    """A parameter is named by the flag of the command that ran, not another command's."""
    assert "max_messages" in flags_of("plan", "--epsilon", "1", "--delta", "0")
    assert "max_messages" not in flags_of(*RUN)
    error = InvalidParameterError("max_messages", "an integer >= 1", 0)
    assert with_flags(error, flags_of(*RUN)).startswith("invalid max_messages:")


def test_a_value_that_prints_on_many_lines_is_described_on_one():
    import numpy as np

    error = InvalidParameterError("seed", "an integer", np.zeros((3, 3)))
    assert (
        with_flags(error, flags_of(*RUN))
        == "invalid --seed: expected an integer, got <ndarray of shape (3, 3)>"
    )


def test_a_long_value_is_described_but_text_is_quoted_whole():
    error = InvalidParameterError("labels", "one label per point", list(range(1000)))
    assert str(error) == "invalid labels: expected one label per point, got <list of length 1000>"
    sql = "SELECT " + "x, " * 100 + "COUNT(*) FROM t"
    assert str(InvalidParameterError("sql", "a query", sql)).endswith(repr(sql))
