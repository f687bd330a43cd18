"""Under a noisy release a deployment's report keeps what the observer sees, not its timings."""

from __future__ import annotations

from dpcomm.engine.network.report import DeploymentDetails, wire_report


def test_released_details_drop_the_timings_only() -> None:
    merged = {
        "sent": {("source-0", "scrambler-0-0"): [3, 2, 300]},
        "received": {("source-0", "scrambler-0-0"): 3},
        "lengths": {100},
        "drops": {},
    }
    wire = wire_report(100, merged, {"wall_seconds": 1.25, "round_seconds": 0.5})
    details = DeploymentDetails(wire, (), {}, (), {}, ())
    released = details.released()
    assert released.wire.timings == {}
    assert released.to_dict()["wire"]["timings"] == {}
    document, kept = details.to_dict(), released.to_dict()
    document["wire"].pop("timings")
    kept["wire"].pop("timings")
    assert document == kept  # frames, bytes, links, channels: what the observer sees anyway
