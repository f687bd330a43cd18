"""A run from its job to its report: prepared once, executed by any engine, reported.

* `dpcomm.pipeline.job`: a run's `Job`, and `prepare` into a `Prepared` holding
  the transformed plan, the one guarantee (traffic, release, their composition, a
  deployment's worst case) and the charge;
* `dpcomm.pipeline.runs`: the run and its baseline executed, then reported;
* `dpcomm.pipeline.report`, `dpcomm.pipeline.utility`,
  `dpcomm.pipeline.estimate`: what a report says;
* `dpcomm.pipeline.charge`: what a budget charges.
"""
