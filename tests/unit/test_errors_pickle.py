"""dpcomm's errors pickle: one raised in a Dask worker reaches the client as itself."""

import pickle

import pytest

from dpcomm.errors import DpcommError, InvalidParameterError
from dpcomm.queries.aggregate import OutputOverflowError
from dpcomm.queries.codec import CodecError
from dpcomm.queries.query import SqlSyntaxError, UnsupportedQueryError

ERRORS = [
    InvalidParameterError("column name", "text values of at most 5 bytes", "a value of 9 bytes"),
    OutputOverflowError("(g1)", 10, 5, groups=3, row=100),
    SqlSyntaxError("unexpected token"),
    UnsupportedQueryError("WINDOW", "window functions"),
    CodecError("a number cut short"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_errors_survive_pickling(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error) and "\n" not in str(copy)
    assert copy.__dict__ == error.__dict__
    assert isinstance(copy, DpcommError)
