"""Exact, mergeable sums of floating-point values, rounded once (vectorized with numpy).

A float sum computed by adding the values one after the other depends on their order, and the
sum of two partial sums is not the sum of the whole: a distributed engine reducing the partials
of its partitions would not get the bits of the in-memory engine. Here the sum of a group of
values is their **exact** sum rounded once to the nearest double (ties to even: what
`math.fsum` returns), and their mean is the exact sum divided by their count, rounded once.
Both depend only on the multiset of values: exact partial sums of disjoint parts add up exactly
(`merge_exact_sums`, associative and commutative), so any split of the values into parts,
reduced in any order, gives the same bits. They are also at least as accurate as any summation
order of floats.

Special values: a NaN, or both +inf and -inf, make the sum (and the mean) NaN; infinities of one
sign make it that infinity; a finite exact sum beyond the double range rounds to ±inf (its mean
is rounded from the exact sum, so it stays finite); values that are all -0.0 sum to -0.0 (IEEE
754's sum, and DuckDB's), any other exact zero is +0.0. (Python 3.11's `math.fsum` returns
+0.0 for ``[-0.0]``; it raises where this rounds to ±inf or returns NaN.)

How: every finite value x is m·2^k with an integer mantissa |m| < 2^53 and an exponent k (from
its bits); m is split into halves m = h·2^26 + l (|h| < 2^27, |l| < 2^26) so that int64 sums of
up to 2^36 values cannot overflow (2^27·2^36 = 2^63). The halves are summed per (group,
exponent), a *bin*, in numpy: with one ``bincount`` per half while those sums stay exact in
float64 (up to 2^26 values), else with a sort and ``np.add.reduceat`` on int64 (Python ints
beyond 2^36 values). Values with few significant bits over a narrow range of exponents (float32
data such as K-means' points, integers) skip the bins: their plain float64 sums are exact, in
any order, and become one bin per group. Only the rounding combines a group's few bins, as
Python integers (exact); Python's int → float conversion and int / int true division are
correctly rounded. Python loops run over bins and groups, never over values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpcomm.errors import InvalidParameterError

IntArray = npt.NDArray[np.int64]
FlagArray = npt.NDArray[np.uint8]

#: Flags of a group (OR over its values): a NaN, +inf, -inf, a finite value other than -0.0.
NAN, POSITIVE_INFINITY, NEGATIVE_INFINITY, NOT_NEGATIVE_ZERO = 1, 2, 4, 8
#: Bits of the low half of a mantissa.
_HALF_BITS = 26
_LOW_MASK = (1 << _HALF_BITS) - 1
#: Bits of a double's integer mantissa (with its hidden bit).
_MANTISSA_BITS = 53
#: Values whose halves (|h| < 2^27) an int64 sum holds without overflow: 2^27 · 2^36 = 2^63.
_INT64_VALUES = 1 << 36
#: Values whose halves a float64 sum holds exactly: 2^27 · 2^26 = 2^53.
_FLOAT_VALUES = 1 << 26
#: Largest dense (group, exponent) table a ``bincount`` fills (else: sort and reduceat).
_DENSE_BINS = 1 << 20
#: Values summed at once (bounded temporaries); longer inputs are summed in chunks.
_CHUNK_VALUES = 1 << 21
#: Values whose bits are scanned at once (to tell whether plain float64 sums are exact).
_SCAN_VALUES = 1 << 18
#: A double's fraction bits; a value's unit is 2^(max(E, 1) − 1075) for exponent field E.
_FRACTION_MASK = (1 << 52) - 1
_UNIT_OFFSET = 1075
#: Largest exponent field whose float64 bin sums of up to 2^26 values stay finite.
_FLOAT_LARGEST_BIASED = 2019


@dataclass(frozen=True, eq=False)
class ExactSums:
    """The exact sums of the float values of groups ``0..G-1``: a mergeable partial state.

    A group's exact sum is the sum over its bins of (high·2^26 + low)·2^exponent; the values
    that are NaN or infinite are in its flags only. Picklable (numpy arrays).

    Attributes:
        counts: int64 (G,) values of each group (finite or not).
        flags: uint8 (G,) OR over each group's values of `NAN`, `POSITIVE_INFINITY`,
            `NEGATIVE_INFINITY` and `NOT_NEGATIVE_ZERO`.
        bin_groups: int64 (B,) the group of each bin; bins are sorted by (group, exponent),
            one per (group, exponent), and none is zero.
        bin_exponents: int64 (B,) the exponent of each bin's unit.
        bin_high: (B,) int64 (or Python ints) sums of the high halves of the bin's mantissas.
        bin_low: (B,) int64 (or Python ints) sums of the low halves.
    """

    counts: IntArray
    flags: FlagArray
    bin_groups: IntArray
    bin_exponents: IntArray
    bin_high: npt.NDArray[Any]
    bin_low: npt.NDArray[Any]

    @property
    def num_groups(self) -> int:
        """G, the number of groups."""
        return len(self.counts)

    def take(self, groups: npt.ArrayLike) -> ExactSums:
        """The sums of ``groups`` (indices), which become groups ``0..len(groups)-1``.

        Costs O(len(groups)·log B) plus the bins taken, whatever G: splitting sums among many
        owners is linear overall.
        """
        indices = np.asarray(groups, dtype=np.int64).reshape(-1)
        left = np.searchsorted(self.bin_groups, indices, side="left")
        right = np.searchsorted(self.bin_groups, indices, side="right")
        lengths = (right - left).astype(np.int64)
        total = int(lengths.sum())
        firsts = np.cumsum(lengths) - lengths
        positions = np.repeat(left - firsts, lengths) + np.arange(total, dtype=np.int64)
        return ExactSums(
            self.counts[indices],
            self.flags[indices],
            np.repeat(np.arange(len(indices), dtype=np.int64), lengths),
            self.bin_exponents[positions],
            self.bin_high[positions],
            self.bin_low[positions],
        )

    def sums(self) -> list[float | None]:
        """Each group's exact sum rounded once to the nearest double; None for no value."""
        return self._rounded(divide=False)

    def means(self) -> list[float | None]:
        """Each group's exact sum divided by its count, rounded once; None for no value."""
        return self._rounded(divide=True)

    def centred_sums(self, centres: Sequence[float]) -> list[float]:
        """Each group's exact sum minus its count times ``centres[g]``, rounded once.

        The subtraction is exact (integers on a common power of two), the rounding to the
        nearest double comes last: rounding the sum first and subtracting after loses the
        centred sum to cancellation (a sum near 2^70 is a multiple of 2^18 as a double, while
        the centred sum a release's sensitivity bounds may be hundreds). A group without
        values gives 0.0. Raises `InvalidParameterError` for a group with a NaN or infinity.
        """
        if len(centres) != self.num_groups:
            raise InvalidParameterError("centres", f"{self.num_groups} centres", len(centres))
        special = self.flags & (NAN | POSITIVE_INFINITY | NEGATIVE_INFINITY)
        if special.any():
            raise InvalidParameterError("values", "finite values to centre", "NaN or infinity")
        totals = self._exact_totals()
        result: list[float] = []
        for group, (centre, count) in enumerate(zip(centres, self.counts.tolist(), strict=True)):
            numerator, exponent = totals.get(group, (0, 0))
            top, bottom = float(centre).as_integer_ratio()  # centre = top·2^-shift
            shift = bottom.bit_length() - 1
            base = min(exponent, -shift)
            total = (numerator << (exponent - base)) - ((int(count) * top) << (-shift - base))
            result.append(_round(total, base, 1) if total else 0.0)
        return result

    def _rounded(self, *, divide: bool) -> list[float | None]:
        """Each group's exact sum (or mean) rounded once; None for no value.

        Most groups are rounded at once by numpy (`_rounded_by_numpy`); the others (no value,
        NaN or infinities, several bins, a large total, a result beyond the normal range)
        one by one, from their exact totals as Python integers.
        """
        quick = self._rounded_by_numpy(divide=divide)
        result: list[float | None] = quick.tolist()
        slow = np.flatnonzero(np.isnan(quick)).tolist()
        if not slow:
            return result
        totals = self._exact_totals()
        counts, flags = self.counts.tolist(), self.flags.tolist()
        for group in slow:
            count, flag = counts[group], flags[group]
            if count == 0:
                result[group] = None
                continue
            special = _special(flag)
            if special is not None:
                result[group] = special
                continue
            exact = totals.get(group)
            if exact is None:
                result[group] = 0.0 if flag & NOT_NEGATIVE_ZERO else -0.0
                continue
            numerator, exponent = exact
            result[group] = _round(numerator, exponent, count if divide else 1)
        return result

    def _rounded_by_numpy(self, *, divide: bool) -> npt.NDArray[np.float64]:
        """The groups numpy rounds exactly as `_round` does; NaN for every other group.

        A group of finite values whose bins cancel to none is an exact zero (-0.0 only when
        every value was -0.0). A group of one bin whose total t = high·2^26 + low is at most
        2^53 in magnitude: t and the count are doubles exactly, so t / count is the quotient
        rounded once (IEEE 754 division), and scaling it by the bin's 2^exponent is exact
        while the result is a normal double (checked: else NaN, and `_round` computes it).
        """
        groups = self.num_groups
        result = np.full(groups, np.nan)
        finite = (self.counts > 0) & (
            (self.flags & (NAN | POSITIVE_INFINITY | NEGATIVE_INFINITY)) == 0
        )
        bins = np.bincount(self.bin_groups, minlength=groups)
        zero = finite & (bins == 0)
        result[zero] = np.where(self.flags[zero] & NOT_NEGATIVE_ZERO, 0.0, -0.0)
        if self.bin_high.dtype != np.int64 or self.bin_low.dtype != np.int64:
            return result  # Python-int bins: every total is summed in Python
        single = (finite & (bins == 1))[self.bin_groups]
        high, low = self.bin_high[single], self.bin_low[single]
        small = (np.abs(high) < 1 << 36) & (np.abs(low) < 1 << 62)  # no int64 overflow below
        total = (high[small] << _HALF_BITS) + low[small]
        exact = np.abs(total) <= 1 << _MANTISSA_BITS
        owners = self.bin_groups[single][small][exact]
        value = total[exact].astype(np.float64)
        if divide:
            value /= self.counts[owners].astype(np.float64)
        with np.errstate(over="ignore", under="ignore"):  # beyond the normal range: NaN
            scaled = np.ldexp(value, self.bin_exponents[single][small][exact])
        normal = np.isfinite(scaled) & (np.abs(scaled) >= np.finfo(np.float64).tiny)
        result[owners[normal]] = scaled[normal]
        return result

    def _exact_totals(self) -> dict[int, tuple[int, int]]:
        """(t, k) with exact sum t·2^k of each group whose exact finite sum is not zero."""
        totals: dict[int, tuple[int, int]] = {}
        current, total, base = -1, 0, 0
        for group, exponent, high, low in zip(
            self.bin_groups.tolist(),
            self.bin_exponents.tolist(),
            self.bin_high.tolist(),
            self.bin_low.tolist(),
            strict=True,
        ):
            value = (int(high) << _HALF_BITS) + int(low)
            if group != current:
                if current >= 0 and total:
                    totals[current] = (total, base)
                current, total, base = group, value, exponent
            else:
                # Exponents increase within a group: shift onto the group's smallest unit.
                total += value << (exponent - base)
        if current >= 0 and total:
            totals[current] = (total, base)
        return totals


