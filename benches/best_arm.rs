//! The seeded simulation behind `run --best` (crates/stats/src/best.rs; docs/dev/statistics.md §9):
//! how often the search picks a right answer, and what it costs against the fixed design
//! with the same guarantee.
//!
//!   cargo bench --bench best_arm                 # the whole table (tests/fixtures/best_arm_sim.txt)
//!   cargo bench --bench best_arm -- quick        # K ≤ 8, fewer runs
//!
//! Each setting: K arms, the best at `base` and the others `gap` points below it; each case
//! every arm still in play answers (0/1, or the mean of `repeats` answers). Correlated arms
//! share a case's draw with probability 0.8 (they are right and wrong on the same cases);
//! uncorrelated ones draw alone. The search runs until it stops or reaches its case limit
//! (three times the fixed design's cases). Right: the arm it names (or every arm of the set
//! it names) is within ε of the best — at the case limit, the set left holds the best.
//!
//! The fixed design with the same guarantee sends every arm the same n cases, chosen before
//! any is seen, so it must hold for any gap: n is the fewest with which picking the highest
//! mean is right with probability 1 − (1 − confidence) whenever the best is more than ε
//! ahead (Bechhofer's indifference zone, Bonferroni across the K − 1 other arms, normal
//! approximation): n = z²·Var(d)/ε², z the one-sided (1 − confidence)/(K − 1) quantile,
//! Var(d) the true variance of one case's difference. With all arms equal, the yardstick
//! is the fixed design that declares an arm within ε of the best, as the search does, with
//! probability 0.95: each of its K − 1 one-sided tests at (1 − confidence)/(2(K − 1)) (the
//! search's level), power 1 − 0.05/(K − 1) (Bonferroni across arms):
//! n = (z_a + z_b)²·Var(d)/ε². Its jobs: K·n·repeats.

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use promptgauge::stats::best::{BestArm, BestSettings, BestVerdict};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{ContinuousCDF, Normal};

const CONFIDENCE: f64 = 0.95;
const EPSILON: f64 = 0.02;
/// Share of a case's draw correlated arms share.
const SHARED: f64 = 0.8;

#[derive(Clone, Copy)]
struct Setting {
    arms: usize,
    gap: f64,
    base: f64,
    correlated: bool,
    repeats: u32,
}

impl Setting {
    fn p(&self, arm: usize) -> f64 {
        if arm == 0 {
            self.base
        } else {
            self.base - self.gap
        }
    }

    /// One case's scores, every arm's (the caller ignores those out of play).
    fn case(&self, rng: &mut StdRng) -> Vec<Option<f64>> {
        let mut sums = vec![0.0; self.arms];
        for _ in 0..self.repeats {
            let shared: f64 = rng.random();
            for (a, sum) in sums.iter_mut().enumerate() {
                let u = if self.correlated && rng.random::<f64>() < SHARED {
                    shared
                } else {
                    rng.random()
                };
                *sum += f64::from(u8::from(u < self.p(a)));
            }
        }
        sums.into_iter()
            .map(|s| Some(s / f64::from(self.repeats)))
            .collect()
    }

    /// Var(x_best − x_other) of one case's scores, by simulation.
    fn variance(&self, rng: &mut StdRng) -> f64 {
        let two = Setting { arms: 2, ..*self };
        let n = 200_000;
        let (mut s, mut s2) = (0.0, 0.0);
        for _ in 0..n {
            let x = two.case(rng);
            let d = x[0].unwrap_or(0.0) - x[1].unwrap_or(0.0);
            s += d;
            s2 += d * d;
        }
        let m = s / n as f64;
        s2 / n as f64 - m * m
    }

    /// The fixed design's cases per arm (see the top of this file).
    fn fixed_cases(&self, variance: f64) -> u64 {
        let normal = Normal::standard();
        let k = (self.arms - 1) as f64;
        let z = if self.gap == 0.0 {
            normal.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / (2.0 * k))
                + normal.inverse_cdf(1.0 - 0.05 / k)
        } else {
            normal.inverse_cdf(1.0 - (1.0 - CONFIDENCE) / k)
        };
        (z * z * variance / (EPSILON * EPSILON)).ceil() as u64
    }
}

/// One search: (right, jobs).
fn search(s: &Setting, limit: u64, rng: &mut StdRng) -> (bool, u64) {
    let mut best = BestArm::new(BestSettings {
        arms: s.arms,
        epsilon: EPSILON,
        confidence: CONFIDENCE,
        gap_bounds: false,
    });
    let mut jobs = 0;
    while best.verdict() == BestVerdict::Open && best.cases() < limit {
        jobs += best.remaining().len() as u64 * u64::from(s.repeats);
        best.hear(&s.case(rng));
    }
    let good = |a: usize| s.p(a) >= s.p(0) - EPSILON - 1e-12;
    let right = match best.verdict() {
        BestVerdict::One(a) => good(a),
        BestVerdict::WithinEpsilon(arms) => arms.iter().all(|&a| good(a)),
        BestVerdict::Open => best.remaining().contains(&0),
    };
    (right, jobs)
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let mut settings = Vec::new();
    for arms in [2, 4, 8, 16, 32] {
        if quick && arms > 8 {
            continue;
        }
        for gap in [0.0, 0.05, 0.1, 0.2] {
            for base in [0.5, 0.7, 0.9] {
                for correlated in [false, true] {
                    for repeats in [1, 3] {
                        // Large K: the 70% base, and repeats only correlated.
                        if arms >= 16 && (base != 0.7 || (repeats == 3 && !correlated)) {
                            continue;
                        }
                        settings.push(Setting {
                            arms,
                            gap,
                            base,
                            correlated,
                            repeats,
                        });
                    }
                }
            }
        }
    }
    println!(
        "best of K (crates/stats/src/best.rs): confidence {CONFIDENCE}, ε {EPSILON}; runs per row as shown; seed 2026 + row"
    );
    println!(
        "{:>3} {:>5} {:>5} {:>5} {:>3} {:>5} {:>8} {:>10} {:>10} {:>7}",
        "K", "gap", "base", "corr", "rep", "runs", "right", "jobs", "fixed", "share"
    );
    let mut worst: f64 = 1.0;
    for (row, s) in settings.iter().enumerate() {
        let mut rng = StdRng::seed_from_u64(2026 + row as u64);
        let variance = s.variance(&mut rng);
        let fixed_cases = s.fixed_cases(variance);
        let fixed_jobs = fixed_cases * s.arms as u64 * u64::from(s.repeats);
        let runs = match (quick, s.arms) {
            (true, _) => 100,
            (false, a) if a >= 16 => 100,
            _ => 400,
        };
        let (mut right, mut jobs) = (0u32, 0u64);
        for _ in 0..runs {
            let (r, j) = search(s, 3 * fixed_cases, &mut rng);
            right += u32::from(r);
            jobs += j;
        }
        let share_right = f64::from(right) / f64::from(runs);
        worst = worst.min(share_right);
        let mean_jobs = jobs as f64 / f64::from(runs);
        println!(
            "{:>3} {:>5.2} {:>5.2} {:>5} {:>3} {:>5} {:>7.1}% {:>10.0} {:>10} {:>6.0}%",
            s.arms,
            s.gap,
            s.base,
            if s.correlated { "yes" } else { "no" },
            s.repeats,
            runs,
            100.0 * share_right,
            mean_jobs,
            fixed_jobs,
            100.0 * mean_jobs / fixed_jobs as f64
        );
    }
    println!("lowest share right: {:.1}%", 100.0 * worst);
}
