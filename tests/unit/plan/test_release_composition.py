"""Traffic and release composed: only traffic bounds that hold for the joint theorem's view."""

from __future__ import annotations

import numpy as np

import dpcomm
from dpcomm.accounting import ScramblerMechanism, account
from dpcomm.data import table_from_arrays
from dpcomm.plan.privacy import account_plan
from dpcomm.release.compose import compose_release
from dpcomm.release.noise import noisy_program

TABLE = table_from_arrays("t", {"k": np.array(["a", "b", "a"], dtype=object)})


def test_an_enumerated_capped_scrambler_is_composed_through_its_sources_r_sigma():
    # Three sources, one capped scrambler (n = 3, d = 1, T = 2): the accountant's exact
    # enumeration bounds the scrambler's output alone (ε ≈ 1.39); the joint theorem needs a
    # bound for every source's R_σ output told (the post-processing method, ε0 ≈ 1.73 at
    # this δ), which the sum of the composition must use.
    capped = dpcomm.Scramblers(sampling_rate=0.3, batch_size=3, num_dummies=1, capped=True)
    program = noisy_program(
        "SELECT k, COUNT(*) AS c FROM t GROUP BY k", TABLE, num_targets=2,
        release=dpcomm.Laplace(1.0), keys={"k": ["a", "b"]}, countermeasure=capped,
    )  # fmt: skip
    privacy = account_plan(program.plan, capped, delta=1e-4)
    assert privacy.guarantee.method == "enumeration" or "enumeration" in privacy.guarantee.method
    mechanism = ScramblerMechanism(
        num_targets=2, sampling_rate=0.3, batch_size=3, num_dummies=1, capped=True
    )
    through_r_sigma = account(mechanism.local_randomizer, delta=1e-4).guarantee.epsilon
    assert privacy.guarantee.epsilon < through_r_sigma - 0.1
    assert program.release is not None
    both = compose_release(privacy, program.release.noises)
    assert both.summed_epsilon >= through_r_sigma + 1.0 - 1e-6
    assert both.epsilon >= through_r_sigma - 1e-6  # never the enumerated ε, whichever route
