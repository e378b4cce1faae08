"""The USL fit against references it did not write: the R package `usl` (S. Möding, on CRAN),
whose own saved test outputs give its fits of the two data sets it ships from Gunther's
"Guerrilla Capacity Planning"; a linear system; exact curves."""

from __future__ import annotations

import math

import pytest

from cxlab.analysis.scalability import fit

# data(raytracer) and data(specsdm91) of the R package usl (its data/*.rda, read as XDR)
RAYTRACER = [(1, 20), (4, 78), (8, 130), (12, 170), (16, 190), (20, 200), (24, 210),
             (28, 230), (32, 260), (48, 280), (64, 310)]  # fmt: skip
SPECSDM91 = [(1, 64.9), (18, 995.9), (36, 1652.4), (72, 1853.2), (108, 1828.9),
             (144, 1775.0), (216, 1702.2)]  # fmt: skip


def test_the_spec_sdm91_benchmark_fits_as_the_r_package_does() -> None:
    """tests/summary.Rout.save: alpha 2.773e-02, beta 1.044e-04, gamma 9.000e+01."""
    usl = fit(SPECSDM91)
    assert usl.sigma == pytest.approx(2.773e-02, rel=5e-4)
    assert usl.kappa == pytest.approx(1.044e-04, rel=5e-4)
    assert usl.gamma == pytest.approx(90.00, rel=5e-4)
    # retrograde past its peak, sqrt((1 - sigma) / kappa): 96.5 users
    assert usl.peak == pytest.approx(math.sqrt((1 - 2.773e-02) / 1.044e-04), rel=1e-3)
    assert usl.capacity(216) < usl.capacity(96)


def test_the_first_six_raytracer_points_fit_as_the_r_package_does() -> None:
    """tests/confint.Rout.save, raytracer[1:6, ]: alpha 0.02444, beta 0.00163, gamma
    20.85605."""
    usl = fit(RAYTRACER[:6])
    assert usl.sigma == pytest.approx(0.02444, abs=5e-6)
    assert usl.kappa == pytest.approx(0.00163, abs=5e-6)
    assert usl.gamma == pytest.approx(20.85605, abs=5e-6)


def test_a_linear_system_has_no_contention_and_no_coherency_cost() -> None:
    usl = fit([(1, 40.0), (2, 80.0), (4, 160.0), (8, 320.0)])
    assert usl.sigma == pytest.approx(0, abs=1e-9) and usl.kappa == pytest.approx(0, abs=1e-12)
    assert usl.gamma == pytest.approx(40)
    assert usl.peak is None
    assert usl.replicas_for(150) == 4  # 160/s at 4, 120 at 3


@pytest.mark.parametrize(("sigma", "kappa"), [(0.03, 0.0005), (0.2, 0.0), (0.0, 0.01)])
def test_an_exact_curve_gives_back_its_parameters(sigma: float, kappa: float) -> None:
    gamma = 37.5

    def curve(n: int) -> float:
        return gamma * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))

    usl = fit([(n, curve(n)) for n in (1, 2, 4, 8)])
    assert usl.gamma == pytest.approx(gamma, rel=1e-9)
    assert usl.sigma == pytest.approx(sigma, abs=1e-9)
    assert usl.kappa == pytest.approx(kappa, abs=1e-10)


def test_two_replica_counts_determine_contention_alone() -> None:
    """1 replica 100/s, 2 replicas 190/s: 2 / (1 + sigma) = 1.9, sigma = 1/19, kappa held 0."""
    usl = fit([(1, 100.0), (2, 190.0)])
    assert usl.sigma == pytest.approx(1 / 19) and usl.kappa == 0
    assert usl.points == 2


def test_replicas_for_a_rate_past_the_peak_are_none() -> None:
    usl = fit(SPECSDM91)

    def published(n: int) -> float:  # the R package's curve, at its printed parameters
        return 90.0 * n / (1 + 2.773e-02 * (n - 1) + 1.044e-04 * n * (n - 1))

    fewest = next(n for n in range(1, 200) if published(n) >= 1800)
    assert usl.replicas_for(1800) == fewest
    assert published(97) < 2000 and usl.replicas_for(2000) is None  # beyond its peak


@pytest.mark.parametrize(
    "points", [[(1, 10.0)], [(1, 10.0), (1, 11.0)], [(0, 10.0), (2, 20.0)], [(1, 0.0), (2, 5.0)]]
)
def test_too_few_counts_or_impossible_points_are_refused(points: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError, match="two or more replica counts"):
        fit(points)
