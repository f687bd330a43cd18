"""Layer 4: what each node does, as vectorized functions over arrays (Sections 2 to 5).

Every engine (the in-memory simulator, the Dask engine, the networked runtime) runs the role
steps of [`roles`][], with the draws of [`Randomness`][] (one AES-CTR stream per seed,
round, role, flow and purpose, read at the node's index), so the accountant's numbers apply to
whatever an engine runs, and the same seed gives the same run in every engine. The statistical
audit and the figures run the same steps.

* the coordinator assigns sources to scramblers independently of the data (the plan's
  consecutive batches: `dpcomm.plan.routes.Routes.batches`);
* a source applies no countermeasure, R_σ or R_σ^d ([`source_messages`][], giving
  [`SourceMessages`][]) and sends its messages in a random order ([`source_send_order`][]);
* a scrambler adds d dummies, capped or not ([`scrambler_dummies`][]), and forwards its batch
  in a random order ([`scrambler_shuffle`][]);
* a target counts a tuple iff its message is real and its batch committed ([`delivered`][]);
* a query program supplies what the roles do not know ([`ProgramHooks`][]).

[`source_first_sent`][] and [`scrambler_first_forwarded`][] give the first message of the
orders of many nodes at once. The roles are built on array functions that take their uniforms
as arguments (`source`: ``sample_targets``, ``flood_in_chunks``; `scrambler`:
``scrambler_dummy_counts``; [`randomness`][]: ``uniform_integers``, ``permutation_from``).
Names are imported on first use.
"""

from typing import TYPE_CHECKING

from dpcomm._lazy import attach

if TYPE_CHECKING:
    from dpcomm.protocol.randomness import Randomness as Randomness, Stream as Stream
    from dpcomm.protocol.roles import (
        ProgramHooks as ProgramHooks,
        SourceMessages as SourceMessages,
        delivered as delivered,
        scrambler_dummies as scrambler_dummies,
        scrambler_first_forwarded as scrambler_first_forwarded,
        scrambler_shuffle as scrambler_shuffle,
        source_first_sent as source_first_sent,
        source_messages as source_messages,
        source_send_order as source_send_order,
    )

__getattr__, __dir__ = attach(__name__, __file__)
