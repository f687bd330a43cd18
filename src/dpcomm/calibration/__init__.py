"""Layer 9: the planner, the cheapest countermeasure that meets a privacy target under limits.

[`plan_countermeasures`][] (behind [`dpcomm.calibrate`][] and ``dpcomm plan``) searches the
countermeasures of [`dpcomm.plan`][] for the one of least network load whose plan is
(ε, δ)-DP, within limits on channels per node, extra consents and utility. Semantics (paper,
Sections 2.5, 3.3, 4.4 and 5):

* ``num_sources`` S is the number of real tuples the computation must use (the paper's
  "fixing the number of tuples effectively used to 10k", Section 5.2).
* The plan has G grouping sets (Aggregate) or I iterations (K-means): G (or I) identical
  data-dependent clusters, each with T targets (the C = T compute nodes of a grouping set, or
  the K = T centroids of an iteration).
* A configuration is local sampling + flooding (σ, d ≤ T − 1, Section 3) or uncapped
  scramblers (σ, n, d, Section 4): ⌈S_t/n⌉ scramblers with balanced batches, whose sizes
  differ by at most one and are at most n (`dpcomm.plan.costs.balanced_batch_sizes`).

One module per job:

* `dpcomm.calibration.request`: what is asked for ([`PlanRequest`][], the limits) and
  the search grid ([`SearchOptions`][]), validated;
* `dpcomm.calibration.configuration`: a configuration (a [`dpcomm.plan`][]
  countermeasure with its balanced batches) and a costed candidate;
* `dpcomm.calibration.costs`: sources recruited, utility, network load and channels,
  from the one cost model;
* `dpcomm.calibration.feasibility`: the privacy predicate (basic composition or PLDs);
* `dpcomm.calibration.search`: the exact pruned search over σ, the number of scramblers
  and d;
* `dpcomm.calibration.pareto`: the order of candidates and the Pareto front;
* `dpcomm.calibration.advice`: what to relax, and by how much, when nothing is feasible;
* `dpcomm.calibration.planner`: [`plan_countermeasures`][] and its answer;
* `dpcomm.calibration.shape`: what a calibration is made for (S, T, the composed and the
  free clusters), read from the plan a query compiles to;
* `dpcomm.calibration.split`: one (ε, δ) split between the traffic and a noisy release of
  the result, for the least expected relative error of the released values (and
  ``release=`` of [`dpcomm.calibrate`][] read, the split of a query's release);
* `dpcomm.calibration.query`: the shape of the plan a query (or K-means' points) compiles to;
* `dpcomm.calibration.calibrate`: [`dpcomm.calibrate`][] and the [`dpcomm.Calibration`][]
  it returns (what ``run_sql(sql, data, countermeasure=calibration)`` runs).

It sits above the queries, the engines and the pipeline: a calibration compiles the query it
is made for.

Names are imported on first use (the search needs the accountant, hence scipy).
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.calibration.configuration import (
        Configuration as Configuration,
        PlanCandidate as PlanCandidate,
        describe_batches as describe_batches,
    )
    from dpcomm.calibration.costs import (
        PlanCosts as PlanCosts,
        expected_utility as expected_utility,
        nonprivate_load as nonprivate_load,
        plan_costs as plan_costs,
        recruited_sources as recruited_sources,
        request_plan as request_plan,
    )
    from dpcomm.calibration.feasibility import Feasibility as Feasibility
    from dpcomm.calibration.pareto import pareto_front as pareto_front
    from dpcomm.calibration.planner import (
        PlannerResult as PlannerResult,
        plan_countermeasures as plan_countermeasures,
    )
    from dpcomm.calibration.request import (
        PlanRequest as PlanRequest,
        SearchOptions as SearchOptions,
    )
    from dpcomm.calibration.search import least_satisfying as least_satisfying
    from dpcomm.calibration.shape import PlanShape as PlanShape

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "Configuration",
    "Feasibility",
    "PlanCandidate",
    "PlanCosts",
    "PlanRequest",
    "PlanShape",
    "PlannerResult",
    "SearchOptions",
    "describe_batches",
    "expected_utility",
    "least_satisfying",
    "nonprivate_load",
    "pareto_front",
    "plan_costs",
    "plan_countermeasures",
    "recruited_sources",
    "request_plan",
]
