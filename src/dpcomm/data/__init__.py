"""Datasets: tables read and written through DuckDB, synthetic data, MNIST-format images.

Names are imported on first use.
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.data.diabetes import (
        diabetes_table,
        generate_diabetes,
    )
    from dpcomm.data.images import (
        ImageDataset,
        load_fashion_mnist,
        load_idx_directory,
        load_image_dataset,
        load_mnist5k,
        read_idx,
    )
    from dpcomm.data.synthetic import (
        synthetic_table,
        zipf_probabilities,
    )
    from dpcomm.data.table import (
        Column,
        Table,
        read_table,
        table_from_arrays,
        table_from_relation,
        write_table,
    )

__getattr__, __dir__ = attach(
    __name__,
    {
        "dpcomm.data.diabetes": (
            "diabetes_table",
            "generate_diabetes",
        ),
        "dpcomm.data.images": (
            "ImageDataset",
            "load_fashion_mnist",
            "load_idx_directory",
            "load_image_dataset",
            "load_mnist5k",
            "read_idx",
        ),
        "dpcomm.data.synthetic": (
            "synthetic_table",
            "zipf_probabilities",
        ),
        "dpcomm.data.table": (
            "Column",
            "Table",
            "read_table",
            "table_from_arrays",
            "table_from_relation",
            "write_table",
        ),
    },
)

__all__ = [
    "Column",
    "ImageDataset",
    "Table",
    "diabetes_table",
    "generate_diabetes",
    "load_fashion_mnist",
    "load_idx_directory",
    "load_image_dataset",
    "load_mnist5k",
    "read_idx",
    "read_table",
    "synthetic_table",
    "table_from_arrays",
    "table_from_relation",
    "write_table",
    "zipf_probabilities",
]
