"""Statistics used by the metrics and the validator.

Every function here is pure and deterministic: inputs in, numbers out, no
module-level mutable state. Anything that draws random numbers takes an
explicit ``seed: int`` and builds its own ``numpy.random.default_rng(seed)``,
so a published result can be reproduced bit for bit from its recorded seed.

Conventions shared by the whole module:

* Differences are always ``b - a``: ``a`` is the baseline (or reference)
  condition and ``b`` the treatment, so a positive difference means ``b``
  scored higher.
* Invalid input (length mismatch, empty input where a statistic is undefined,
  out-of-range counts or probabilities) raises ``ValueError`` rather than
  returning a sentinel, so bad data cannot silently become a number in a report.
* Where a statistic is undefined but the input is legitimate, the documented
  sentinel is returned instead (``rate`` gives ``None``; ``spearman`` gives
  ``nan``; ``wilson_interval`` gives ``(0.0, 1.0)``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# numpy and scipy are imported by the functions that use them: together they take
# most of a second to import, and most commands never compute a statistic.
if TYPE_CHECKING:
    import numpy as np

    #: Numbers as a sequence, or as a numpy array (taken without a copy).
    Floats = Sequence[float] | np.ndarray

__all__ = [
    "BootstrapResult",
    "McNemarResult",
    "PermutationResult",
    "bootstrap_median",
    "cohen_kappa",
    "holm_adjust",
    "mcnemar_exact",
    "mcnemar_from_pairs",
    "paired_bootstrap_diff",
    "percent_agreement",
    "ranked_task_differences",
    "rate",
    "sign_permutation_test",
    "spearman",
    "task_blocked_differences",
    "wilson_interval",
]

# Upper bound on the number of array elements materialised at once by the
# resampling routines (one resample whole, however large): about 8 MiB an
# int64/float64 array, so a few of them at a time whatever the number of
# resamples or observations. The chunking never changes a result: the
# generator's stream does not depend on how the draws are split (its spare
# 32-bit half is kept in its own state), and each resample is computed alone.
_CHUNK_ELEMENTS = 1 << 20

# Absolute/relative tolerance for treating a permuted statistic as "at least as
# extreme" as the observed one: sign flips of the same values can produce the
# observed |mean| with a different summation order, hence tiny float error.
_TIE_TOLERANCE = 1e-12


# --------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class McNemarResult:
    """Outcome of an exact McNemar test on paired binary outcomes.

    ``b`` counts pairs where the first condition succeeded and the second
    failed; ``c`` counts the reverse. ``n_pairs`` is the total number of
    pairs, including concordant ones.
    """

    b: int
    c: int
    n_pairs: int
    p_value: float


@dataclass(frozen=True)
class BootstrapResult:
    """Paired bootstrap estimate of ``mean(b) - mean(a)`` with a percentile CI."""

    diff: float
    ci_low: float
    ci_high: float
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class PermutationResult:
    """Outcome of a sign-permutation test.

    ``statistic`` is the observed ``|mean(differences)|``. ``n_permutations``
    is the number of sign patterns evaluated (``2**n`` when ``exact``).
    ``seed`` is recorded even for exact runs, where it is unused, so callers
    can log results uniformly.
    """

    statistic: float
    p_value: float
    n_permutations: int
    exact: bool
    seed: int


# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------


def _as_count(value: int, name: str) -> int:
    # operator.index accepts numpy integers but rejects floats such as 3.0,
    # which usually indicate a count computed the wrong way upstream.
    try:
        count = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if count < 0:
        raise ValueError(f"{name} must be non-negative, got {count}")
    return count


def _check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return confidence


def _as_finite_array(values: Floats, name: str) -> np.ndarray:
    import numpy as np

    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite numbers")
    return arr


def _as_bool(value: object, name: str) -> bool:
    import numpy as np

    # Only genuine booleans or 0/1 are accepted: a stray score of 2 or 0.5 in
    # a pass/fail column is a bug upstream, not a truthy value.
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name} must contain booleans, got {value!r}")


def _check_same_length(a: Sequence[object] | np.ndarray, b: Sequence[object] | np.ndarray) -> int:
    if len(a) != len(b):
        raise ValueError(f"length mismatch: {len(a)} != {len(b)}")
    if len(a) == 0:
        raise ValueError("inputs must not be empty")
    return len(a)


# --------------------------------------------------------------------------
# Proportions
# --------------------------------------------------------------------------


def rate(successes: int, n: int) -> float | None:
    """Return the proportion ``successes / n``.

    Takes a non-negative integer count of successes and a total ``n`` with
    ``0 <= successes <= n``. Returns a float in ``[0, 1]``, or ``None`` when
    ``n == 0``: the rate is undefined, and ``None`` serialises to JSON
    ``null`` where ``nan`` would not serialise at all. Raises ``ValueError``
    for out-of-range counts.
    """
    successes = _as_count(successes, "successes")
    n = _as_count(n, "n")
    if successes > n:
        raise ValueError(f"successes ({successes}) exceeds n ({n})")
    if n == 0:
        return None
    return successes / n


@functools.lru_cache(maxsize=16)
def _normal_quantile(p: float) -> float:
    from scipy import stats as _sps

    # scipy's ppf costs ~100 us a call; summaries ask for the same few levels
    # thousands of times, and the value is a pure function of p.
    return float(_sps.norm.ppf(p))


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Return the two-sided Wilson score interval for a binomial proportion.

    Takes the number of successes, the number of trials ``n`` (requires
    ``0 <= successes <= n``) and a confidence level in ``(0, 1)``. Returns
    ``(low, high)`` clamped to ``[0, 1]``. With ``n == 0`` there is no
    information, so the whole unit interval ``(0.0, 1.0)`` is returned.
    The critical value is ``z = norm.ppf(1 - (1 - confidence) / 2)``.
    """
    successes = _as_count(successes, "successes")
    n = _as_count(n, "n")
    confidence = _check_confidence(confidence)
    if successes > n:
        raise ValueError(f"successes ({successes}) exceeds n ({n})")
    if n == 0:
        return (0.0, 1.0)
    z = _normal_quantile(1.0 - (1.0 - confidence) / 2.0)
    p_hat = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p_hat + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p_hat * (1.0 - p_hat) / n + z2 / (4.0 * n * n)) / denom
    # At p_hat of exactly 0 or 1 the outer bound is mathematically 0 or 1 but
    # centre - half (or centre + half) leaves rounding residue; pin those
    # bounds and clamp the rest so callers can rely on [0, 1].
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


