"""The diabetes table D(A, B, I) of the paper's running example (Section 2.1), synthetic.

The paper's example is a diabetes study whose table has two grouping columns, age range ``A``
and body-mass index ``B``, and one aggregated column, insulin rate ``I``; the query
``SELECT A, B, AVG(I) FROM D GROUP BY GROUPING SETS ((A), (B))`` is its running example. The
paper ships no such data, so the package embeds ``diabetes.csv``: 10,000 **synthetic** patients
drawn by `generate_diabetes` (not real patients, no real person behind any row; the
distributions are plausible, not fitted to any study). It was written, and can be rewritten
byte for byte, by ``write_diabetes_csv("src/dpcomm/data/diabetes.csv")``.
"""

from __future__ import annotations

import numbers
from importlib import resources
from pathlib import Path
from typing import Final

import numpy as np

from dpcomm.data.table import Table, read_table, table_from_arrays, write_table
from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_seed

#: Rows and seed of the shipped ``diabetes.csv`` (``generate_diabetes()`` reproduces it).
DIABETES_NUM_ROWS: Final = 10_000
DIABETES_SEED: Final = 20_210_601

#: Lower bounds of the 10-year age bands (column A): 20-29, 30-39, ..., 80-89.
AGE_BANDS: Final = (20, 30, 40, 50, 60, 70, 80)
#: Share of patients per age band (an older-skewed adult population, as in a diabetes cohort).
_AGE_WEIGHTS: Final = (0.06, 0.10, 0.16, 0.22, 0.22, 0.16, 0.08)

_FILE_NAME: Final = "diabetes.csv"


def generate_diabetes(*, num_rows: int = DIABETES_NUM_ROWS, seed: int = DIABETES_SEED) -> Table:
    """Draw ``num_rows`` synthetic patients D(A, B, I) (not real patients).

    The model, per patient:

    - age uniform within a band of `AGE_BANDS` drawn with weights 6, 10, 16, 22, 22, 16
      and 8 %; ``A`` is the band's lower bound (BIGINT: 20, 30, ..., 80);
    - BMI ~ N(24 + 0.08·(age − 20), 5²) clipped to [15, 49.9] (kg/m², rising with age);
      ``B`` is the lower bound of its 5-unit band (BIGINT: 15, 20, ..., 45);
    - fasting insulin ``I`` (µU/mL) lognormal with median 7·exp(0.06·(BMI − 24) +
      0.04·(age − 50)/10) and log-scale deviation 0.45, clipped to [1, 300] and rounded to
      0.1 (DOUBLE): insulin resistance grows with BMI and slightly with age, so the averages
      grouped by ``A`` and by ``B`` differ.

    Args:
        num_rows: number of patients (source nodes), at least 1.
        seed: seed of ``numpy.random.default_rng``; same seed, same table.

    Raises:
        InvalidParameterError: ``num_rows`` < 1 or ``seed`` is not a seed
            (`dpcomm.validation.check_seed`).
    """
    if isinstance(num_rows, bool) or not isinstance(num_rows, numbers.Integral) or num_rows < 1:
        raise InvalidParameterError("rows", "an integer >= 1", num_rows)
    rows = int(num_rows)
    rng = np.random.default_rng(check_seed(seed))
    bands = np.asarray(AGE_BANDS, dtype=np.int64)
    age_band = bands[rng.choice(len(bands), size=rows, p=np.asarray(_AGE_WEIGHTS))]
    age = age_band + rng.uniform(0.0, 10.0, size=rows)
    bmi = np.clip(rng.normal(24.0 + 0.08 * (age - 20.0), 5.0), 15.0, 49.9)
    bmi_band = (np.floor(bmi / 5.0) * 5.0).astype(np.int64)
    log_median = np.log(7.0) + 0.06 * (bmi - 24.0) + 0.04 * (age - 50.0) / 10.0
    insulin = np.round(np.clip(np.exp(log_median + 0.45 * rng.standard_normal(rows)), 1, 300), 1)
    return table_from_arrays(
        "diabetes", {"A": age_band, "B": bmi_band, "I": insulin}, ["BIGINT", "BIGINT", "DOUBLE"]
    )


def diabetes_table() -> Table:
    """The shipped synthetic diabetes table (10,000 rows, columns A, B, I; not real patients)."""
    resource = resources.files("dpcomm.data").joinpath(_FILE_NAME)
    with resources.as_file(resource) as path:
        return read_table(path, name="diabetes")


def write_diabetes_csv(path: str | Path) -> None:
    """Write the default `generate_diabetes` table to ``path`` (how the CSV was made)."""
    write_table(generate_diabetes(), path)
