"""The array functions of the source step: the local randomizer R_σ^d of Section 3.

`dpcomm.protocol.roles.source_messages` is built on them: each works on all sources at
once (one entry per source), from uniforms the caller draws (the sources' streams of
`dpcomm.protocol.randomness.Randomness`), and never loops per source. The conventions
are those of `dpcomm.accounting.mechanisms`, whose privacy numbers are only valid for
exactly this mechanism:

* sampling (R_σ): with probability σ the source redraws its target uniformly from *all* T
  targets, so the true target keeps probability 1 − σ + σ/T. The message is real iff the
  drawn target equals the true one (paper, footnote of Section 3.1: "if t' = t, we send the
  true message"), otherwise it is a dummy;
* flooding (R_σ^d): d further dummies go to d distinct targets drawn uniformly without
  replacement among the T − 1 targets other than the first message's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.protocol._arrays import BoolArray, IntArray, as_index_array, read_only
from dpcomm.protocol.randomness import uniform_integers
from dpcomm.validation import check_int, check_probability

#: Number of uniforms used at once by `flood_in_chunks` (8 bytes each, so about 8 MB
#: of keys plus a few such temporaries): memory stays O(chunk + S·d), not O(S·T).
FLOOD_CHUNK_ELEMENTS = 1 << 20


@dataclass(frozen=True, eq=False)
class RandomizedTargets:
    """The first message of each source after R_σ (Section 3.1).

    Attributes:
        sent: int64 target t' each source sends its first message to.
        is_real: True where the message carries the real tuple (t' = t), False for a dummy.
    """

    sent: IntArray
    is_real: BoolArray


def sample_targets(
    true_targets: npt.ArrayLike,
    *,
    num_targets: int,
    sampling_rate: float,
    uniforms: npt.ArrayLike,
) -> RandomizedTargets:
    """The sampling step R_σ of Section 3.1 for every source at once, from given uniforms.

    Source i redraws its target iff ``uniforms[i, 0] < σ``, and then takes target
    ⌊uniforms[i, 1] · T⌋: with probability σ the target is uniform over all T targets.

    Args:
        true_targets: the true target t in [0, T) of each source (1-D integers).
        num_targets: T (>= 1; with T = 1 every message goes to target 0 and is real).
        sampling_rate: σ in [0, 1].
        uniforms: (S, 2) independent uniforms in [0, 1), one row per source.

    Returns:
        The sent targets and which of them carry the real tuple.
    """
    size = check_int("num_targets", num_targets, minimum=1)
    sigma = check_probability("sampling_rate", sampling_rate)
    truth = as_index_array("true_targets", true_targets, upper=size)
    draws = np.asarray(uniforms, dtype=np.float64)
    if draws.shape != (truth.shape[0], 2):
        raise InvalidParameterError(
            "uniforms", f"an array of shape ({truth.shape[0]}, 2)", draws.shape
        )
    redraw = draws[:, 0] < sigma
    drawn = uniform_integers(draws[:, 1], size)
    sent = np.where(redraw, drawn, truth).astype(np.int64, copy=False)
    is_real = sent == truth
    read_only(sent)
    read_only(is_real)
    return RandomizedTargets(sent=sent, is_real=is_real)


def flood_from_uniforms(
    first_targets: npt.ArrayLike,
    *,
    num_targets: int,
    num_dummies: int,
    uniforms: npt.ArrayLike,
) -> IntArray:
    """Targets of the d flooding dummies of R_σ^d (Section 3.1), from given uniforms.

    Each source ranks the T − 1 targets other than its first message's by the T − 1 uniforms of
    its row: the d smallest keys give d distinct targets drawn uniformly without replacement,
    in uniformly random order (the order of their keys).

    Args:
        first_targets: target t' of each source's first message (1-D integers in [0, T)).
        num_targets: T (>= 1).
        num_dummies: d in [0, T − 1]; d = T − 1 floods every other target (a broadcast).
        uniforms: (S, T − 1) independent uniforms in [0, 1).

    Returns:
        An int64 array of shape (S, d).
    """
    size = check_int("num_targets", num_targets, minimum=1)
    dummies = check_int("num_dummies", num_dummies, minimum=0, maximum=size - 1)
    first = as_index_array("first_targets", first_targets, upper=size)
    count = first.shape[0]
    others = size - 1
    keys = np.asarray(uniforms, dtype=np.float64)
    if keys.shape != (count, others):
        raise InvalidParameterError(
            "uniforms", f"an array of shape ({count}, {others})", keys.shape
        )
    if dummies == 0 or count == 0:
        return np.empty((count, dummies), dtype=np.int64)
    if dummies < others:
        # The d smallest of T − 1 i.i.d. keys index a uniform d-subset of the others.
        chosen = np.argpartition(keys, dummies - 1, axis=1)[:, :dummies]
    else:
        chosen = np.broadcast_to(np.arange(others), keys.shape)
    # Sorting the chosen keys makes the order of the d dummies uniformly random too.
    order = np.argsort(np.take_along_axis(keys, chosen, axis=1), axis=1, kind="stable")
    positions = np.take_along_axis(chosen, order, axis=1)
    # Position p in [0, T − 2] among the others is target p, shifted past the first target.
    result: IntArray = (positions + (positions >= first[:, None])).astype(np.int64)
    return result


def flood_in_chunks(
    first_targets: IntArray,
    out: IntArray,
    *,
    num_targets: int,
    uniforms: Callable[[int, int], npt.NDArray[np.float64]],
) -> None:
    """Fill ``out`` (S, d) with `flood_from_uniforms` over chunks of sources.

    ``uniforms(start, stop)`` gives the (stop − start, T − 1) uniforms of sources start..stop;
    chunks of `FLOOD_CHUNK_ELEMENTS` uniforms keep memory at O(chunk + S·d).
    """
    count, dummies = out.shape
    if dummies == 0:
        return
    chunk = max(1, FLOOD_CHUNK_ELEMENTS // max(1, num_targets - 1))
    for start in range(0, count, chunk):
        stop = min(count, start + chunk)
        out[start:stop] = flood_from_uniforms(
            first_targets[start:stop],
            num_targets=num_targets,
            num_dummies=dummies,
            uniforms=uniforms(start, stop),
        )
