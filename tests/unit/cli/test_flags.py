"""Library errors name the Python parameter; the CLI prints them with its flags."""

from dpcomm.cli.output import PARAMETER_FLAGS, flags_in, with_flags
from dpcomm.errors import DpcommError, InvalidParameterError


def test_an_invalid_parameter_is_printed_with_its_flag():
    error = InvalidParameterError("num_targets", "an integer >= 1", 0)
    assert str(error) == "invalid num_targets: expected an integer >= 1, got 0"
    assert with_flags(error) == "invalid --targets: expected an integer >= 1, got 0"


def test_what_is_allowed_is_rewritten_but_not_the_value_given():
    error = InvalidParameterError("workdir", "no keys (or force=True)", "/tmp/max_groups")
    assert (
        with_flags(error)
        == "invalid --workdir: expected no keys (or --force), got '/tmp/max_groups'"
    )


def test_a_custom_message_keeps_its_words():
    error = DpcommError("5 of 9 sources were left out, more than max_left_out 0 allows "
                        "(raise timeout or idle_seconds)")  # fmt: skip
    assert with_flags(error) == (
        "5 of 9 sources were left out, more than --max-left-out 0 allows "
        "(raise --timeout or --idle-seconds)"
    )
    assert flags_in("the delta and the seed") == "the delta and the seed"  # plain words stay
    assert flags_in("only with engine='dask'") == "only with --engine dask"


def test_every_flag_exists_in_the_parser():
    from dpcomm.cli.main import help_texts

    everything = "".join(help_texts().values())
    for flag in set(PARAMETER_FLAGS.values()):
        assert flag in everything, flag


def test_a_value_that_prints_on_many_lines_is_described_on_one():
    import numpy as np

    error = InvalidParameterError("seed", "an integer", np.zeros((3, 3)))
    assert with_flags(error) == "invalid --seed: expected an integer, got <ndarray of shape (3, 3)>"


def test_a_long_value_is_described_but_text_is_quoted_whole():
    error = InvalidParameterError("labels", "one label per point", list(range(1000)))
    assert str(error) == "invalid labels: expected one label per point, got <list of length 1000>"
    sql = "SELECT " + "x, " * 100 + "COUNT(*) FROM t"
    assert str(InvalidParameterError("sql", "a query", sql)).endswith(repr(sql))
