"""The two-phase batch commit as pure state machines: the coordinator's and a target's side."""

from __future__ import annotations

import pytest

from dpcomm.engine.network.commit import BatchCommit, BatchIntake, batch_digest
from dpcomm.errors import InvalidParameterError

SENDERS = frozenset({"scrambler-0-0", "scrambler-0-1", "scrambler-0-2"})
A, B, C = sorted(SENDERS)


def ids(*numbers: int) -> list[bytes]:
    return [n.to_bytes(16, "big") for n in numbers]


# --------------------------------------------------------------------------- BatchCommit


def test_commit_before_finalize_is_accepted_and_repeated_commits_too():
    commit = BatchCommit(SENDERS)
    assert commit.request(A) is True
    assert commit.request(A) is True  # a retried COMMIT gets the same answer
    assert commit.committed == {A}
    assert commit.refused == set()
    assert commit.lost == set()


def test_commit_after_finalize_is_refused():
    commit = BatchCommit(SENDERS)
    commit.request(A)
    assert commit.finalize() == frozenset({A})
    assert commit.request(B) is False
    assert commit.refused == {B}
    assert B not in commit.committed
    # The committed sender retrying after FINALIZE is still told COMMITTED.
    assert commit.request(A) is True
    assert commit.finalize() == frozenset({A})


def test_commit_from_a_stranger_is_refused():
    commit = BatchCommit(SENDERS)
    assert commit.request("source-3") is False
    assert commit.refused == {"source-3"}
    assert commit.committed == set()


def test_lose_before_commit_marks_lost_and_a_later_commit_is_refused():
    commit = BatchCommit(SENDERS)
    commit.lose(B)
    assert commit.lost == {B}
    assert commit.request(B) is False
    assert commit.refused == {B}
    assert commit.committed == set()


def test_lose_after_commit_is_ignored():
    commit = BatchCommit(SENDERS)
    commit.request(C)
    commit.lose(C)
    assert commit.lost == set()
    assert commit.committed == {C}
    assert commit.finalize() == frozenset({C})


def test_lose_of_a_stranger_or_after_finalize_changes_nothing():
    commit = BatchCommit(SENDERS)
    commit.lose("compute-0-0")
    assert commit.lost == set()
    commit.request(A)
    commit.finalize()
    lost = set(commit.lost)
    commit.lose(A)
    commit.lose("compute-0-0")
    assert commit.lost == lost == {B, C}


def test_decided_once_every_sender_committed_or_was_lost():
    commit = BatchCommit(SENDERS)
    assert not commit.decided
    commit.request(A)
    commit.lose(B)
    assert not commit.decided
    commit.request(C)
    assert commit.decided
    assert not commit.finalized


def test_finalize_marks_undecided_senders_lost_and_is_idempotent():
    commit = BatchCommit(SENDERS)
    commit.request(A)
    commit.lose(B)
    first = commit.finalize()
    assert first == frozenset({A})
    assert commit.finalized
    assert commit.lost == {B, C}
    assert commit.decided
    second = commit.finalize()
    assert second == first
    assert commit.lost == {B, C}
    assert commit.committed == {A}


def test_finalize_with_no_commit_loses_everyone():
    commit = BatchCommit(SENDERS)
    assert commit.finalize() == frozenset()
    assert commit.lost == set(SENDERS)


# --------------------------------------------------------------------------- BatchIntake


def test_batch_digest_is_order_independent_and_content_dependent():
    assert batch_digest(ids(1, 2, 3)) == batch_digest(ids(3, 1, 2))
    assert batch_digest(ids(1, 2, 3)) != batch_digest(ids(1, 2, 4))
    assert batch_digest(ids(1, 2)) != batch_digest(ids(1, 2, 3))
    assert len(batch_digest([])) == 32


def test_hold_verdicts():
    intake: BatchIntake[str] = BatchIntake()
    first, second = ids(1, 2)
    assert intake.hold(A, first, "x") == "held"
    assert intake.hold(A, first, "replayed") == "duplicate"
    assert intake.held[A][first] == "x"  # a retried frame does not replace the first copy
    assert intake.hold(B, first, "y") == "held"  # same id from another sender is its own
    assert intake.prepare(A, 1, batch_digest([first]))
    assert intake.hold(A, second, "late") == "after_prepare"
    assert intake.held[A] == {first: "x"}


def test_prepare_with_matching_count_and_digest_is_accepted():
    intake: BatchIntake[int] = BatchIntake()
    frames = ids(5, 9, 2)
    for number, frame in enumerate(frames):
        intake.hold(A, frame, number)
    assert intake.prepare(A, 3, batch_digest(reversed(frames)))
    assert intake.prepared == {A}


def test_prepare_with_a_wrong_count_or_digest_is_rejected_until_it_matches():
    intake: BatchIntake[int] = BatchIntake()
    frames = ids(1, 2, 3)
    for frame in frames[:2]:
        intake.hold(A, frame, 0)
    assert not intake.prepare(A, 3, batch_digest(frames))  # a frame is still missing
    assert not intake.prepare(A, 2, batch_digest(frames))  # right count, wrong digest
    assert not intake.prepare(A, 3, batch_digest(frames[:2]))  # right digest, wrong count
    assert not intake.prepare(A, 2, batch_digest(ids(1, 4)))  # a substituted frame
    assert intake.prepared == set()
    # The missing frame arrives: the same PREPARE is now accepted.
    assert intake.hold(A, frames[2], 0) == "held"
    assert intake.prepare(A, 3, batch_digest(frames))
    assert intake.prepared == {A}


def test_an_empty_batch_prepares_with_count_zero():
    intake: BatchIntake[int] = BatchIntake()
    assert intake.prepare(C, 0, batch_digest([]))
    assert not intake.prepare(B, 1, batch_digest([]))
    assert intake.prepared == {C}


@pytest.mark.parametrize("count", [-1, True, 1.0, "1", None])
def test_prepare_rejects_invalid_counts(count):
    with pytest.raises(InvalidParameterError, match="count"):
        BatchIntake().prepare(A, count, batch_digest([]))


def test_release_only_prepared_and_committed_senders_and_discard_the_rest():
    intake: BatchIntake[str] = BatchIntake()
    for sender in (C, A, B, "source-9"):
        for number in range(3):
            intake.hold(sender, ids(number)[0], f"{sender}:{number}")
    digest = batch_digest(ids(0, 1, 2))
    assert intake.prepare(A, 3, digest)
    assert intake.prepare(C, 3, digest)
    assert intake.prepare("source-9", 3, digest)
    # A and C prepared and committed; B committed without preparing; source-9 prepared only.
    committed = {A, B, C, "compute-0-0"}
    released = intake.release(committed)
    assert released == [(s, f"{s}:{n}") for s in (A, C) for n in range(3)]
    assert intake.discarded(committed) == sorted([B, "source-9"])
    assert intake.release([]) == []
    assert intake.discarded([]) == sorted([A, B, C, "source-9"])


def test_release_of_a_committed_empty_batch():
    intake: BatchIntake[str] = BatchIntake()
    intake.hold(A, ids(1)[0], "a")
    assert intake.prepare(A, 1, batch_digest(ids(1)))
    assert intake.prepare(B, 0, batch_digest([]))
    assert intake.release({A, B}) == [(A, "a")]
