"""`dpcomm run kmeans --data FILE --columns ...`: K-means on a real table (scikit-learn's iris)."""

import json

import duckdb
import pytest
from tests.conftest import IRIS_COLUMNS

COLUMNS = ",".join(IRIS_COLUMNS)
SMALL = ["--k", "3", "--iterations", "3", "--batch", "30", "--dummies", "3", "--seed", "2"]


def test_the_scores_are_scikit_learns_on_the_label_column(cli, iris_csv, tmp_path, csv_rows):
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score, rand_score

    out = tmp_path / "centroids.csv"
    argv = ["--data", iris_csv, "--columns", COLUMNS, "--label-column", "species", *SMALL]
    status, stdout, err = cli("run", "kmeans", *argv, "--json", "--out", out)
    assert status == 0, err
    utility = json.loads(stdout)["report"]["utility"]
    assert utility["sources"] == utility["test_points"] == 150
    species = [row["species"] for row in csv_rows(iris_csv)]
    clusters = [row["centroid"] for row in csv_rows(tmp_path / "centroids-assignments.csv")]
    assert utility["rand_index"] == rand_score(species, clusters)
    assert utility["adjusted_rand_index"] == adjusted_rand_score(species, clusters)
    assert utility["normalized_mutual_info"] == normalized_mutual_info_score(species, clusters)
    assert len(csv_rows(out)) == 3


def test_kmeans_plus_plus_among_public_points_prints_no_caveat(cli, iris_csv, tmp_path):
    public = tmp_path / "public.parquet"  # ten flowers of each species, as public points
    duckdb.sql(
        f"COPY (SELECT * FROM '{iris_csv}' QUALIFY row_number() OVER (PARTITION BY species) <= 10)"
        f" TO '{public}' (FORMAT PARQUET)"
    )
    argv = ["run", "kmeans", "--data", iris_csv, "--columns", COLUMNS, "--label-column",
            "species", *SMALL, "--init", "k-means++"]  # fmt: skip
    status, out, err = cli(*argv, "--init-data", public)
    assert status == 0, err
    assert "K-means, K=3, I=3, k-means++ start from public points on " in out
    for score in ("Rand index", "adjusted Rand index", "normalized mutual information"):
        assert f"\n  {score}: 0." in out or f"\n  {score}: 1.0000" in out, score
    assert "initial centroids" not in out
    status, out, err = cli(*argv)  # k-means++ among the sources' own points: a caveat
    assert status == 0, err
    assert "note: the 3 initial centroids are sources' own points chosen by k-means++" in out


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_null_cells_are_refused_unless_dropped(cli, iris_csv, tmp_path, suffix):
    path = tmp_path / f"holes.{suffix}"
    options = "(FORMAT PARQUET)" if suffix == "parquet" else "(FORMAT CSV, HEADER)"
    duckdb.sql(
        f"COPY (SELECT * REPLACE (CASE WHEN petal_width > 2.4 THEN NULL ELSE sepal_length END "
        f"AS sepal_length) FROM '{iris_csv}') TO '{path}' {options}"
    )
    argv = ["run", "kmeans", "--data", path, "--columns", COLUMNS, *SMALL]
    status, _, err = cli(*argv)
    assert status == 2 and err.count("\n") == 1
    assert "invalid --data: " in err and "3 rows with NaN or inf (of 150)" in err
    assert "NULL cells are read as NaN" in err and "--drop-non-finite" in err
    status, out, err = cli(*argv, "--drop-non-finite")
    assert status == 0, err
    assert "dpcomm: warning: dropped 3 of 150 points (3 rows with NaN or inf)" in err
    assert "147 sources" in out
