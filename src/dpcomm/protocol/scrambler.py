"""The array function of the scrambler step: Algorithm 1 of Section 4.1 (S_d, S̄_d when capped).

`dpcomm.protocol.roles.scrambler_dummies` is built on it. Each scrambler collects the R_σ
outputs of its n sources (a batch of consecutive sources the coordinator assigned independently
of the data), adds d dummies and shuffles. Dummies are uniform over the T targets with
replacement (S_d), or, when capped (S̄_d, Algorithm 1 with B = True), drawn one at a time
uniformly among the targets that currently hold fewer than n messages
(`scrambler_dummy_counts`, from uniforms the caller draws). The conventions are those of
`dpcomm.accounting.mechanisms.ScramblerMechanism`.

Everything is vectorized across scramblers; only the d dummy steps of S̄_d are a loop.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol._arrays import IntArray
from dpcomm.protocol.randomness import uniform_integers


def scrambler_dummy_counts(
    received: npt.ArrayLike,
    batch_sizes: npt.ArrayLike,
    *,
    num_dummies: int,
    capped: bool,
    uniforms: npt.ArrayLike,
) -> IntArray:
    """The dummies each scrambler adds to each target (Algorithm 1), from uniforms.

    Args:
        received: (K, T) messages each scrambler received for each target.
        batch_sizes: (K,) the batch size n_k of each scrambler (the cap of S̄_d).
        num_dummies: d.
        capped: S̄_d (True) or S_d (False).
        uniforms: (K, d) uniforms; dummy j of scrambler k is drawn from ``uniforms[k, j]``.

    Returns:
        int64 (K, T) dummy counts.
    """
    current = np.asarray(received, dtype=np.int64)
    scramblers, size = current.shape
    draws = np.asarray(uniforms, dtype=np.float64)
    if draws.shape != (scramblers, num_dummies):
        raise InvalidParameterError(
            "uniforms", f"an array of shape ({scramblers}, {num_dummies})", draws.shape
        )
    dummy_counts = np.zeros((scramblers, size), dtype=np.int64)
    if num_dummies == 0 or scramblers == 0:
        return dummy_counts
    if capped:
        caps = np.asarray(batch_sizes, dtype=np.int64).reshape(-1)
        if caps.shape[0] != scramblers:
            raise InvalidParameterError("batch_sizes", f"{scramblers} batch sizes", caps.shape)
        limit = (size - 1) * int(caps.min())
        if num_dummies > limit:
            raise InvalidParameterError(
                "num_dummies",
                f"an integer in [0, {limit}] ((T − 1)·n with n = {int(caps.min())}, the "
                "smallest scrambler) for the capped scrambler",
                num_dummies,
            )
        return _capped_dummies(current, caps, num_dummies, draws)
    rows = np.repeat(np.arange(scramblers, dtype=np.int64), num_dummies)
    targets = uniform_integers(draws.reshape(-1), size)
    dummy_counts += np.bincount(rows * size + targets, minlength=scramblers * size).reshape(
        scramblers, size
    )
    return dummy_counts


def _capped_dummies(
    received: IntArray,
    batch_sizes: IntArray,
    num_dummies: int,
    uniforms: npt.NDArray[np.float64],
) -> IntArray:
    """The dummies of S̄_d: one step at a time, each uniform among targets below the cap n."""
    scramblers, size = received.shape
    current = received.copy()
    dummy_counts = np.zeros((scramblers, size), dtype=np.int64)
    caps = batch_sizes[:, None]
    rows = np.arange(scramblers)
    for step in range(num_dummies):
        open_targets = current < caps
        ranks = np.cumsum(open_targets, axis=1)
        # A uniform rank among the open targets; the open target holding that rank is drawn.
        draw = uniform_integers(uniforms[:, step], ranks[:, -1])
        chosen = np.argmax(ranks > draw[:, None], axis=1)
        current[rows, chosen] += 1
        dummy_counts[rows, chosen] += 1
    return dummy_counts
