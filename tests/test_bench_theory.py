"""The speed-up model (Leviathan et al.) and how α is recovered from a mean acceptance length."""

from __future__ import annotations

import math

import pytest

from specterm.bench.theory import alpha_from_acceptance_length, expected_tokens_per_step, theoretical_speedup


@pytest.mark.parametrize(
    ("alpha", "k", "c", "expected"),
    [
        (0.8, 4, 0.0, (1 - 0.8**5) / 0.2),  # free drafts: tokens per step
        (0.8, 4, 0.05, (1 - 0.8**5) / (0.2 * 1.2)),
        (0.6, 2, 0.1, (1 - 0.6**3) / (0.4 * 1.2)),
        (0.0, 5, 0.1, 1 / 1.5),  # nothing accepted: pure cost
    ],
)
def test_known_values(alpha, k, c, expected):
    assert theoretical_speedup(alpha, k, c) == pytest.approx(expected)


def test_paper_example_alpha_07_k_4():
    # Leviathan et al.: α = 0.7, free drafts → ≈ 2.77 tokens per target pass.
    assert expected_tokens_per_step(0.7, 4) == pytest.approx(2.7731, abs=1e-4)


def test_k0_is_target_only():
    for alpha in (0.0, 0.5, 1.0):
        assert theoretical_speedup(alpha, 0, 0.3) == pytest.approx(1.0)


def test_alpha_one_is_the_limit_not_a_division_by_zero():
    assert expected_tokens_per_step(1.0, 4) == 5.0
    assert theoretical_speedup(1.0, 4, 0.25) == pytest.approx(5 / 2)
    assert theoretical_speedup(1 - 1e-9, 4, 0.25) == pytest.approx(2.5, rel=1e-6)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        theoretical_speedup(1.2, 4, 0.1)
    with pytest.raises(ValueError):
        theoretical_speedup(0.5, -1, 0.1)
    with pytest.raises(ValueError):
        theoretical_speedup(0.5, 4, -0.1)
    with pytest.raises(ValueError):
        alpha_from_acceptance_length(2.0, 0)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.62, 0.9, 0.99])
@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_alpha_round_trips_through_the_acceptance_length(alpha, k):
    mal = expected_tokens_per_step(alpha, k)
    assert alpha_from_acceptance_length(mal, k) == pytest.approx(alpha, abs=1e-7)


def test_alpha_clamps_outside_the_reachable_range():
    assert alpha_from_acceptance_length(1.0, 4) == 0.0
    assert alpha_from_acceptance_length(0.5, 4) == 0.0
    assert alpha_from_acceptance_length(5.0, 4) == 1.0
    assert alpha_from_acceptance_length(7.0, 4) == 1.0


def test_alpha_is_not_the_acceptance_rate():
    # α = 0.8, k = 4: the expected acceptance rate is (α − α^5) / (k(1 − α)) ≈ 0.59, not 0.8.
    alpha, k = 0.8, 4
    rate = (alpha - alpha**5) / (k * (1 - alpha))
    assert math.isclose(rate, 0.5904, abs_tol=1e-4)
    assert alpha_from_acceptance_length(1 + rate * k, k) == pytest.approx(alpha)
