"""Side-by-side: dpcomm's exact Lemma 2 against the peers' public shuffle accountants (issue 12).

Setting: R_σ over T = 20 targets with σ = 0.2, i.e. T-ary randomized response with
ε0 = ln(1 + (1 − σ)T/σ) = ln 81; δ = 1e-6; n = 10^3 … 10^6 shuffled reports. dpcomm's bound
is run with d = 0 dummies (like for like with the peers, who bound a plain shuffler) and with
d = 100 (dpcomm only). Each peer is run from its own public code, exported from a mirror
(a git directory, as ``fetch`` leaves it) into a temporary directory and imported from there;
no peer code is copied into this repository. See benchmarks/peers/README.md for what each row
computes, the repositories, commits and licenses.

Every point runs in a fresh child process with a wall-clock limit (``--timeout``, default
300 s) and an address-space limit (``--memory-gib``, default 16); a point over either is
reported as skipped with the reason. Times are wall seconds of the whole ε search.

Usage:
    python benchmarks/bench_peers.py --balle DIR --feldman DIR --su DIR --koskela DIR \
        --wang DIR [--sizes 1000,10000,100000,1000000] [--tools a,b] [--timeout 300]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

NUM_TARGETS = 20
SIGMA = 0.2
DELTA = 1e-6
EPS0 = math.log(1.0 + (1.0 - SIGMA) * NUM_TARGETS / SIGMA)  # ln 81: R_σ is ε0-LDP
KOSKELA_NX = int(3e7)  # grid size and range used in their blankets_fig4 scripts
KOSKELA_L = 10.0

# tool -> (peer whose mirror it needs or None, what it bounds)
TOOLS: dict[str, tuple[str | None, str]] = {
    "dpcomm exact Lemma 2, d=0": (
        None,
        "R_σ (T-ary RR) shuffled, d = 0: Lemma 2 evaluated exactly",
    ),
    "dpcomm PLD pair, d=0": (
        None,
        "scrambler_pair (the Lemma 2 dominating pair), δ(ε) of its atoms",
    ),
    "dpcomm exact Lemma 2, d=100": (
        None,
        "R_σ shuffled with 100 blanket dummies (no peer covers dummies)",
    ),
    "Balle et al. blanket, Bennett (k-RR)": (
        "balle",
        "k-RR (k = T) shuffled: blanket bound with Bennett's inequality",
    ),
    "Balle et al. blanket, Hoeffding (k-RR)": (
        "balle",
        "k-RR (k = T) shuffled: blanket bound with Hoeffding's inequality",
    ),
    "Feldman et al. clones, numerical": (
        "feldman",
        "any ε0-LDP randomizer shuffled (generic, ε0 = ln 81)",
    ),
    "Feldman et al. clones, closed form": (
        "feldman",
        "any ε0-LDP randomizer shuffled (generic; valid only if ε0 < ln(n/(16 ln(4/δ))))",
    ),
    "Feldman et al. stronger clones (Wang et al.'s code)": (
        "wang",
        "any ε0-LDP randomizer shuffled (generic), numerical, from Wang et al.'s repository",
    ),
    "Wang et al. variation-ratio (k-RR)": (
        "wang",
        "k-RR (k = T) shuffled: variation-ratio reduction, numerical upper bound",
    ),
    "Su et al. FFT (k-RR)": (
        "su",
        "k-RR (k = T) shuffled: optimal (blanket) decomposition, FFT, CPU (numpy for cupy)",
    ),
    "Koskela et al. FFT, strong adversary (k-RR)": (
        "koskela",
        "k-RR (k = T, γ = σ) shuffled, their strong-adversary PLD, FFT accountant",
    ),
    "Koskela et al. FFT, strong adversary (k-RR), error term dropped": (
        "koskela",
        "the row above without their FFT error term: NOT a certified bound",
    ),
}


# ---------------------------------------------------------------------------- the points
# Each maker imports and sets up (untimed) and returns the timed computation of ε.

Point = Callable[[], dict[str, object]]


def _dpcomm_exact(n: int, dummies: int, _source: Path | None) -> Point:
    from dpcomm.accounting.exact import ExactLemma2
    from dpcomm.accounting.mechanisms import ScramblerMechanism
    from dpcomm.accounting.search import epsilon_for_delta

    mechanism = ScramblerMechanism(
        num_targets=NUM_TARGETS, sampling_rate=SIGMA, batch_size=n, num_dummies=dummies
    )
    return lambda: {"epsilon": epsilon_for_delta(ExactLemma2(mechanism).delta, DELTA, upper=EPS0)}


def _dpcomm_pld(n: int, _source: Path | None) -> Point:
    from dpcomm.accounting.mechanisms import ScramblerMechanism
    from dpcomm.accounting.pld import scrambler_pair
    from dpcomm.accounting.search import epsilon_for_delta

    mechanism = ScramblerMechanism(
        num_targets=NUM_TARGETS, sampling_rate=SIGMA, batch_size=n, num_dummies=0
    )
    return lambda: {
        "epsilon": epsilon_for_delta(scrambler_pair(mechanism).delta, DELTA, upper=EPS0)
    }


def _import_from(source: Path, *modules: str) -> list[object]:
    import importlib

    sys.path.insert(0, str(source))
    return [importlib.import_module(name) for name in modules]


def _balle(n: int, source: Path | None, inequality: str) -> Point:
    assert source is not None
    bounds, mechanisms = _import_from(
        source, "shuffleddp.amplification_bounds", "shuffleddp.mechanisms"
    )
    bound_class = bounds.BennettExact if inequality == "bennett" else bounds.Hoeffding  # type: ignore[attr-defined]
    bound = bound_class(mechanisms.RRMechanism(eps0=EPS0, k=NUM_TARGETS))  # type: ignore[attr-defined]
    return lambda: {"epsilon": bound.get_eps(EPS0, n, DELTA)}


def _feldman(n: int, source: Path | None, closed: bool) -> Point:
    assert source is not None
    (amplification,) = _import_from(source, "computeamplification")
    if closed:
        valid = math.log(n / (16 * math.log(4 / DELTA))) > EPS0
        note = "" if valid else "regime not valid for the closed form: it returns ε0"
        return lambda: {
            "epsilon": amplification.closedformanalysis(n, EPS0, DELTA),  # type: ignore[attr-defined]
            "note": note,
        }
    # example.py uses 10 bisection steps and step = 100; 20 steps give ε to ε_start/2^20
    return lambda: {
        "epsilon": amplification.numericalanalysis(n, EPS0, DELTA, 20, 100, True)  # type: ignore[attr-defined]
    }


def _wang(n: int, source: Path | None, variant: str) -> Point:
    assert source is not None
    (unified,) = _import_from(source, "unifiedamplification")
    iterations = 20  # bisection on [0, ε0]: ε to ε0/2^20 ≈ 4e-6
    if variant == "strong_clone":  # as their __main__ computes "strong_clone"
        p = math.exp(EPS0)
        alpha = r = 1.0 / (math.exp(EPS0) + 1)
        return lambda: {
            "epsilon": float(unified.amplificationUBCore(p, alpha, r, r, n, DELTA, iterations))  # type: ignore[attr-defined]
        }
    # computeUBParameters(ε0, "krr", k), then amplificationUB, as their __main__ does
    p, beta, q0, q1 = unified.computeUBParameters(EPS0, "krr", NUM_TARGETS)  # type: ignore[attr-defined]
    return lambda: {
        "epsilon": float(unified.amplificationUB(p, beta, q0, q1, n, DELTA, iterations))  # type: ignore[attr-defined]
    }


def _su(n: int, source: Path | None) -> Point:
    assert source is not None
    import numpy

    # Their FFT runs on a GPU through CuPy; every CuPy call it makes (asarray, pad, fft.fft,
    # fft.ifft, maximum, sum, linspace) has the same NumPy signature, so NumPy stands in.
    sys.modules.setdefault("cupy", numpy)
    bounds, mechanisms = _import_from(source, "amplification_bounds", "mechanisms")
    bound = bounds.FFTbound(mechanisms.RRMechanism(EPS0, NUM_TARGETS))  # type: ignore[attr-defined]
    return lambda: {"epsilon": bound.get_eps(EPS0, n, DELTA)}


def _koskela(n: int, source: Path | None, with_error_term: bool) -> Point:
    assert source is not None
    (tight,) = _import_from(source / "blankets_fig4", "compute_epsilon_bin_tight")

    def point() -> dict[str, object]:
        omega, grid, error = tight.get_omega(n, SIGMA, NUM_TARGETS, KOSKELA_NX, KOSKELA_L)  # type: ignore[attr-defined]
        epsilon = tight.get_epsilons(  # type: ignore[attr-defined]
            omega,
            error if with_error_term else 0.0,
            grid,
            n=n,
            gamma=SIGMA,
            k=NUM_TARGETS,
            n_c=1,
            nx=KOSKELA_NX,
            L=KOSKELA_L,
            target_delta=DELTA,
        )
        note = f"their error term: {float(error):.1e}"
        if with_error_term and epsilon > 99.0:
            note += "; no ε found (their bisection ends at its upper end, 100)"
        return {"epsilon": float(epsilon), "note": note}

    return point


POINTS: dict[str, Callable[[int, Path | None], Point]] = {
    "dpcomm exact Lemma 2, d=0": lambda n, s: _dpcomm_exact(n, 0, s),
    "dpcomm PLD pair, d=0": _dpcomm_pld,
    "dpcomm exact Lemma 2, d=100": lambda n, s: _dpcomm_exact(n, 100, s),
    "Balle et al. blanket, Bennett (k-RR)": lambda n, s: _balle(n, s, "bennett"),
    "Balle et al. blanket, Hoeffding (k-RR)": lambda n, s: _balle(n, s, "hoeffding"),
    "Feldman et al. clones, numerical": lambda n, s: _feldman(n, s, closed=False),
    "Feldman et al. clones, closed form": lambda n, s: _feldman(n, s, closed=True),
    "Feldman et al. stronger clones (Wang et al.'s code)": lambda n, s: _wang(n, s, "strong_clone"),
    "Wang et al. variation-ratio (k-RR)": lambda n, s: _wang(n, s, "krr"),
    "Su et al. FFT (k-RR)": _su,
    "Koskela et al. FFT, strong adversary (k-RR)": lambda n, s: _koskela(n, s, True),
    "Koskela et al. FFT, strong adversary (k-RR), error term dropped": lambda n, s: _koskela(
        n, s, False
    ),
}


def run_point(tool: str, n: int, source: Path | None, memory_gib: float) -> dict[str, object]:
    """One point in this (child) process; the peers' own prints are swallowed."""
    import resource

    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with contextlib.redirect_stdout(io.StringIO()):
        compute = POINTS[tool](n, source)
        start = time.perf_counter()
        result = compute()
    result["seconds"] = round(time.perf_counter() - start, 2)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result


