"""Countermeasures that can be attached to a cluster (Sections 3 and 4).

* `NoCountermeasure`: messages go straight to their data-chosen target.
* `LocalFlooding`: each source applies R_σ^d (sampling σ, d flooding dummies), Section 3.
* `Scramblers`: each source applies R_σ, then scramblers of n sources add d dummies and
  shuffle (A_σ^{n,d}, capped S̄_d or not S_d), Section 4.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from dpcomm.errors import InvalidParameterError
from dpcomm.validation import check_int, check_probability

#: The names of the countermeasures (their ``name``; the CLI's ``--mechanism``).
CountermeasureName = Literal["none", "local", "scrambler"]


@dataclass(frozen=True, kw_only=True)
class NoCountermeasure:
    """Messages are sent to their true target; the cluster's pattern reveals the data.

    Examples:
        >>> from dpcomm import NoCountermeasure
        >>> NoCountermeasure().describe()
        'none'
    """

    name: CountermeasureName = field(default="none", init=False)

    @property
    def sampling_rate(self) -> float:
        """σ = 0: no sampling."""
        return 0.0

    def describe(self) -> str:
        """One line for reports."""
        return "none"


@dataclass(frozen=True, kw_only=True)
class LocalFlooding:
    """R_σ^d at every source (Section 3).

    Attributes:
        sampling_rate: σ in [0, 1]; with probability σ the target is redrawn uniformly from all T.
        num_dummies: d, flooding dummies per source to d distinct other targets (<= T − 1,
            checked against the cluster's T when the plan is accounted).

    Examples:
        >>> from dpcomm import LocalFlooding
        >>> LocalFlooding(sampling_rate=0.5, num_dummies=5).describe()
        'local sampling σ=0.5, flooding d=5'
    """

    sampling_rate: float
    num_dummies: int = 0
    name: CountermeasureName = field(default="local", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate)
        )
        object.__setattr__(
            self, "num_dummies", check_int("num_dummies", self.num_dummies, minimum=0)
        )

    def describe(self) -> str:
        """One line for reports."""
        return f"local sampling σ={self.sampling_rate:g}, flooding d={self.num_dummies}"


@dataclass(frozen=True, kw_only=True)
class Scramblers:
    """R_σ at every source, then scramblers of n sources adding d dummies (Section 4).

    Attributes:
        sampling_rate: σ in [0, 1].
        batch_size: n, most sources per scrambler (>= 1). S sources go to ⌈S/n⌉ scramblers
            in balanced batches whose sizes differ by at most one (none is short;
            `dpcomm.plan.balanced_batch_sizes`); each is accounted at its own size.
        num_dummies: d, dummies added by each scrambler (>= 0).
        capped: True for S̄_d (no target receives more than n messages from one scrambler).

    Examples:
        >>> from dpcomm import Scramblers
        >>> Scramblers(sampling_rate=0.2, batch_size=100, num_dummies=50).describe()
        'scramblers n=100, d=50 dummies each, sampling σ=0.2'
    """

    sampling_rate: float
    batch_size: int
    num_dummies: int = 0
    capped: bool = False
    name: CountermeasureName = field(default="scrambler", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate)
        )
        object.__setattr__(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        object.__setattr__(
            self, "num_dummies", check_int("num_dummies", self.num_dummies, minimum=0)
        )
        if not isinstance(self.capped, bool):
            raise InvalidParameterError("capped", "True or False", self.capped)

    def describe(self) -> str:
        """One line for reports."""
        kind = "capped scramblers" if self.capped else "scramblers"
        return (
            f"{kind} n={self.batch_size}, d={self.num_dummies} dummies each, "
            f"sampling σ={self.sampling_rate:g}"
        )


Countermeasure = NoCountermeasure | LocalFlooding | Scramblers
#: One countermeasure for every data-dependent cluster, or one per cluster (or flow) name.
Countermeasures = Countermeasure | Mapping[str, Countermeasure]


def shares_blanket(countermeasures: Countermeasures) -> bool:
    """Whether some cluster's sources share R_σ's uniform draws behind a shuffle.

    True for uncapped scramblers with σ > 0: there, what the observer sees of one source's
    message also tells which *other* sources' tuples arrived, and a release over the
    delivered tuples must cover one other source's tuple (`dpcomm.release.mechanisms`,
    ``JointView`` ``one-other``). Every other countermeasure delivers each source's tuple
    independently of the others given the traffic (capped scramblers are composed with a
    release through their sources' R_σ).
    """
    items = countermeasures.values() if isinstance(countermeasures, Mapping) else [countermeasures]
    return any(isinstance(c, Scramblers) and not c.capped and c.sampling_rate > 0.0 for c in items)


def make_countermeasure(
    mechanism: str,
    *,
    sampling_rate: float = 0.0,
    batch_size: int | None = None,
    num_dummies: int = 0,
    capped: bool = False,
) -> Countermeasure:
    """A countermeasure from the CLI's names: ``none``, ``local`` or ``scrambler``."""
    if mechanism == "none":
        if sampling_rate != 0.0 or num_dummies != 0 or batch_size is not None or capped:
            raise InvalidParameterError(
                "mechanism",
                "'local' or 'scrambler' when sampling, dummies, batch or capped are set",
                mechanism,
            )
        return NoCountermeasure()
    if mechanism == "local":
        if batch_size is not None or capped:
            raise InvalidParameterError(
                "batch", "unset for the local mechanism (no scramblers)", batch_size
            )
        return LocalFlooding(sampling_rate=sampling_rate, num_dummies=num_dummies)
    if mechanism == "scrambler":
        if batch_size is None:
            raise InvalidParameterError("batch", "a batch size n >= 1 for scramblers", None)
        return Scramblers(
            sampling_rate=sampling_rate,
            batch_size=batch_size,
            num_dummies=num_dummies,
            capped=capped,
        )
    raise InvalidParameterError("mechanism", "one of none, local, scrambler", mechanism)