def _special(flag: int) -> float | None:
    """The sum of a group with NaN or infinite values, None for a group of finite values."""
    if flag & NAN or (flag & POSITIVE_INFINITY and flag & NEGATIVE_INFINITY):
        return math.nan
    if flag & POSITIVE_INFINITY:
        return math.inf
    if flag & NEGATIVE_INFINITY:
        return -math.inf
    return None


def _round(numerator: int, exponent: int, divisor: int) -> float:
    """numerator·2^exponent / divisor rounded once to the nearest double; overflow: ±inf."""
    try:
        if exponent >= 0:
            return (numerator << exponent) / divisor
        return numerator / (divisor << -exponent)
    except OverflowError:
        return math.inf if numerator > 0 else -math.inf


def exact_sums(values: npt.ArrayLike, groups: npt.ArrayLike, num_groups: int) -> ExactSums:
    """The exact sums of ``values`` (floats) by group (``groups[i]`` in ``0..num_groups-1``)."""
    data = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    owners = np.ascontiguousarray(groups, dtype=np.int64).reshape(-1)
    if owners.shape != data.shape:
        raise InvalidParameterError("groups", f"one group per value ({len(data)})", len(owners))
    if len(owners) and not 0 <= int(owners.min()) <= int(owners.max()) < num_groups:
        raise InvalidParameterError("groups", f"groups in 0..{num_groups - 1}", owners)
    if len(data) > _CHUNK_VALUES:
        # Bounded temporaries: the sums of consecutive chunks, merged (exactly).
        chunks = [
            exact_sums(
                data[start : start + _CHUNK_VALUES],
                owners[start : start + _CHUNK_VALUES],
                num_groups,
            )
            for start in range(0, len(data), _CHUNK_VALUES)
        ]
        identity = np.arange(num_groups, dtype=np.int64)
        return merge_exact_sums(chunks, [identity] * len(chunks), num_groups)
    counts = np.bincount(owners, minlength=num_groups).astype(np.int64)
    flags = np.zeros(num_groups, dtype=np.uint8)
    finite = np.isfinite(data)
    if not finite.all():
        for flag, mask in (
            (NAN, np.isnan(data)),
            (POSITIVE_INFINITY, data == math.inf),
            (NEGATIVE_INFINITY, data == -math.inf),
        ):
            flags[np.bincount(owners[mask], minlength=num_groups) > 0] |= flag
        data, owners = data[finite], owners[finite]
    zero = data == 0
    plain = counts
    if zero.any():
        negative = zero & np.signbit(data)
        if negative.any():
            plain = np.bincount(owners[~negative], minlength=num_groups)
        nonzero = ~zero
        data, owners = data[nonzero], owners[nonzero]
    flags[plain > 0] |= NOT_NEGATIVE_ZERO
    if len(data) == 0:
        return ExactSums(counts, flags, *_no_bins())
    if _plain_sums_are_exact(data, int(counts.max())):
        # Few significant bits (integers, float32 values, ...): float64 sums are exact.
        totals = np.bincount(owners, weights=data, minlength=len(counts)).astype(np.float64)
        return _from_exact_floats(counts, flags, totals)
    bits = data.view(np.int64)
    # The biased exponent field E: a value is ±(E ? 1.f : 0.f)·2^(max(E, 1) − 1023), i.e. an
    # integer mantissa of 53 bits times the unit 2^(max(E, 1) − 1075).
    biased = bits >> 52
    biased &= 0x7FF
    smallest, largest = int(biased.min()), int(biased.max())
    span = largest - smallest + 1
    if (
        len(data) <= _FLOAT_VALUES
        and largest <= _FLOAT_LARGEST_BIASED
        and num_groups * span <= max(_DENSE_BINS, 2 * len(data))
    ):
        return _float_bins(counts, flags, data, bits, owners, biased, smallest, span)
    mantissas = bits & _FRACTION_MASK
    mantissas[biased != 0] |= 1 << 52
    np.negative(mantissas, out=mantissas, where=bits < 0)
    return _reduce_bins(
        counts,
        flags,
        owners,
        np.maximum(biased, 1) - _UNIT_OFFSET,
        mantissas >> _HALF_BITS,
        mantissas & _LOW_MASK,
        values_bound=len(data),
    )