# --------------------------------------------------------------------------
# McNemar
# --------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Return the exact two-sided McNemar p-value for discordant counts.

    Takes ``b`` and ``c``, the two discordant-pair counts. Under the null
    each discordant pair falls either way with probability 1/2, so the
    p-value is ``min(1, 2 * P(X <= min(b, c)))`` with
    ``X ~ Binomial(b + c, 0.5)``. With no discordant pairs there is no
    evidence either way and ``1.0`` is returned.
    """
    from scipy import stats as _sps

    b = _as_count(b, "b")
    c = _as_count(c, "c")
    n = b + c
    if n == 0:
        return 1.0
    tail = float(_sps.binom.cdf(min(b, c), n, 0.5))
    return min(1.0, 2.0 * tail)


def mcnemar_from_pairs(a: Sequence[bool], b: Sequence[bool]) -> McNemarResult:
    """Run the exact McNemar test on paired binary outcomes.

    Takes two equal-length sequences of booleans (0/1 also accepted), where
    ``a[i]`` and ``b[i]`` are the outcomes of the same item under two
    conditions. Returns a ``McNemarResult`` whose ``b`` counts pairs with
    ``a`` true and ``b`` false, ``c`` counts ``a`` false and ``b`` true, and
    ``p_value`` is ``mcnemar_exact(b, c)``. Empty input is allowed and gives
    ``p_value == 1.0``; a length mismatch raises ``ValueError``.
    """
    if len(a) != len(b):
        raise ValueError(f"length mismatch: {len(a)} != {len(b)}")
    n_b = 0
    n_c = 0
    for x, y in zip(a, b, strict=True):
        xa = _as_bool(x, "a")
        yb = _as_bool(y, "b")
        if xa and not yb:
            n_b += 1
        elif yb and not xa:
            n_c += 1
    return McNemarResult(b=n_b, c=n_c, n_pairs=len(a), p_value=mcnemar_exact(n_b, n_c))


# --------------------------------------------------------------------------
# Multiple comparisons
# --------------------------------------------------------------------------


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Return Holm-Bonferroni step-down adjusted p-values.

    Takes raw p-values in ``[0, 1]``. The ``k``-th smallest (0-based) is
    multiplied by ``m - k``, a running maximum enforces monotonicity in the
    sorted order, and values are capped at 1. The result is returned in the
    input order. An empty input gives an empty list; NaN or out-of-range
    values raise ``ValueError``.
    """
    import numpy as np

    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError("p_values must be one-dimensional")
    m = p.size
    if m == 0:
        return []
    if np.any(~np.isfinite(p)) or np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError("p_values must be finite and within [0, 1]")
    # A stable sort keeps ties in input order, so equal raw p-values get
    # equal adjusted values through the running maximum.
    order = np.argsort(p, kind="stable")
    scaled = p[order] * (m - np.arange(m))
    adjusted_sorted = np.minimum(np.maximum.accumulate(scaled), 1.0)
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    return [float(v) for v in adjusted]