# ------------------------------------------------------------------------------ the parent


def _git_dir(mirror: Path) -> Path:
    return mirror / ".git" if (mirror / ".git").is_dir() else mirror


def export(mirror: Path, into: Path) -> str:
    """Export the mirror's HEAD into ``into``; returns the commit."""
    git_dir = _git_dir(mirror)
    commit = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "HEAD"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def _format_epsilon(value: object) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6f}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for peer in ("balle", "feldman", "su", "koskela", "wang"):
        parser.add_argument(f"--{peer}", type=Path, help=f"mirror (git dir) of {peer}'s code")
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--tools", help="semicolon-separated subset of: " + "; ".join(TOOLS))
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per point")
    parser.add_argument("--memory-gib", type=float, default=16.0, help="address space per point")
    parser.add_argument("--inline", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inline:
        tool, n, source = args.inline[0], int(args.inline[1]), args.inline[2]
        point = run_point(tool, n, Path(source) if source else None, args.memory_gib)
        print(json.dumps(point))
        return

    tools = [t.strip() for t in args.tools.split(";")] if args.tools else list(TOOLS)
    sizes = [int(size) for size in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="dpcomm-peers-") as scratch:
        sources: dict[str, Path] = {}
        for peer in {TOOLS[t][0] for t in tools} - {None}:
            mirror = getattr(args, peer)
            if mirror is None:
                print(f"<!-- no --{peer} mirror given: its rows are left out -->", flush=True)
                continue
            sources[peer] = Path(scratch) / peer  # type: ignore[index]
            commit = export(mirror, sources[peer])  # type: ignore[index]
            print(f"<!-- {peer}: {mirror} at {commit} -->", flush=True)
        print("| tool | what it bounds | n | ε at δ = 1e-6 | time | peak RSS | note |")
        print("|---|---|---:|---:|---:|---:|---|")
        for tool in tools:
            peer, bounds = TOOLS[tool]
            if peer is not None and peer not in sources:
                continue
            source = str(sources[peer]) if peer is not None else ""
            for n in sizes:
                command = [sys.executable, __file__, "--inline", tool, str(n), source]
                command += ["--memory-gib", str(args.memory_gib)]
                try:
                    done = subprocess.run(
                        command,
                        capture_output=True,
                        text=True,
                        timeout=args.timeout,
                        env={**os.environ, "PYTHONHASHSEED": "0"},
                    )
                except subprocess.TimeoutExpired:
                    row = ["skipped", f"> {args.timeout:.0f} s", "", "stopped at the time limit"]
                else:
                    if done.returncode == 0:
                        point = json.loads(done.stdout.strip().splitlines()[-1])
                        row = [
                            _format_epsilon(point["epsilon"]),
                            f"{point['seconds']} s",
                            f"{point['peak_rss_mib']} MiB",
                            str(point.get("note", "")),
                        ]
                    else:
                        last = (done.stderr.strip().splitlines() or ["?"])[-1]
                        row = ["failed", "", "", last[:120]]
                print(f"| {tool} | {bounds} | {n:,} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