def _float_bins(
    counts: IntArray,
    flags: FlagArray,
    data: npt.NDArray[np.float64],
    bits: IntArray,
    owners: IntArray,
    biased: IntArray,
    smallest: int,
    span: int,
) -> ExactSums:
    """The bins of nonzero finite values summed in float64 (exactly), for up to 2^26 values.

    A value with exponent field E splits into its top 27 bits h (low 26 bits of the mantissa
    cleared: a multiple of 2^(E−1049) below 2^(E−1022)) and the rest l = x − h (a multiple of
    2^(E−1075) below 2^(E−1049)); up to 2^26 of either sum to a 53-bit multiple of its unit,
    exact in float64 (and finite while E <= 2019).
    """
    high = (bits & ~np.int64(_LOW_MASK)).view(np.float64)
    low = data - high
    codes = owners * span
    codes += biased
    codes -= smallest
    size = len(counts) * span
    highs = np.bincount(codes, weights=high, minlength=size)
    lows = np.bincount(codes, weights=low, minlength=size)
    kept = np.flatnonzero((highs != 0) | (lows != 0))
    fields = np.maximum(kept % span + smallest, 1)
    groups = kept // span
    exponents = fields - _UNIT_OFFSET
    high_sums = np.ldexp(highs[kept], (_UNIT_OFFSET - _HALF_BITS) - fields).astype(np.int64)
    low_sums = np.ldexp(lows[kept], _UNIT_OFFSET - fields).astype(np.int64)
    if smallest == 0:
        # Subnormals (field 0) share the unit of field 1: one bin per (group, exponent).
        return _reduce_bins(
            counts, flags, groups, exponents, high_sums, low_sums, values_bound=len(data)
        )
    return ExactSums(counts, flags, groups, exponents, high_sums, low_sums)


