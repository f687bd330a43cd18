"""Datasets: tables read and written through DuckDB, synthetic data, MNIST-format images.

Sources read by ranges of rows ([`RowSource`][]: Parquet, synthetic, in memory) feed engines
that never hold a whole table.

Names are imported on first use.
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.data.diabetes import (
        diabetes_table as diabetes_table,
        generate_diabetes as generate_diabetes,
    )
    from dpcomm.data.frames import result_frame as result_frame
    from dpcomm.data.images import (
        ImageDataset as ImageDataset,
        load_fashion_mnist as load_fashion_mnist,
        load_idx_directory as load_idx_directory,
        load_image_dataset as load_image_dataset,
        load_mnist5k as load_mnist5k,
        read_idx as read_idx,
    )
    from dpcomm.data.partitioned import (
        InMemoryRows as InMemoryRows,
        ParquetRows as ParquetRows,
        RowSource as RowSource,
    )
    from dpcomm.data.points import TablePoints as TablePoints, read_points as read_points
    from dpcomm.data.synthetic import (
        SyntheticRows as SyntheticRows,
        synthetic_table as synthetic_table,
        zipf_probabilities as zipf_probabilities,
    )
    from dpcomm.data.table import (
        Column as Column,
        Table as Table,
        concat_tables as concat_tables,
        read_table as read_table,
        table_from_arrays as table_from_arrays,
        table_from_relation as table_from_relation,
        write_table as write_table,
    )

__getattr__, __dir__ = attach(__name__, __file__)
