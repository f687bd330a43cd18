"""Datasets: tables read and written through DuckDB, synthetic data, MNIST-format images."""

from dpcomm.data.table import (
    Column,
    Table,
    read_table,
    table_from_arrays,
    table_from_relation,
    write_table,
)

__all__ = [
    "Column",
    "Table",
    "read_table",
    "table_from_arrays",
    "table_from_relation",
    "write_table",
]