def exact_row_sums(matrix: npt.ArrayLike, row_groups: npt.ArrayLike, num_groups: int) -> ExactSums:
    """The exact per-column sums of the rows of each group of a (rows × D) float matrix.

    The result has ``num_groups · D`` groups: group ``g·D + d`` is column d of the rows with
    ``row_groups`` = g (its count is their number). Equal to `exact_sums` of the matrix's
    values so labelled; when float64 sums of the values are exact (float32 data of a narrow
    range, such as K-means' points) it adds the rows of each group in float64, else it sums the
    values in chunks of rows.
    """
    data = np.asarray(matrix)
    if data.dtype not in (np.float32, np.float64):
        data = data.astype(np.float64)
    owners = np.asarray(row_groups, dtype=np.int64).reshape(-1)
    if data.ndim != 2 or len(data) != len(owners):
        raise InvalidParameterError(
            "matrix", f"a 2-d array with one row per group label ({len(owners)})", data.shape
        )
    data = np.ascontiguousarray(data)
    dimension = data.shape[1]
    size = num_groups * dimension
    if len(owners) and not 0 <= int(owners.min()) <= int(owners.max()) < num_groups:
        raise InvalidParameterError("row_groups", f"groups in 0..{num_groups - 1}", owners)
    rows_of = np.bincount(owners, minlength=num_groups).astype(np.int64)
    counts = np.repeat(rows_of, dimension)
    if dimension == 0 or len(data) == 0:
        flags = np.zeros(size, dtype=np.uint8)
        return ExactSums(counts, flags, *_no_bins())
    if _plain_sums_are_exact(data, int(rows_of.max())):
        totals = np.zeros((num_groups, dimension), dtype=np.float64)
        plain = np.zeros((num_groups, dimension), dtype=bool)
        order = np.argsort(owners, kind="stable")
        stops = np.cumsum(rows_of)
        signed = np.int32 if data.dtype == np.float32 else np.int64
        for group in np.flatnonzero(rows_of).tolist():
            block = data[order[stops[group] - rows_of[group] : stops[group]]]
            totals[group] = np.add.reduce(block, axis=0, dtype=np.float64)  # exact, any order
            plain[group] = True
            zero = totals[group] == 0
            if zero.any():
                # -0.0 is the smallest bit pattern as a signed integer: every value is -0.0
                # iff the largest one is.
                largest = np.max(block[:, zero].view(signed), axis=0)
                plain[group, zero] = largest != np.iinfo(signed).min
        flat = totals.reshape(-1)
        flags = np.where(plain.reshape(-1), NOT_NEGATIVE_ZERO, 0).astype(np.uint8)
        return _from_exact_floats(counts, flags, flat)
    step = max(1, _CHUNK_VALUES // dimension)
    columns = np.arange(dimension, dtype=np.int64)
    parts = [
        exact_sums(
            data[start : start + step],
            owners[start : start + step, None] * dimension + columns[None, :],
            size,
        )
        for start in range(0, len(data), step)
    ]
    identity = np.arange(size, dtype=np.int64)
    return merge_exact_sums(parts, [identity] * len(parts), size)


def _plain_sums_are_exact(data: npt.NDArray[np.floating[Any]], largest_count: int) -> bool:
    """Whether float64 sums of up to ``largest_count`` of ``data``'s values are exact.

    True when the values are finite and every partial sum, in any order, is a multiple of
    the lowest significant bit of the values below 2^53 of those bits: the values have few
    significant bits (trailing zeros common to all) over a narrow range of exponents (e.g.
    float32 values in [2^-8, 1], or integers). Scans the bits in chunks (few temporaries).
    """
    if data.size == 0:
        return True
    single = data.dtype == np.float32
    precision, bias = (24, 126) if single else (53, 1022)
    fraction_bits = precision - 1
    signed, unsigned = (np.int32, np.uint32) if single else (np.int64, np.uint64)
    flat = data.view(signed).reshape(-1)
    growth = (max(largest_count, 1) - 1).bit_length()
    merged = 0
    for start in range(0, len(flat), _SCAN_VALUES):
        merged |= int(np.bitwise_or.reduce(flat[start : start + _SCAN_VALUES]))
        fraction = merged & ((1 << fraction_bits) - 1)
        trailing = fraction_bits if fraction == 0 else (fraction & -fraction).bit_length() - 1
        if growth > trailing + 53 - precision:
            return False
    magnitude_mask = (1 << (8 * data.itemsize - 1)) - 1
    infinity = ((1 << (8 * data.itemsize - 1 - fraction_bits)) - 1) << fraction_bits
    top, bottom = 0, magnitude_mask + 1
    buffer = np.empty(min(len(flat), _SCAN_VALUES), dtype=signed)
    for start in range(0, len(flat), _SCAN_VALUES):
        part = flat[start : start + _SCAN_VALUES]
        magnitudes = buffer[: len(part)]
        np.bitwise_and(part, magnitude_mask, out=magnitudes)
        top = max(top, int(magnitudes.max()))
        # Zero becomes the largest unsigned value: the minimum is that of the nonzero values.
        np.subtract(magnitudes, 1, out=magnitudes)
        bottom = min(bottom, int(magnitudes.view(unsigned).min()) + 1)
    if top >= infinity:
        return False
    if top == 0:
        return True
    # The values' bits lie in [2^(lowest − precision + trailing), 2^highest).
    highest = max(top >> fraction_bits, 1) - bias
    lowest = max(bottom >> fraction_bits, 1) - bias
    return growth + highest - lowest <= trailing + 53 - precision and growth + highest <= 1023


def _from_exact_floats(
    counts: IntArray, flags: FlagArray, totals: npt.NDArray[np.float64]
) -> ExactSums:
    """The sums of groups whose exact sums ``totals`` are doubles: one bin per nonzero sum."""
    kept = np.flatnonzero(totals != 0)
    fractions, exponents = np.frexp(totals[kept])
    mantissas = (fractions * float(1 << _MANTISSA_BITS)).astype(np.int64)
    return ExactSums(
        counts,
        flags,
        kept.astype(np.int64),
        exponents.astype(np.int64) - _MANTISSA_BITS,
        mantissas >> _HALF_BITS,
        mantissas & _LOW_MASK,
    )


def merge_exact_sums(
    parts: Sequence[ExactSums], group_maps: Sequence[npt.ArrayLike], num_groups: int
) -> ExactSums:
    """The exact sums of the union of ``parts``' values (disjoint parts).

    ``group_maps[i][g]`` is the merged group (``0..num_groups-1``) of group g of ``parts[i]``.
    Associative and commutative: the result's rounded sums do not depend on how the values were
    split into parts nor on the order of the parts.
    """
    if len(group_maps) != len(parts):
        raise InvalidParameterError("group_maps", f"one map per part ({len(parts)})", group_maps)
    maps = [np.asarray(m, dtype=np.int64).reshape(-1) for m in group_maps]
    counts = np.zeros(num_groups, dtype=np.int64)
    flags = np.zeros(num_groups, dtype=np.uint8)
    for part, mapping in zip(parts, maps, strict=True):
        if len(mapping) != part.num_groups:
            raise InvalidParameterError(
                "group_maps", f"a map of {part.num_groups} groups", len(mapping)
            )
        np.add.at(counts, mapping, part.counts)
        np.bitwise_or.at(flags, mapping, part.flags)
    if not parts:
        return _reduce_bins(counts, flags, *_no_bins(), values_bound=0)
    highs = [p.bin_high for p in parts]
    lows = [p.bin_low for p in parts]
    return _reduce_bins(
        counts,
        flags,
        np.concatenate([m[p.bin_groups] for p, m in zip(parts, maps, strict=True)]),
        np.concatenate([p.bin_exponents for p in parts]),
        np.concatenate(highs),
        np.concatenate(lows),
        values_bound=int(sum(int(p.counts.sum()) for p in parts)),
    )


def _no_bins() -> tuple[IntArray, IntArray, IntArray, IntArray]:
    empty = np.zeros(0, dtype=np.int64)
    return empty, empty, empty, empty


def _reduce_bins(
    counts: IntArray,
    flags: FlagArray,
    groups: IntArray,
    exponents: IntArray,
    high: npt.NDArray[Any],
    low: npt.NDArray[Any],
    *,
    values_bound: int,
) -> ExactSums:
    """Sum ``high`` and ``low`` per (group, exponent), exactly, dropping zero bins.

    ``values_bound`` bounds the number of original values summed into one bin: it decides
    which sums stay exact (float64 up to 2^26 values, int64 up to 2^36, else Python ints).
    """
    if len(groups) == 0:
        return ExactSums(counts, flags, *_no_bins())
    smallest = int(exponents.min())
    span = int(exponents.max()) - smallest + 1
    codes = groups * span + (exponents - smallest)
    size = len(counts) * span
    wide = high.dtype == object or low.dtype == object or values_bound > _INT64_VALUES
    bin_high: npt.NDArray[Any]
    bin_low: npt.NDArray[Any]
    if not wide and values_bound <= _FLOAT_VALUES and size <= max(_DENSE_BINS, 2 * len(codes)):
        # Every partial sum is an integer below 2^53 in magnitude: float64 adds them exactly.
        highs = np.bincount(codes, weights=high, minlength=size)
        lows = np.bincount(codes, weights=low, minlength=size)
        kept = np.flatnonzero((highs != 0) | (lows != 0))
        bin_codes = kept.astype(np.int64)
        bin_high = highs[kept].astype(np.int64)
        bin_low = lows[kept].astype(np.int64)
    else:
        order = np.argsort(codes, kind="stable")
        ordered = codes[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        ordered_high, ordered_low = high[order], low[order]
        if wide:
            ordered_high, ordered_low = ordered_high.astype(object), ordered_low.astype(object)
        bin_high = np.add.reduceat(ordered_high, starts)
        bin_low = np.add.reduceat(ordered_low, starts)
        nonzero = np.asarray((bin_high != 0) | (bin_low != 0), dtype=bool)
        bin_codes = ordered[starts][nonzero]
        bin_high, bin_low = bin_high[nonzero], bin_low[nonzero]
    return ExactSums(
        counts,
        flags,
        bin_codes // span,
        bin_codes % span + smallest,
        bin_high,
        bin_low,
    )
