"""Fixtures of the integration tests: two hosts, a lossy link, a slow link (:mod:`hosts`), the built
documentation site (:mod:`docs_site`)."""

from docs_site import docs_site
from hosts import lossy_hosts, slow_hosts, two_hosts

__all__ = ["docs_site", "lossy_hosts", "slow_hosts", "two_hosts"]
