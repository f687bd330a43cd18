"""Immutable descriptions of the mechanisms of the paper, validated on construction.

Conventions (paper, Sections 3 and 4):

* ``sampling_rate`` is σ of R_σ: with probability σ the true target is replaced by one drawn
  uniformly from *all* T targets, so the true target keeps probability 1 − σ + σ/T and every
  other target gets σ/T.
* The capped theorem (Theorem "theorem-exact") is written with a lie going to one of the T − 1
  other targets with probability σ'/(T − 1); the two are related by σ' = σ (T − 1) / T.
  `LocalRandomizer.lie_rate` gives σ' so that the conversion is written once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_int, check_probability

FloatArray = npt.NDArray[np.float64]

#: Largest number of targets T accepted: beyond it σ/T and 2/T lose their meaning in floating
#: point (and no cluster has a billion compute nodes).
MAX_TARGETS = 1_000_000_000


def _check_targets_and_sampling(mechanism: LocalRandomizer | ScramblerMechanism) -> None:
    """Check (and normalize) T and σ of a mechanism being built (its ``__post_init__``)."""
    targets = check_int("num_targets", mechanism.num_targets, minimum=2, maximum=MAX_TARGETS)
    object.__setattr__(mechanism, "num_targets", targets)
    sigma = check_probability("sampling_rate", mechanism.sampling_rate)
    object.__setattr__(mechanism, "sampling_rate", sigma)


@dataclass(frozen=True, kw_only=True)
class LocalRandomizer:
    """The local randomizer R_σ^d of Section 3 (sampling σ, flooding d, T targets).

    Attributes:
        num_targets: T, the number of potential targets (>= 2).
        sampling_rate: σ in [0, 1].
        num_dummies: d, the number of flooding dummies sent to distinct other targets,
            in [0, T − 1]; d = T − 1 is a broadcast.

    Examples:
        >>> from dpcomm import LocalRandomizer, account
        >>> report = account(LocalRandomizer(num_targets=20, sampling_rate=0.5, num_dummies=5),
        ...                  delta=1e-4)
        >>> round(report.guarantee.epsilon, 3), report.guarantee.method
        (1.466, 'exact')
    """

    num_targets: int
    sampling_rate: float
    num_dummies: int = 0

    def __post_init__(self) -> None:
        _check_targets_and_sampling(self)
        object.__setattr__(
            self,
            "num_dummies",
            check_int("num_dummies", self.num_dummies, minimum=0, maximum=self.num_targets - 1),
        )

    @property
    def distinguishing_masses(self) -> tuple[float, float, float]:
        """(s, m_t, m_o): the share of outputs that tell t from t', and their masses (App. B).

        The outputs that hold t but not t' number C(T−2, d) out of C(T−1, d) per first-message
        target (s = (T − 1 − d)/(T − 1)); under input t each group has probability
        m_t = 1 − σ + (d+1)σ/T, under t' m_o = (d+1)σ/T. All other outputs are equally likely
        under t and t'.
        """
        targets, sigma, dummies = self.num_targets, self.sampling_rate, self.num_dummies
        share = (targets - 1 - dummies) / (targets - 1)
        mass_true = 1.0 - sigma + (dummies + 1) * sigma / targets
        mass_other = (dummies + 1) * sigma / targets
        return share, mass_true, mass_other

    @property
    def truth_probability(self) -> float:
        """Probability 1 − σ + σ/T that the first message goes to the true target."""
        return 1.0 - self.sampling_rate + self.sampling_rate / self.num_targets

    @property
    def other_probability(self) -> float:
        """Probability σ/T that the first message goes to one given other target."""
        return self.sampling_rate / self.num_targets

    @property
    def lie_rate(self) -> float:
        """σ' = σ (T − 1)/T: probability of going to *another* target (capped theorem's σ)."""
        return self.sampling_rate * (self.num_targets - 1) / self.num_targets

    def transition_matrix(self) -> FloatArray:
        """T x T matrix of R_σ (first message only): row = true target, column = sent target."""
        size = self.num_targets
        matrix = np.full((size, size), self.other_probability)
        np.fill_diagonal(matrix, self.truth_probability)
        return matrix


@dataclass(frozen=True, kw_only=True)
class ScramblerMechanism:
    """The partition-level scrambler algorithm A_σ^{n,d} of Section 4 (Eq. 1).

    ``batch_size`` sources apply R_σ (no flooding); the scrambler adds ``num_dummies`` dummies
    drawn uniformly with replacement (S_d) or, when ``capped``, uniformly among targets that hold
    fewer than n messages (S̄_d), then shuffles.

    Attributes:
        num_targets: T (>= 2).
        sampling_rate: σ in [0, 1].
        batch_size: n, the number of sources per scrambler (>= 1).
        num_dummies: d (>= 0); when capped, at most (T − 1) n so that the cap can be met.
        capped: True for S̄_d.

    Examples:
        >>> from dpcomm import ScramblerMechanism, account
        >>> mechanism = ScramblerMechanism(num_targets=20, sampling_rate=0.2, batch_size=100,
        ...                                num_dummies=50)
        >>> round(account(mechanism, epsilon=2.0).guarantee.delta, 6)
        0.001144
    """

    num_targets: int
    sampling_rate: float
    batch_size: int
    num_dummies: int
    capped: bool = False

    def __post_init__(self) -> None:
        _check_targets_and_sampling(self)
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        if not isinstance(self.capped, bool):
            raise InvalidParameterError("capped", "True or False", self.capped)
        maximum = (self.num_targets - 1) * self.batch_size if self.capped else None
        object.__setattr__(
            self,
            "num_dummies",
            check_int("num_dummies", self.num_dummies, minimum=0, maximum=maximum),
        )

    @property
    def local_randomizer(self) -> LocalRandomizer:
        """R_σ applied by each source before the scrambler (no source-side flooding)."""
        return LocalRandomizer(num_targets=self.num_targets, sampling_rate=self.sampling_rate)


@dataclass(frozen=True)
class GenericLocalRandomizer:
    """A local randomizer given by its T x T probability matrix (Remark "Generality", App. E).

    Row x is the output distribution μ_x over targets of input target x.
    """

    probabilities: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        try:
            matrix = np.asarray(self.probabilities, dtype=float)
        except (TypeError, ValueError) as error:
            raise InvalidParameterError(
                "probabilities", "a square matrix of probabilities", self.probabilities
            ) from error
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
            raise InvalidParameterError(
                "probabilities", "a square T x T matrix with T >= 2", f"shape {matrix.shape}"
            )
        if not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
            raise InvalidParameterError(
                "probabilities", "finite non-negative entries", "a negative or non-finite entry"
            )
        row_sums = matrix.sum(axis=1)
        if not np.allclose(row_sums, 1.0, atol=1e-9):
            raise InvalidParameterError(
                "probabilities", "rows summing to 1", f"row sums {row_sums.tolist()}"
            )
        normalized = matrix / row_sums[:, None]
        object.__setattr__(self, "probabilities", tuple(tuple(map(float, r)) for r in normalized))

    @classmethod
    def from_matrix(cls, matrix: npt.ArrayLike) -> GenericLocalRandomizer:
        """Build from any array-like T x T matrix."""
        array = np.asarray(matrix, dtype=float)
        return cls(tuple(tuple(map(float, row)) for row in np.atleast_2d(array)))

    @cached_property
    def matrix(self) -> FloatArray:
        """The probabilities as a read-only numpy array."""
        array = np.array(self.probabilities, dtype=float)
        array.setflags(write=False)
        return array

    @property
    def num_targets(self) -> int:
        """T."""
        return len(self.probabilities)

    @cached_property
    def total_variation_similarity(self) -> float:
        """γ = Σ_y min_x μ_x(y): the largest mass shared by all inputs (App. E, Key concepts)."""
        return float(self.matrix.min(axis=0).sum())

    @cached_property
    def blanket(self) -> FloatArray:
        """ω(y) = min_x μ_x(y) / γ, the blanket distribution; uniform if γ = 0 (never drawn)."""
        floor = self.matrix.min(axis=0)
        gamma = floor.sum()
        if gamma <= 0.0:
            return np.full(self.num_targets, 1.0 / self.num_targets)
        result: FloatArray = floor / gamma
        return result

    @cached_property
    def epsilon0(self) -> float:
        """ε0 = max_{x, x', y} ln(μ_x(y) / μ_x'(y)) (infinite if some ratio is unbounded)."""
        matrix = self.matrix
        worst = 0.0
        for column in matrix.T:
            high, low = float(column.max()), float(column.min())
            if high == 0.0:
                continue
            if low == 0.0:
                return math.inf
            worst = max(worst, math.log(high / low))
        return worst


@dataclass(frozen=True, kw_only=True)
class GenericScrambler:
    """A scrambler over a generic local randomizer: dummies drawn from its blanket ω (App. E).

    Attributes:
        randomizer: the sources' local randomizer.
        batch_size: n (>= 1).
        num_dummies: d (>= 0).
    """

    randomizer: GenericLocalRandomizer
    batch_size: int
    num_dummies: int

    def __post_init__(self) -> None:
        if not isinstance(self.randomizer, GenericLocalRandomizer):
            raise InvalidParameterError(
                "randomizer", "a GenericLocalRandomizer", type(self.randomizer).__name__
            )
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        object.__setattr__(
            self, "num_dummies", check_int("num_dummies", self.num_dummies, minimum=0)
        )

    @property
    def num_targets(self) -> int:
        """T."""
        return self.randomizer.num_targets


Mechanism = LocalRandomizer | ScramblerMechanism | GenericLocalRandomizer | GenericScrambler
