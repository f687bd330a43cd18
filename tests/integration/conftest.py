"""Fixtures of the integration tests: two hosts, a lossy link, a slow link (:mod:`hosts`), the built
documentation site (:mod:`docs_site`), work the test workers share (:mod:`made_once`)."""

from docs_site import docs_site
from hosts import lossy_hosts, slow_hosts, two_hosts
from made_once import made_once

__all__ = ["docs_site", "lossy_hosts", "made_once", "slow_hosts", "two_hosts"]
