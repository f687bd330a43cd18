"""The parser's copies of the library's defaults and limits are the library's."""

from dpcomm.cli import defaults


def test_the_run_defaults_are_the_librarys():
    from dpcomm.api import DEFAULT_DELTA
    from dpcomm.queries.aggregate import DEFAULT_NUM_TARGETS, DEFAULT_TEXT_BYTES
    from dpcomm.queries.kmeans import INIT_METHODS
    from dpcomm.validation import MAX_COUNT, MAX_SOURCES

    assert defaults.DEFAULT_DELTA == DEFAULT_DELTA
    assert defaults.DEFAULT_NUM_TARGETS == DEFAULT_NUM_TARGETS
    assert defaults.DEFAULT_TEXT_BYTES == DEFAULT_TEXT_BYTES
    assert tuple(defaults.INIT_METHODS) == tuple(INIT_METHODS)
    assert (defaults.MAX_COUNT, defaults.MAX_SOURCES) == (MAX_COUNT, MAX_SOURCES)


def test_the_accountants_names_and_limits_are_the_librarys():
    from dpcomm.accounting.accountant import (
        DEFAULT_MONTE_CARLO_SAMPLES,
        MAX_ROUNDS,
        METHOD_NAMES,
    )

    assert defaults.METHOD_NAMES == METHOD_NAMES
    assert defaults.MAX_ROUNDS == MAX_ROUNDS
    assert defaults.DEFAULT_MONTE_CARLO_SAMPLES == DEFAULT_MONTE_CARLO_SAMPLES


def test_the_audits_defaults_are_the_librarys():
    from dpcomm.experiments import release_audit
    from dpcomm.experiments.audit import FAULT_KINDS

    assert defaults.FAULT_KINDS == FAULT_KINDS
    assert defaults.RELEASE_FAULT_KINDS == release_audit.RELEASE_FAULT_KINDS
    assert defaults.RELEASE_PAIR_NAMES == release_audit.PAIR_NAMES
    assert defaults.RELEASE_AUDIT_SQL == release_audit.RELEASE_AUDIT_SQL
    assert defaults.RELEASE_AUDIT_TARGETS == release_audit.DEFAULT_TARGETS
    traffic = release_audit.DEFAULT_COUNTERMEASURE
    assert (traffic.sampling_rate, traffic.batch_size, traffic.num_dummies) == (
        defaults.RELEASE_AUDIT_SAMPLING,
        defaults.RELEASE_AUDIT_BATCH,
        defaults.RELEASE_AUDIT_DUMMIES,
    )
    release = release_audit.DEFAULT_RELEASE
    assert (
        release.name,
        release.epsilon,
    ) == (defaults.RELEASE_AUDIT_MECHANISM, defaults.RELEASE_AUDIT_EPSILON)
    assert defaults.RELEASE_AUDIT_DELTA == release_audit.DEFAULT_DELTA
    assert defaults.RELEASE_AUDIT_BOUNDS == release_audit.DEFAULT_BOUNDS
    assert defaults.RELEASE_AUDIT_RUNS == release_audit.DEFAULT_RUNS


def test_the_kmeans_audits_defaults_are_the_librarys():
    from dpcomm.experiments import kmeans_audit

    assert defaults.KMEANS_FAULT_KINDS == kmeans_audit.KMEANS_FAULT_KINDS
    assert defaults.KMEANS_AUDIT_TARGETS == kmeans_audit.DEFAULT_KMEANS_CLUSTERS
    traffic = kmeans_audit.DEFAULT_KMEANS_COUNTERMEASURE
    assert (traffic.sampling_rate, traffic.batch_size, traffic.num_dummies) == (
        defaults.KMEANS_AUDIT_SAMPLING,
        defaults.KMEANS_AUDIT_BATCH,
        defaults.KMEANS_AUDIT_DUMMIES,
    )
    release = kmeans_audit.DEFAULT_KMEANS_RELEASE
    assert (release.name, release.epsilon) == ("laplace", defaults.KMEANS_AUDIT_EPSILON)
    assert defaults.KMEANS_AUDIT_DELTA == kmeans_audit.DEFAULT_KMEANS_DELTA
    assert defaults.KMEANS_AUDIT_BOUNDS == kmeans_audit.DEFAULT_KMEANS_BOUNDS
    assert defaults.KMEANS_AUDIT_RUNS == kmeans_audit.DEFAULT_KMEANS_RUNS


def test_the_longest_round_is_the_network_engines():
    from dpcomm.engine.network.deploy import MAX_ROUND_SECONDS

    assert defaults.MAX_ROUND_SECONDS == MAX_ROUND_SECONDS