# --------------------------------------------------------------------------
# Paired resampling
# --------------------------------------------------------------------------


def paired_bootstrap_diff(
    a: Floats,
    b: Floats,
    *,
    n_resamples: int = 10000,
    confidence: float = 0.95,
    seed: int,
) -> BootstrapResult:
    """Paired bootstrap of the mean difference ``mean(b) - mean(a)``.

    Takes two equal-length, non-empty sequences of finite numbers paired by
    position. Pair indices are resampled with replacement (so each resample
    keeps pairs intact) ``n_resamples`` times using
    ``numpy.random.default_rng(seed)``. Returns a ``BootstrapResult`` with the
    observed difference (``b`` minus ``a``: positive means ``b`` is higher)
    and the percentile confidence interval of the resampled differences.
    Raises ``ValueError`` on length mismatch, empty input, non-finite values
    or invalid parameters.
    """
    import numpy as np

    n = _check_same_length(a, b)
    n_resamples = _as_count(n_resamples, "n_resamples")
    if n_resamples == 0:
        raise ValueError("n_resamples must be positive")
    confidence = _check_confidence(confidence)
    seed = operator.index(seed)
    # The mean of paired differences equals the difference of means, and
    # resampling the difference vector is equivalent to resampling pairs.
    d = _as_finite_array(b, "b") - _as_finite_array(a, "a")
    rng = np.random.default_rng(seed)
    boot = np.empty(n_resamples)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot[start:stop] = d[idx].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return BootstrapResult(
        diff=float(d.mean()),
        ci_low=float(low),
        ci_high=float(high),
        n_resamples=n_resamples,
        seed=seed,
    )


