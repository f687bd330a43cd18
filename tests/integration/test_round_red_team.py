"""Round-level attacks by one certified node, and an absent one, over the in-memory transport.

Each test makes one node misbehave the way a certified attacker could (its own code changed,
here by monkeypatching the role it runs) and checks that the round contains the damage: a
malformed tuple costs that tuple only, a scrambler that relays its messages twice loses its
batch instead of doubling it, a source that never registers is left out instead of stopping
the round. Each is counted where the report lists attacks.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import replace

import pytest

from dpcomm.data import synthetic_table
from dpcomm.engine.network import deploy, scrambler, source
from dpcomm.engine.network.deploy import NetworkEngine
from dpcomm.engine.network.records import Peer
from dpcomm.engine.network.spec import CountermeasureSpec, NodeConfig
from dpcomm.plan import LocalFlooding, Scramblers
from dpcomm.queries.aggregate import AggregateProgram

SQL = "SELECT g1, COUNT(*) AS n FROM t GROUP BY g1"
ROWS = 40
#: σ = 0: every tuple is delivered, so COUNT(*) adds up to the tuples counted.
SCRAMBLERS = Scramblers(sampling_rate=0.0, batch_size=20, num_dummies=3)


def _program() -> AggregateProgram:
    return AggregateProgram.from_sql(SQL, synthetic_table(num_rows=ROWS, seed=2), num_targets=3)


def _counted(run) -> int:
    return sum(row["n"] for row in run.result)


def _attacks(run) -> dict[str, int]:
    total: dict[str, int] = {}
    for drops in run.details.wire.attacks.values():
        for reason, count in drops.items():
            total[reason] = total.get(reason, 0) + count
    return total


def _engine(**options) -> NetworkEngine:
    # T = 1 s: every node is a coroutine of this event loop, so a phase is idle that long only
    # when a node is absent (the tests that leave one out wait T for it, once per round).
    return NetworkEngine(transport="memory", timeout=60, idle_seconds=1, **options)


@pytest.mark.parametrize(
    "countermeasure", [SCRAMBLERS, LocalFlooding(sampling_rate=0.0, num_dummies=2)]
)
def test_one_malformed_tuple_costs_that_tuple_only(monkeypatch, countermeasure):
    honest_seal = source.seal_payload
    calls = []

    def seal(key, content, *, payload_size):
        calls.append(content)
        if len(calls) == 1:  # the first source to seal: right length, content that is no tuple
            content = b"\x01"
        return honest_seal(key, content, payload_size=payload_size)

    monkeypatch.setattr(source, "seal_payload", seal)
    run = _engine().execute(_program(), countermeasure, delta=1e-4, seed=3)
    assert _counted(run) == ROWS - 1  # the other tuples of that compute node still count
    assert _attacks(run).get("malformed_tuple") == 1


def test_a_scrambler_relaying_each_message_twice_loses_its_batch(monkeypatch):
    honest_batch = scrambler.Scrambler.batch

    def doubled(self, batched, targets):
        dummies, messages = honest_batch(self, batched, targets)
        if self.index == 0:
            messages = messages + messages  # every ciphertext again, under fresh message ids
        return dummies, messages

    monkeypatch.setattr(scrambler.Scrambler, "batch", doubled)
    run = _engine(max_left_out=1.0).execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    # Never 60 tuples from 40 sources: the doubled batch is refused whole.
    assert _counted(run) == ROWS - SCRAMBLERS.batch_size
    assert _attacks(run).get("repeated_ciphertext", 0) >= 1


def test_a_source_that_never_registers_is_left_out_not_fatal(monkeypatch):
    honest_run = deploy.run_in_memory

    def without_source_5(configs):
        return honest_run([c for c in configs if c.name != "source-5"])

    monkeypatch.setattr(deploy, "run_in_memory", without_source_5)
    run = _engine(max_left_out=0.1).execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert run.details.failures == ()
    assert all(5 in rows for rows in run.details.left_out_sources.values())
    assert _counted(run) == ROWS - 1
    # Beyond max_left_out the round is reported failed, but it still computed the others.
    strict = _engine().execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert any("left out" in failure for failure in strict.details.failures)
    assert _counted(strict) == ROWS - 1


def test_a_source_writing_straight_to_its_compute_node_never_taints_its_scrambler(monkeypatch):
    honest_send = source.Source.send_to_scrambler

    async def poisoning(self, flow, scrambler_peer, channel, target, sealed):
        if self.index == 0:  # its own sealed frame, first straight to its compute node
            name = str(self.spec.receivers(flow)[target])
            scrambled = self.spec.transformed.routed_from(flow)[1].name
            with contextlib.suppress(Exception):
                direct = await self.context.connect(Peer(name, (name,)))
                at = self.spec.routed_names.index(scrambled)
                direct.write_data(at, target, sealed, os.urandom(16))
                await direct.drain(timeout=5.0)
                await asyncio.sleep(0.1)
                await direct.close()
        return await honest_send(self, flow, scrambler_peer, channel, target, sealed)

    monkeypatch.setattr(source.Source, "send_to_scrambler", poisoning)
    run = _engine().execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert _counted(run) == ROWS  # the honest scrambler's batch counts whole
    assert run.details.failures == ()
    assert _attacks(run).get("unauthorized", 0) >= 1
    assert "repeated_ciphertext" not in _attacks(run)


def test_a_ciphertext_in_two_scramblers_batches_counts_once_and_taints_neither(monkeypatch):
    honest_send = source.Source.send_to_scrambler
    first: dict[str, tuple[int, int, bytes]] = {}
    colluded: list[int] = []

    async def colluding(self, flow, scrambler_peer, channel, target, sealed):
        batch = int(self.routes.batches(flow).batch_of([self.index])[0])
        if self.index == 0:
            first[flow] = (batch, target, sealed)
        elif self.index == ROWS - 1:  # the last source: in the other scrambler's batch
            for _ in range(500):
                if flow in first:
                    break
                await asyncio.sleep(0.01)
            if flow in first and first[flow][0] != batch:
                _, target, sealed = first[flow]  # source 0's ciphertext instead of its own
                colluded.append(self.index)
        return await honest_send(self, flow, scrambler_peer, channel, target, sealed)

    monkeypatch.setattr(source.Source, "send_to_scrambler", colluding)
    run = _engine(max_left_out=1.0).execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert colluded == [ROWS - 1]
    # Both batches count; source 0's tuple once (the colluder gave up its own).
    assert _counted(run) == ROWS - 1
    assert _attacks(run).get("repeated_ciphertext", 0) >= 1


def _with_edited_round(monkeypatch, *names: str) -> None:
    """The nodes ``names`` run a config whose round has no dummies (another spec)."""
    honest_run = deploy.run_in_memory

    def edited(configs):
        for config in configs:
            if config.name in names:
                countermeasures = {
                    flow: CountermeasureSpec.of(replace(SCRAMBLERS, num_dummies=0))
                    for flow in config.round.countermeasures
                }
                round = replace(config.round, countermeasures=countermeasures)
                yield NodeConfig.of(config.settings, round)
            else:
                yield config

    monkeypatch.setattr(deploy, "run_in_memory", lambda configs: honest_run(list(edited(configs))))


def test_a_source_holding_another_rounds_spec_is_refused_and_left_out(monkeypatch):
    _with_edited_round(monkeypatch, "source-5")
    run = _engine(max_left_out=0.1).execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert "refused its registration" in run.details.errors["source-5"]
    assert "differs from the coordinator's" in run.details.errors["source-5"]
    assert all(5 in rows for rows in run.details.left_out_sources.values())
    assert _counted(run) == ROWS - 1
    assert _attacks(run).get("round_mismatch") == 1


def test_a_scrambler_holding_another_rounds_spec_fails_the_round_before_data_moves(monkeypatch):
    _with_edited_round(monkeypatch, "scrambler-0-1")
    engine = NetworkEngine(transport="memory", timeout=60, idle_seconds=1)
    run = engine.execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert "refused its registration" in run.details.errors["scrambler-0-1"]
    assert "never registered" in run.details.errors["coordinator"]
    assert run.details.wire.data_frames == 0


def test_the_coordinator_counts_a_source_its_scrambler_refused(monkeypatch):
    honest_run = deploy.run_in_memory
    outcomes = []

    def kept(configs):
        outcomes.append(honest_run(configs))
        return outcomes[-1]

    monkeypatch.setattr(deploy, "run_in_memory", kept)
    faults = deploy.Faults(late_sources=(7,))
    engine = NetworkEngine(transport="memory", timeout=60, idle_seconds=1, faults=faults)
    run = engine.execute(_program(), SCRAMBLERS, delta=1e-4, seed=3)
    assert _counted(run) == ROWS - 1
    [outcome] = outcomes
    # Its scrambler committed without it: the COMMIT's members say so, the summary counts it.
    assert outcome.coordinator.summary.left_out == {"(g1)": 1}
    assert outcome.result.summary == outcome.coordinator.summary
    assert any("1 of 40 sources left out" in why for why in outcome.result.failures)
