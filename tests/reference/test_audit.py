"""The audit: PASS on the correct mechanisms, FAIL on every seeded fault; its runs are the roles'.

Settings (stated in docs/audit.md):

* paper: scrambler T = 20, n = 100, d = 50, σ = 0.2, δ = 1e-4 (uncapped and capped);
  local R_σ^d with T = 20, σ = 0.5, d = 3, pure ε;
* scrambler faults: T = 4, n = 10, d = 20, σ = 0.2, δ = 1e-4 (small, so that every fault is
  visible with 3·10^5 runs per input); local faults at the paper's local settings.

Every audit is seeded, so the verdicts are reproducible. In tests/reference (not tests/unit):
the audits draw 10^5 to 3·10^5 runs per input, about 12 s of CPU in all, too much for
``make check``; ``make test`` runs them.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcomm.accounting import LocalRandomizer, ScramblerMechanism
from dpcomm.errors import InvalidParameterError
from dpcomm.experiments.audit import (
    AUDIT_FLOW,
    FAULT_KINDS,
    AuditedMechanism,
    audit,
    neighbouring_inputs,
    seeded_fault,
)
from dpcomm.plan.costs import ConsecutiveBatches
from dpcomm.protocol import roles
from dpcomm.protocol.randomness import Randomness

PAPER_SCRAMBLER = ScramblerMechanism(
    num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50
)
PAPER_LOCAL = LocalRandomizer(num_targets=20, sampling_rate=0.5, num_dummies=3)
FAULT_SCRAMBLER = ScramblerMechanism(
    num_targets=4, sampling_rate=0.2, batch_size=10, num_dummies=20
)


def test_local_passes_and_is_nearly_tight_at_the_paper_settings():
    report = audit(PAPER_LOCAL, runs=200_000, rng=0)
    assert report.passed
    assert report.upper_method == "theorem-1"
    # Theorem 1 is attained by the event {t' in S, t not in S}: the audit comes close.
    assert report.lower_bound > 0.9 * report.upper_bound
    assert report.appendix_d.new_share_draws < 0.01


def test_scrambler_passes_at_the_paper_settings():
    report = audit(PAPER_SCRAMBLER, runs=200_000, rng=0)
    assert report.passed
    assert report.upper_method == "exact"
    assert 1.0 < report.lower_bound < report.upper_bound
    # At T = 20, n = 100 almost every full output is new: the Appendix D view cannot work.
    assert report.appendix_d.new_share_draws > 0.9


def test_capped_scrambler_passes_at_the_paper_settings():
    capped = ScramblerMechanism(
        num_targets=20, sampling_rate=0.2, batch_size=100, num_dummies=50, capped=True
    )
    report = audit(capped, runs=100_000, rng=0)
    assert report.passed
    assert report.lower_bound > 1.0


def test_correct_scrambler_passes_at_the_fault_settings():
    report = audit(FAULT_SCRAMBLER, runs=300_000, rng=3)
    assert report.passed


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_scrambler_faults_fail(kind):
    report = audit(seeded_fault(FAULT_SCRAMBLER, kind), runs=300_000, rng=4)
    assert not report.passed, (kind, report.lower_bound, report.upper_bound)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_local_faults_fail(kind):
    report = audit(seeded_fault(PAPER_LOCAL, kind), runs=100_000, rng=4)
    assert not report.passed, (kind, report.lower_bound, report.upper_bound)


@pytest.mark.parametrize("kind", ["no-shuffle", "lower-sampling"])
def test_some_scrambler_faults_fail_even_at_the_paper_settings(kind):
    report = audit(seeded_fault(PAPER_SCRAMBLER, kind), runs=100_000, rng=1)
    assert not report.passed


def scrambler_runs_node_by_node(mechanism, target, other, runs, randomness, first_run):
    """The runs as the networked runtime makes them: each source and scrambler on its own."""
    countermeasure = mechanism.countermeasure
    size, batch = mechanism.declared.num_targets, mechanism.declared.batch_size
    # The coordinator's batches of every source up to the last run's, as the engines take them.
    batches = ConsecutiveBatches.of((first_run + runs) * batch, batch)
    counts, heads = [], []
    for run in range(first_run, first_run + runs):
        sent = []
        for position in range(batch):
            source = run * batch + position
            assert batches.batch_of([source])[0] == run
            messages = roles.source_messages(
                [target if position == 0 else other],
                countermeasure=countermeasure,
                num_targets=size,
                randomness=randomness,
                flow=AUDIT_FLOW,
                sources=[source],
            )
            sent.append(int(messages.sent[0]))
        received = np.bincount(sent, minlength=size)[None, :]
        dummies = roles.scrambler_dummies(
            received,
            [batch],
            countermeasure=countermeasure,
            randomness=randomness,
            flow=AUDIT_FLOW,
            scramblers=[run],
        )[0]
        forwarded = sent + np.repeat(np.arange(size), dummies).tolist()
        order = roles.scrambler_shuffle(
            len(forwarded),
            largest_batch=batch,
            countermeasure=countermeasure,
            randomness=randomness,
            flow=AUDIT_FLOW,
            scrambler=run,
        )
        counts.append(received[0] + dummies)
        heads.append(forwarded[order[0]])
    return np.array(counts), np.array(heads)


@pytest.mark.parametrize("capped", [False, True])
def test_scrambler_runs_are_the_role_steps_node_by_node(capped):
    mechanism = AuditedMechanism(
        declared=ScramblerMechanism(
            num_targets=4, sampling_rate=0.5, batch_size=5, num_dummies=6, capped=capped
        )
    )
    randomness = Randomness(11, round=1)
    seen = mechanism.sample(0, 1, 12, randomness=randomness, first_run=30)
    counts, heads = scrambler_runs_node_by_node(mechanism, 0, 1, 12, randomness, 30)
    np.testing.assert_array_equal(seen.counts, counts)
    np.testing.assert_array_equal(seen.head, heads)
    # A run does not depend on the runs simulated with it.
    alone = mechanism.sample(0, 1, 1, randomness=randomness, first_run=35)
    np.testing.assert_array_equal(alone.counts[0], counts[5])


def test_local_runs_are_the_role_steps_node_by_node():
    mechanism = AuditedMechanism(declared=PAPER_LOCAL)
    randomness = Randomness(5)
    seen = mechanism.sample(3, 1, 20, randomness=randomness, first_run=100)
    for row, source in enumerate(range(100, 120)):
        messages = roles.source_messages(
            [3],
            countermeasure=mechanism.countermeasure,
            num_targets=20,
            randomness=randomness,
            flow=AUDIT_FLOW,
            sources=[source],
        )
        emitted = [int(messages.sent[0]), *messages.flooding[0].tolist()]
        order = roles.source_send_order(
            len(emitted), randomness=randomness, flow=AUDIT_FLOW, source=source
        )
        np.testing.assert_array_equal(seen.counts[row], np.bincount(emitted, minlength=20))
        assert seen.head[row] == emitted[order[0]]


def test_faults_change_only_their_step():
    declared = FAULT_SCRAMBLER
    randomness = Randomness(2)
    correct = AuditedMechanism(declared=declared).sample(0, 1, 2000, randomness=randomness)
    for kind in FAULT_KINDS:
        faulty = seeded_fault(declared, kind)
        seen = faulty.sample(0, 1, 2000, randomness=randomness)
        same_counts = np.array_equal(seen.counts, correct.counts)
        assert same_counts == (kind == "no-shuffle"), kind
        if kind == "lower-sampling":
            assert faulty.countermeasure.sampling_rate == declared.sampling_rate / 4
        if kind == "fewer-dummies":
            assert faulty.countermeasure.num_dummies == declared.num_dummies // 5
        if kind == "nonuniform-dummies":
            # The broken dummy step never draws the last target: only the sources' messages
            # reach it.
            assert faulty.countermeasure == AuditedMechanism(declared=declared).countermeasure
            assert seen.counts[:, -1].sum() < correct.counts[:, -1].sum()
    # Without the shuffle the audited source's message (on target 0 with probability
    # 1 − σ + σ/T = 0.85) leaves first; with it the first message is a uniform pick (≈ 0.21).
    no_shuffle = seeded_fault(declared, "no-shuffle").sample(0, 1, 2000, randomness=randomness)
    assert np.mean(no_shuffle.head == 0) > 0.8 > 0.3 > np.mean(correct.head == 0)


def test_neighbouring_inputs_use_the_boundary_targets():
    inputs = neighbouring_inputs(20)
    assert (inputs.target, inputs.alternative, inputs.others) == (0, 19, 1)
    assert neighbouring_inputs(2).others == 0


def test_invalid_parameters():
    with pytest.raises(InvalidParameterError, match="runs"):
        audit(PAPER_LOCAL, runs=10)
    with pytest.raises(InvalidParameterError, match="confidence"):
        audit(PAPER_LOCAL, runs=1000, confidence=1.0)
    with pytest.raises(InvalidParameterError, match="fault"):
        seeded_fault(PAPER_LOCAL, "bogus")
    with pytest.raises(InvalidParameterError, match="dummy_weights"):
        AuditedMechanism(declared=PAPER_LOCAL, dummy_weights=(1.0, 0.0))
