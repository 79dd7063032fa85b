"""Tests for assay.stats: reference figures, hand-worked examples, properties."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import numpy as np
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from assay import stats
from assay.stats import (
    BootstrapResult,
    McNemarResult,
    PermutationResult,
    cohen_kappa,
    holm_adjust,
    mcnemar_exact,
    mcnemar_from_pairs,
    paired_bootstrap_diff,
    percent_agreement,
    ranked_task_differences,
    rate,
    sign_permutation_test,
    spearman,
    task_blocked_differences,
    wilson_interval,
)


def test_all_is_sorted_and_exported() -> None:
    assert stats.__all__ == sorted(stats.__all__)
    for name in stats.__all__:
        assert hasattr(stats, name)


# --------------------------------------------------------------------------
# rate
# --------------------------------------------------------------------------


def test_rate_basic_and_empty() -> None:
    assert rate(3, 4) == 0.75
    assert rate(0, 5) == 0.0
    assert rate(0, 0) is None


@pytest.mark.parametrize("successes,n", [(5, 4), (-1, 3), (1, -1)])
def test_rate_rejects_bad_counts(successes: int, n: int) -> None:
    with pytest.raises(ValueError):
        rate(successes, n)


# --------------------------------------------------------------------------
# Wilson
# --------------------------------------------------------------------------


def _wilson_closed_form(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = (z / (1 + z * z / n)) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_wilson_matches_closed_form() -> None:
    z = 1.959963984540054  # norm.ppf(0.975)
    low, high = wilson_interval(9, 600)
    exp_low, exp_high = _wilson_closed_form(9, 600, z)
    assert low == pytest.approx(exp_low, rel=1e-9)
    assert high == pytest.approx(exp_high, rel=1e-9)
    assert low < 9 / 600 < high


def test_wilson_textbook_zero_of_ten() -> None:
    low, high = wilson_interval(0, 10)
    assert low == 0.0
    assert high == pytest.approx(0.2775, abs=5e-4)


def test_wilson_all_successes_upper_is_one() -> None:
    low, high = wilson_interval(10, 10)
    assert high == 1.0
    assert low == pytest.approx(1 - 0.2775, abs=5e-4)


def test_wilson_symmetry_and_confidence_widening() -> None:
    low, high = wilson_interval(3, 20)
    mlow, mhigh = wilson_interval(17, 20)
    assert low == pytest.approx(1 - mhigh)
    assert high == pytest.approx(1 - mlow)
    narrow = wilson_interval(3, 20, confidence=0.80)
    wide = wilson_interval(3, 20, confidence=0.99)
    assert wide[0] < low < narrow[0]
    assert narrow[1] < high < wide[1]


def test_wilson_empty_is_unit_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize(
    "successes,n,confidence",
    [(5, 4, 0.95), (-1, 4, 0.95), (1, 4, 0.0), (1, 4, 1.0), (1.5, 4, 0.95)],
)
def test_wilson_rejects_bad_input(successes, n, confidence) -> None:
    with pytest.raises(ValueError):
        wilson_interval(successes, n, confidence)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.integers(min_value=1, max_value=10_000).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    ),
    st.floats(min_value=0.5, max_value=0.999),
)
def test_wilson_property_contains_estimate(kn: tuple[int, int], confidence: float) -> None:
    k, n = kn
    low, high = wilson_interval(k, n, confidence)
    assert 0.0 <= low <= k / n <= high <= 1.0


# --------------------------------------------------------------------------
# McNemar
# --------------------------------------------------------------------------


def test_mcnemar_reference_figures() -> None:
    assert mcnemar_exact(21, 1) == pytest.approx(1.10e-5, rel=1e-2)
    assert mcnemar_exact(21, 1) == pytest.approx(2 * 23 / 2**22, rel=1e-9)
    assert mcnemar_exact(16, 0) == pytest.approx(3.05e-5, rel=1e-3)
    assert mcnemar_exact(16, 0) == pytest.approx(2 / 2**16, rel=1e-9)
    assert mcnemar_exact(2, 7) == pytest.approx(0.18, abs=0.005)
    assert mcnemar_exact(2, 7) == pytest.approx(2 * 46 / 512, rel=1e-9)


def test_mcnemar_reference_figures_rounded_as_reported() -> None:
    # The paper reports three significant figures.
    assert float(f"{mcnemar_exact(21, 1):.3g}") == pytest.approx(1.10e-5, rel=1e-3)
    assert float(f"{mcnemar_exact(16, 0):.3g}") == pytest.approx(3.05e-5, rel=1e-3)


def test_mcnemar_symmetric_and_capped() -> None:
    assert mcnemar_exact(7, 2) == mcnemar_exact(2, 7)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(0, 1) == 1.0


def test_mcnemar_rejects_negative() -> None:
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_mcnemar_from_pairs_counts() -> None:
    a = [True, True, False, False, True, True]
    b = [False, True, True, False, False, True]
    result = mcnemar_from_pairs(a, b)
    assert isinstance(result, McNemarResult)
    assert (result.b, result.c, result.n_pairs) == (2, 1, 6)
    assert result.p_value == mcnemar_exact(2, 1)


def test_mcnemar_from_pairs_reference() -> None:
    a = [True] * 21 + [False] * 1 + [True] * 30
    b = [False] * 21 + [True] * 1 + [True] * 30
    result = mcnemar_from_pairs(a, b)
    assert (result.b, result.c, result.n_pairs) == (21, 1, 52)
    assert result.p_value == pytest.approx(1.10e-5, rel=1e-2)


def test_mcnemar_from_pairs_errors() -> None:
    with pytest.raises(ValueError):
        mcnemar_from_pairs([True], [True, False])
    with pytest.raises(ValueError):
        mcnemar_from_pairs([True, 2], [True, False])
    assert mcnemar_from_pairs([], []).p_value == 1.0


def test_mcnemar_result_is_frozen() -> None:
    result = mcnemar_from_pairs([1, 0], [0, 1])
    with pytest.raises(AttributeError):
        result.b = 5  # type: ignore[misc]


# --------------------------------------------------------------------------
# Holm
# --------------------------------------------------------------------------


def test_holm_hand_worked() -> None:
    adjusted = holm_adjust([0.01, 0.04, 0.03, 0.005])
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_handles_edges() -> None:
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]
    assert holm_adjust([]) == []
    assert holm_adjust([0.2]) == [0.2]
    assert holm_adjust([0.01, 0.01]) == [0.02, 0.02]


@pytest.mark.parametrize("bad", [[0.1, -0.1], [1.5], [float("nan")]])
def test_holm_rejects_invalid(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        holm_adjust(bad)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=30))
def test_holm_property_bounds_and_monotone(p: list[float]) -> None:
    adjusted = holm_adjust(p)
    assert len(adjusted) == len(p)
    for raw, adj in zip(p, adjusted, strict=True):
        assert raw <= adj <= 1.0
    # Order of raw p-values is preserved (weakly) by the adjustment.
    pairs = sorted(zip(p, adjusted, strict=True))
    for (_, a1), (_, a2) in pairwise(pairs):
        assert a1 <= a2


# --------------------------------------------------------------------------
# Paired bootstrap
# --------------------------------------------------------------------------


_A = [0.2, 0.5, 0.1, 0.9, 0.4, 0.3, 0.8, 0.6, 0.7, 0.0]
_B = [0.3, 0.7, 0.2, 0.9, 0.6, 0.2, 0.9, 0.8, 0.7, 0.3]


def test_bootstrap_deterministic_for_seed() -> None:
    # Continuous data so that different resamples give distinct quantiles.
    data_rng = np.random.default_rng(2024)
    a = data_rng.normal(0.0, 1.0, size=50).tolist()
    b = (np.asarray(a) + data_rng.normal(0.3, 1.0, size=50)).tolist()
    r1 = paired_bootstrap_diff(a, b, n_resamples=2000, seed=7)
    r2 = paired_bootstrap_diff(a, b, n_resamples=2000, seed=7)
    assert r1 == r2
    r3 = paired_bootstrap_diff(a, b, n_resamples=2000, seed=8)
    assert (r3.ci_low, r3.ci_high) != (r1.ci_low, r1.ci_high)
    assert r3.diff == r1.diff


def test_bootstrap_diff_sign_and_ci() -> None:
    result = paired_bootstrap_diff(_A, _B, seed=0)
    assert isinstance(result, BootstrapResult)
    assert result.diff == pytest.approx(np.mean(_B) - np.mean(_A))
    assert result.diff > 0  # b minus a
    assert result.ci_low <= result.diff <= result.ci_high
    assert result.n_resamples == 10000
    assert result.seed == 0
    flipped = paired_bootstrap_diff(_B, _A, seed=0)
    assert flipped.diff == pytest.approx(-result.diff)


def test_bootstrap_wider_at_higher_confidence() -> None:
    r90 = paired_bootstrap_diff(_A, _B, confidence=0.90, seed=3)
    r99 = paired_bootstrap_diff(_A, _B, confidence=0.99, seed=3)
    assert r99.ci_low <= r90.ci_low
    assert r99.ci_high >= r90.ci_high


def test_bootstrap_constant_difference_has_degenerate_ci() -> None:
    result = paired_bootstrap_diff([1.0, 2.0, 3.0], [1.5, 2.5, 3.5], seed=1)
    assert result.diff == pytest.approx(0.5)
    assert result.ci_low == pytest.approx(0.5)
    assert result.ci_high == pytest.approx(0.5)


def test_bootstrap_chunking_matches_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    # How the resamples are split into chunks never changes the result: the
    # generator's stream does not depend on the split (so the chunk size can
    # bound memory without moving a published number).
    whole = paired_bootstrap_diff(_A, _B, n_resamples=500, seed=11)
    for chunk in (25, 7 * len(_A) + 3, len(_A)):
        monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", chunk)
        assert paired_bootstrap_diff(_A, _B, n_resamples=500, seed=11) == whole
    assert whole.ci_low <= whole.diff <= whole.ci_high


def test_monte_carlo_permutation_chunking_keeps_the_p_value(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(4)
    d = [rng.gauss(0.05, 1.0) for _ in range(301)]
    whole = sign_permutation_test(d, n_permutations=2000, seed=3)
    for chunk in (301, 5 * 301 + 1, 64 * 301):
        monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", chunk)
        assert sign_permutation_test(d, n_permutations=2000, seed=3).p_value == whole.p_value


def test_ranked_task_differences_match_the_blocked_ones() -> None:
    """Both group and order as the plain definition does: np.mean of each task's differences, tasks in sorted order
    (bit for bit, the sign of a zero included, as the numbers published before them were computed)."""
    rng = random.Random(9)
    ids = [f"task-{rng.randrange(400):03d}" for _ in range(500)]  # most tasks once, some several times
    a = [rng.choice([0.0, 1.0, -0.0, rng.random()]) for _ in ids]
    b = [rng.choice([0.0, 1.0, -0.0, rng.random()]) for _ in ids]
    grouped: dict[str, list[float]] = {}
    for task, difference in zip(ids, np.array(b) - np.array(a), strict=True):
        grouped.setdefault(task, []).append(float(difference))
    expected = [repr(float(np.mean(values))) for _, values in sorted(grouped.items())]
    # A task seen once with a difference of -0.0 has the mean +0.0 (np.mean's sum starts at +0.0): exercised here.
    assert any(len(values) == 1 and math.copysign(1.0, values[0]) < 0 and values[0] == 0 for values in grouped.values())
    ranks = np.array([sorted(grouped).index(task) for task in ids])
    assert [repr(x) for x in task_blocked_differences(ids, a, b)] == expected
    assert [repr(x) for x in ranked_task_differences(ranks, np.array(a), np.array(b)).tolist()] == expected
    with pytest.raises(ValueError, match="length mismatch"):
        ranked_task_differences(ranks[:-1], np.array(a), np.array(b))


def test_bootstrap_errors() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap_diff([], [], seed=0)
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1.0], [1.0, 2.0], seed=0)
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1.0], [2.0], n_resamples=0, seed=0)
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1.0], [2.0], confidence=1.0, seed=0)
    with pytest.raises(ValueError):
        paired_bootstrap_diff([1.0], [float("nan")], seed=0)
    with pytest.raises(TypeError):
        paired_bootstrap_diff([1.0], [2.0])  # type: ignore[call-arg]


# --------------------------------------------------------------------------
# Sign permutation
# --------------------------------------------------------------------------


def test_sign_permutation_exact_hand_computed() -> None:
    result = sign_permutation_test([1, 1, 1, 1], seed=0)
    assert isinstance(result, PermutationResult)
    assert result.exact
    assert result.n_permutations == 16
    assert result.statistic == 1.0
    assert result.p_value == 2 / 16


def test_sign_permutation_exact_with_ties_and_zeros() -> None:
    # |mean| of flips of [1, 2, 0]: sums are +-1 +-2 -> |3| twice, |1| twice,
    # each doubled by the zero's irrelevant sign; observed |3|/3 -> p = 4/8.
    result = sign_permutation_test([1, 2, 0], seed=0)
    assert result.p_value == pytest.approx(4 / 8)
    # Float ties: 0.1 + 0.2 vs 0.3 orderings must count as ties.
    tie = sign_permutation_test([0.1, 0.2, 0.3], seed=0)
    # Sums: +-0.1 +-0.2 +-0.3; |sum| >= 0.6 only for all-same-sign -> 2/8.
    assert tie.p_value == pytest.approx(2 / 8)
    zero_diff = sign_permutation_test([0.1, 0.2, -0.3], seed=0)
    assert zero_diff.p_value == 1.0


def test_sign_permutation_all_zero() -> None:
    result = sign_permutation_test([0.0, 0.0, 0.0], seed=0)
    assert result.statistic == 0.0
    assert result.p_value == 1.0


def test_sign_permutation_exact_vs_monte_carlo() -> None:
    d = [0.5, 0.3, -0.1, 0.4, 0.2, 0.6, -0.2, 0.35, 0.1, 0.25]
    exact = sign_permutation_test(d, seed=0)
    mc = sign_permutation_test(d, n_permutations=40000, seed=5, exact_limit=0)
    assert exact.exact and not mc.exact
    assert mc.n_permutations == 40000
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.01)
    assert mc.statistic == exact.statistic


def test_sign_permutation_exact_chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    d = [0.5, 0.3, -0.1, 0.4, 0.2, 0.6, -0.2]
    whole = sign_permutation_test(d, seed=0)
    monkeypatch.setattr(stats, "_CHUNK_ELEMENTS", 10)
    chunked = sign_permutation_test(d, seed=0)
    assert whole == chunked


def test_sign_permutation_monte_carlo_deterministic_and_never_zero() -> None:
    d = [1.0] * 30
    r1 = sign_permutation_test(d, n_permutations=999, seed=42)
    r2 = sign_permutation_test(d, n_permutations=999, seed=42)
    assert r1 == r2
    assert not r1.exact
    assert r1.p_value == pytest.approx(1 / 1000)


def test_sign_permutation_errors() -> None:
    with pytest.raises(ValueError):
        sign_permutation_test([], seed=0)
    with pytest.raises(ValueError):
        sign_permutation_test([1.0, float("inf")], seed=0)
    with pytest.raises(ValueError):
        sign_permutation_test([1.0] * 20, n_permutations=0, seed=0)


def test_task_blocked_differences() -> None:
    task_ids = ["t2", "t1", "t2", "t1", "t3"]
    a = [0.0, 1.0, 1.0, 0.0, 0.5]
    b = [1.0, 1.0, 1.0, 1.0, 0.0]
    # t1: mean(b)=1, mean(a)=0.5 -> 0.5; t2: 1 - 0.5 = 0.5; t3: -0.5
    assert task_blocked_differences(task_ids, a, b) == pytest.approx([0.5, 0.5, -0.5])


def test_task_blocked_differences_errors() -> None:
    with pytest.raises(ValueError):
        task_blocked_differences(["t1"], [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        task_blocked_differences(["t1", "t2"], [1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        task_blocked_differences([], [], [])


# --------------------------------------------------------------------------
# Agreement
# --------------------------------------------------------------------------


def _table_to_labels(table: list[list[int]]) -> tuple[list[int], list[int]]:
    a: list[int] = []
    b: list[int] = []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a.extend([i] * count)
            b.extend([j] * count)
    return a, b


def test_kappa_textbook_two_by_two() -> None:
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5, kappa = 0.4.
    a, b = _table_to_labels([[20, 5], [10, 15]])
    assert percent_agreement(a, b) == pytest.approx(0.7)
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_kappa_hand_computed_three_categories() -> None:
    table = [[10, 2, 3], [1, 12, 2], [4, 0, 16]]
    a, b = _table_to_labels(table)
    n = sum(map(sum, table))
    p_o = sum(table[i][i] for i in range(3)) / n
    rows = [sum(r) / n for r in table]
    cols = [sum(table[i][j] for i in range(3)) / n for j in range(3)]
    p_e = sum(r * c for r, c in zip(rows, cols, strict=True))
    assert cohen_kappa(a, b) == pytest.approx((p_o - p_e) / (1 - p_e))


def test_kappa_special_cases() -> None:
    assert cohen_kappa(["x", "x"], ["x", "x"]) == 1.0
    assert cohen_kappa(["x", "y", "x"], ["x", "y", "x"]) == 1.0
    assert cohen_kappa(["x", "y"], ["y", "x"]) == pytest.approx(-1.0)
    # Labels only one rater used still count as categories.
    assert cohen_kappa(["x", "x"], ["y", "y"]) == 0.0


def test_agreement_errors() -> None:
    for fn in (cohen_kappa, percent_agreement):
        with pytest.raises(ValueError):
            fn([], [])
        with pytest.raises(ValueError):
            fn(["a"], ["a", "b"])


@settings(max_examples=examples(300), deadline=None)
@given(
    st.integers(min_value=1, max_value=40).flatmap(
        lambda n: st.tuples(
            st.lists(st.sampled_from("abc"), min_size=n, max_size=n),
            st.lists(st.sampled_from("abcd"), min_size=n, max_size=n),
        )
    )
)
def test_kappa_property_bounded(pair: tuple[list[str], list[str]]) -> None:
    a, b = pair
    kappa = cohen_kappa(a, b)
    assert -1.0 - 1e-12 <= kappa <= 1.0 + 1e-12
    assert 0.0 <= percent_agreement(a, b) <= 1.0


# --------------------------------------------------------------------------
# Spearman
# --------------------------------------------------------------------------


def test_spearman_with_ties_matches_scipy() -> None:
    x = [1, 2, 2, 3, 4, 4, 4, 5]
    y = [2, 1, 3, 3, 5, 4, 6, 6]
    expected = sps.spearmanr(x, y).statistic
    assert spearman(x, y) == pytest.approx(expected)
    # Average-rank definition by hand: Pearson correlation of the ranks.
    rx, ry = sps.rankdata(x), sps.rankdata(y)
    assert spearman(x, y) == pytest.approx(np.corrcoef(rx, ry)[0, 1])


def test_spearman_perfect_and_constant() -> None:
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))


def test_spearman_errors() -> None:
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        spearman([1], [1])


def test_bootstrap_median_is_seeded_and_brackets_the_median():
    """Costs are reported as medians with bootstrap intervals (issue 14, item 9): the median is numpy's, the
    interval holds it, and the same seed gives the same interval."""
    from assay.stats import bootstrap_median

    values = [1.0, 2.0, 2.0, 3.0, 50.0, 2.5, 1.5]
    median, low, high = bootstrap_median(values, n_resamples=2000, seed=7)
    assert median == 2.0 and low <= median <= high and high < 50.0
    assert bootstrap_median(values, n_resamples=2000, seed=7) == (median, low, high)
    with pytest.raises(ValueError):
        bootstrap_median([], seed=0)
