"""A noisy release of a run's result: the one package that owns it.

* `dpcomm.release.mechanisms`: Laplace and Gaussian releases, the sensitivities of the
  joint view of traffic and release (the cases of its proof), noise scales;
* `dpcomm.release.noise`: a query's release bound and its noise drawn by OpenDP, key
  selection, the public description a node binds again;
* `dpcomm.release.compose`: traffic and release composed;
* `dpcomm.release.report`: the release described in a run's report, and what a result
  node publishes.
"""