def bootstrap_median(
    values: Sequence[float], *, n_resamples: int = 10000, confidence: float = 0.95, seed: int
) -> tuple[float, float, float]:
    """The median of ``values`` with its percentile bootstrap interval: ``(median, low, high)``.

    Values are resampled with replacement ``n_resamples`` times using
    ``numpy.random.default_rng(seed)``; the interval is the ``confidence``
    percentile interval of the resampled medians. What a cost (tokens, model
    calls, wall time per run) is reported with, as its distribution is skewed.
    Raises ``ValueError`` on empty input, non-finite values or invalid
    parameters.
    """
    import numpy as np

    data = _as_finite_array(values, "values")
    if data.size == 0:
        raise ValueError("values must not be empty")
    n_resamples = _as_count(n_resamples, "n_resamples")
    if n_resamples == 0:
        raise ValueError("n_resamples must be positive")
    confidence = _check_confidence(confidence)
    rng = np.random.default_rng(operator.index(seed))
    n = data.size
    boot = np.empty(n_resamples)
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_resamples, rows):
        stop = min(start + rows, n_resamples)
        boot[start:stop] = np.median(data[rng.integers(0, n, size=(stop - start, n))], axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(boot, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(np.median(data)), float(low), float(high)


def task_blocked_differences(
    task_ids: Sequence[Hashable],
    a: Floats,
    b: Floats,
) -> list[float]:
    """Collapse paired observations to one difference per task.

    Takes parallel sequences: the task id of each observation and its paired
    scores under conditions ``a`` and ``b``. Observations are grouped by task
    id; for each task the result is ``mean(b) - mean(a)`` over its
    observations. Returns the per-task differences ordered by sorted task id
    (task ids must therefore be mutually orderable). This is the input
    expected by ``sign_permutation_test``: repeated runs of one task are not
    independent, so the task is the exchangeable unit. Raises
    ``ValueError`` on length mismatch, empty input or non-finite scores.
    """
    if len(task_ids) != len(a):
        raise ValueError(f"length mismatch: {len(task_ids)} != {len(a)}")
    _check_same_length(a, b)
    blocked: list[float] = ranked_task_differences(_task_ranks(task_ids), a, b).tolist()
    return blocked


def ranked_task_differences(task_ranks: np.ndarray, a: Floats, b: Floats) -> np.ndarray:
    """:func:`task_blocked_differences` with each observation's task given as an integer that orders the tasks as
    their ids sort (a rank), and the differences given back as an array: what a paired comparison of a million
    observations uses, without a Python object per task. Raises ``ValueError`` as that function does.
    """
    import numpy as np

    n = _check_same_length(a, b)
    if len(task_ranks) != n:
        raise ValueError(f"length mismatch: {len(task_ranks)} != {n}")
    d = _as_finite_array(b, "b") - _as_finite_array(a, "a")
    ranks = np.asarray(task_ranks)
    if np.any(ranks[1:] < ranks[:-1]):
        order = np.argsort(ranks, kind="stable")  # stable: a task's observations stay in the order given
        ranks, d = ranks[order], d[order]
    starts = np.flatnonzero(np.concatenate(([True], ranks[1:] != ranks[:-1])))
    lengths = np.diff(np.append(starts, n))
    means: np.ndarray = d[starts] + 0.0  # the mean of one observation, as np.mean gives it (its sum starts at +0.0)
    for block in np.flatnonzero(lengths > 1):
        start = starts[block]
        means[block] = np.mean(d[start : start + lengths[block]])
    return means


def _task_ranks(task_ids: Sequence[Hashable]) -> np.ndarray:
    """Each observation's task as its rank among the distinct task ids in sorted order."""
    import numpy as np

    numbered: dict[Hashable, int] = {}
    numbers = np.fromiter(
        (numbered.setdefault(task, len(numbered)) for task in task_ids), dtype=np.int64, count=len(task_ids)
    )
    distinct: list[Any] = list(numbered)  # mutually orderable, as the docstring asks
    rank_of = np.empty(len(distinct), dtype=np.int64)
    rank_of[sorted(range(len(distinct)), key=distinct.__getitem__)] = np.arange(len(distinct))
    return rank_of[numbers]


def sign_permutation_test(
    differences: Floats,
    *,
    n_permutations: int = 10000,
    seed: int,
    exact_limit: int = 16,
) -> PermutationResult:
    """Two-sided sign-permutation test that the mean difference is zero.

    Takes one aggregated difference per task (block), e.g. from
    ``task_blocked_differences``. Under the null each block's difference is
    symmetric about zero, so its sign is exchangeable. The statistic is
    ``|mean(differences)|``.

    If ``len(differences) <= exact_limit`` all ``2**n`` sign patterns are
    enumerated and the p-value is the fraction whose statistic is at least
    the observed one (with a ``1e-12`` relative/absolute tolerance so float
    ties count as ties). Otherwise ``n_permutations`` random sign patterns are
    drawn from ``numpy.random.default_rng(seed)`` and
    ``p = (1 + count) / (1 + n_permutations)``, which never reports zero.
    Zero differences are allowed; they do not change under a sign flip.
    Returns a ``PermutationResult``. Raises ``ValueError`` on empty input,
    non-finite values or invalid parameters.
    """
    import numpy as np

    d = _as_finite_array(differences, "differences")
    n = d.size
    if n == 0:
        raise ValueError("differences must not be empty")
    n_permutations = _as_count(n_permutations, "n_permutations")
    exact_limit = _as_count(exact_limit, "exact_limit")
    seed = operator.index(seed)
    observed = abs(float(d.mean()))
    threshold = observed - _TIE_TOLERANCE * max(1.0, observed)

    if n <= exact_limit:
        total = 1 << n
        count = 0
        bits = np.arange(n, dtype=np.int64)
        rows = max(1, _CHUNK_ELEMENTS // n)
        # Pattern k flips the sign of element j when bit j of k is set, so
        # the chunks together enumerate every pattern exactly once.
        for start in range(0, total, rows):
            codes = np.arange(start, min(start + rows, total), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            stats = np.abs(signs @ d) / n
            count += int(np.count_nonzero(stats >= threshold))
        return PermutationResult(
            statistic=observed,
            p_value=count / total,
            n_permutations=total,
            exact=True,
            seed=seed,
        )

    if n_permutations == 0:
        raise ValueError("n_permutations must be positive for a Monte Carlo test")
    rng = np.random.default_rng(seed)
    count = 0
    rows = max(1, _CHUNK_ELEMENTS // n)
    for start in range(0, n_permutations, rows):
        size = min(rows, n_permutations - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(size, n))
        stats = np.abs(signs @ d) / n
        count += int(np.count_nonzero(stats >= threshold))
    return PermutationResult(
        statistic=observed,
        p_value=(1 + count) / (1 + n_permutations),
        n_permutations=n_permutations,
        exact=False,
        seed=seed,
    )


# --------------------------------------------------------------------------
# Agreement and correlation
# --------------------------------------------------------------------------


def percent_agreement(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> float:
    """Return the fraction of items on which two raters give the same label.

    Takes two equal-length, non-empty sequences of hashable labels. Returns
    a float in ``[0, 1]``. Raises ``ValueError`` on length mismatch or empty
    input.
    """
    n = _check_same_length(rater_a, rater_b)
    return sum(1 for x, y in zip(rater_a, rater_b, strict=True) if x == y) / n


def cohen_kappa(rater_a: Sequence[Hashable], rater_b: Sequence[Hashable]) -> float:
    """Return unweighted Cohen's kappa between two raters.

    Takes two equal-length, non-empty sequences of hashable labels; the
    category set is the union of labels either rater used. Returns
    ``(p_o - p_e) / (1 - p_e)`` where ``p_o`` is observed agreement and
    ``p_e`` the agreement expected from the raters' marginals. When
    ``p_e == 1`` (both raters used one and the same label throughout) kappa
    is 0/0; agreement is perfect, so ``1.0`` is returned. Raises
    ``ValueError`` on length mismatch or empty input.
    """
    n = _check_same_length(rater_a, rater_b)
    categories = set(rater_a) | set(rater_b)
    if len(categories) == 1:
        return 1.0
    p_o = percent_agreement(rater_a, rater_b)
    count_a: dict[Hashable, int] = {}
    count_b: dict[Hashable, int] = {}
    for label in rater_a:
        count_a[label] = count_a.get(label, 0) + 1
    for label in rater_b:
        count_b[label] = count_b.get(label, 0) + 1
    # Integer arithmetic for the marginal products avoids accumulating
    # rounding before the single division.
    p_e = sum(count_a.get(k, 0) * count_b.get(k, 0) for k in categories) / (n * n)
    return (p_o - p_e) / (1.0 - p_e)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Return Spearman's rank correlation between ``x`` and ``y``.

    Takes two equal-length sequences of at least two finite numbers. Ties
    receive average ranks (Pearson correlation of the ranks, as
    ``scipy.stats.spearmanr``). Returns a float in ``[-1, 1]``, or ``nan``
    when either input is constant, since rank correlation is then undefined.
    Raises ``ValueError`` on length mismatch or fewer than two points.
    """
    import numpy as np
    from scipy import stats as _sps

    if len(x) != len(y):
        raise ValueError(f"length mismatch: {len(x)} != {len(y)}")
    if len(x) < 2:
        raise ValueError("spearman needs at least two points")
    xa = _as_finite_array(x, "x")
    ya = _as_finite_array(y, "y")
    # Check constancy up front: scipy would also give nan but with a warning.
    if np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return float("nan")
    return float(_sps.spearmanr(xa, ya).statistic)
