"""Fixtures of the integration tests (defined in :mod:`hosts`): two hosts, a lossy link."""

from hosts import lossy_hosts, two_hosts

__all__ = ["lossy_hosts", "two_hosts"]
