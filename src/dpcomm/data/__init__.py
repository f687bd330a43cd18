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
    )
    from dpcomm.data.diabetes import (
        generate_diabetes as generate_diabetes,
    )
    from dpcomm.data.frames import (
        result_frame as result_frame,
    )
    from dpcomm.data.images import (
        ImageDataset as ImageDataset,
    )
    from dpcomm.data.images import (
        load_fashion_mnist as load_fashion_mnist,
    )
    from dpcomm.data.images import (
        load_idx_directory as load_idx_directory,
    )
    from dpcomm.data.images import (
        load_image_dataset as load_image_dataset,
    )
    from dpcomm.data.images import (
        load_mnist5k as load_mnist5k,
    )
    from dpcomm.data.images import (
        read_idx as read_idx,
    )
    from dpcomm.data.partitioned import (
        InMemoryRows as InMemoryRows,
    )
    from dpcomm.data.partitioned import (
        ParquetRows as ParquetRows,
    )
    from dpcomm.data.partitioned import (
        RowSource as RowSource,
    )
    from dpcomm.data.points import (
        TablePoints as TablePoints,
    )
    from dpcomm.data.points import (
        read_points as read_points,
    )
    from dpcomm.data.synthetic import (
        SyntheticRows as SyntheticRows,
    )
    from dpcomm.data.synthetic import (
        synthetic_table as synthetic_table,
    )
    from dpcomm.data.synthetic import (
        zipf_probabilities as zipf_probabilities,
    )
    from dpcomm.data.table import (
        Column as Column,
    )
    from dpcomm.data.table import (
        Table as Table,
    )
    from dpcomm.data.table import (
        concat_tables as concat_tables,
    )
    from dpcomm.data.table import (
        read_table as read_table,
    )
    from dpcomm.data.table import (
        table_from_arrays as table_from_arrays,
    )
    from dpcomm.data.table import (
        table_from_relation as table_from_relation,
    )
    from dpcomm.data.table import (
        write_table as write_table,
    )

__getattr__, __dir__ = attach(__name__, __file__)
