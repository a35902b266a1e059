//! The seeded simulation behind `run --best` (crates/stats/src/best.rs; docs/dev/statistics.md
//! §9): how often the search names a right answer, how often it names one arm, and what it
//! spends, on a bench of a given size and with no bench limit.
//!
//!   cargo bench -p promptgauge-stats --bench best_arm            # both tables (tests/fixtures/best_arm_sim.txt)
//!   cargo bench -p promptgauge-stats --bench best_arm -- quick   # fewer runs, K ≤ 8
//!
//! Each setting: K arms, the best at 70% and the others `gap` points below it (all equal
//! when the gap is 0). Each case, every arm the search sends it to answers 0 or 1.
//! Independent arms draw alone; with shared difficulty a case's draw is shared by every arm
//! with probability 0.8 (they are right and wrong on the same cases, as the simulator's
//! case difficulty makes them). Right: the arm named (or every arm of the set named) is
//! within ε of the best; when the search ends without naming one — the bench ran out, or
//! the rest of it could not decide — the set it leaves holds the best or an arm within ε of
//! it.
//!
//! Table 1, a bench of N cases (the search knows N and may stop when the rest cannot
//! decide): right, named one arm, jobs as a share of the bench's K × N.
//!
//! Table 2, no bench limit, gaps just over ε: right (the guarantee at its edge), and jobs
//! against the fixed design with the same guarantee — every arm the same n cases, chosen
//! before any is seen, so it must hold for any gap: n = z²·Var(d)/ε², z the one-sided
//! (1 − confidence)/(K − 1) quantile (Bechhofer's indifference zone, Bonferroni across the
//! K − 1 other arms), Var(d) one case's difference's variance.

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

#[path = "best_arm/today.rs"]
mod today;

use promptgauge_stats::best::{BestArm, BestSettings, BestVerdict};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{ContinuousCDF, Normal};

const CONFIDENCE: f64 = 0.95;
const EPSILON: f64 = 0.02;
const BEST: f64 = 0.7;
/// Share of a case's draw arms with shared difficulty share.
const SHARED: f64 = 0.8;

#[derive(Clone, Copy)]
struct Setting {
    arms: usize,
    gap: f64,
    shared: bool,
    /// The bench's cases; `None`: no limit.
    cases: Option<u64>,
}

impl Setting {
    fn p(&self, arm: usize) -> f64 {
        if arm == 0 { BEST } else { BEST - self.gap }
    }

    /// One case's scores, every arm's (the search reads its contenders').
    fn case(&self, rng: &mut StdRng) -> Vec<Option<f64>> {
        let shared: f64 = rng.random();
        (0..self.arms)
            .map(|a| {
                let u = if self.shared && rng.random::<f64>() < SHARED {
                    shared
                } else {
                    rng.random()
                };
                Some(f64::from(u8::from(u < self.p(a))))
            })
            .collect()
    }

    /// Var(x_best − x_other) of one case's scores (exact for 0/1 draws).
    fn variance(&self) -> f64 {
        let (p, q) = (self.p(0), self.p(1));
        let both = if self.shared {
            // Shared with probability s²: right together at min(p, q); else independent.
            let s2 = SHARED * SHARED;
            s2 * p.min(q) + (1.0 - s2) * p * q
        } else {
            p * q
        };
        let e2 = p + q - 2.0 * both;
        e2 - (p - q) * (p - q)
    }

    fn fixed_cases(&self) -> u64 {
        let z = Normal::standard().inverse_cdf(1.0 - (1.0 - CONFIDENCE) / (self.arms - 1) as f64);
        (z * z * self.variance() / (EPSILON * EPSILON)).ceil() as u64
    }
}

/// One search's end.
#[derive(Default)]
struct Ended {
    right: bool,
    one: bool,
    jobs: u64,
}

/// The search today (issue 54's rules) or as it was before them.
enum Search {
    Now(BestArm),
    Before(today::BestArm),
}

impl Search {
    fn new(s: &Setting, before: bool) -> Search {
        if before {
            Search::Before(today::BestArm::new(today::BestSettings {
                arms: s.arms,
                epsilon: EPSILON,
                confidence: CONFIDENCE,
                gap_bounds: false,
            }))
        } else {
            Search::Now(BestArm::new(BestSettings {
                arms: s.arms,
                epsilon: EPSILON,
                confidence: CONFIDENCE,
                gap_bounds: false,
                units: s.cases,
            }))
        }
    }

    /// The arms the next case goes to.
    fn sent(&self) -> usize {
        match self {
            Search::Now(b) => b.contenders().len(),
            Search::Before(b) => b.remaining().len(),
        }
    }

    fn hear(&mut self, case: &[Option<f64>]) {
        match self {
            Search::Now(b) => {
                // Sent to the contenders only.
                let sent = b.contenders();
                let case: Vec<Option<f64>> = (0..case.len())
                    .map(|a| if sent.contains(&a) { case[a] } else { None })
                    .collect();
                drop(b.hear(&case));
            }
            Search::Before(b) => drop(b.hear(case)),
        }
    }

    /// Once it has ended: the arms it names (or leaves), and whether it named them.
    fn ended(&self, out_of_cases: bool) -> Option<(Vec<usize>, bool)> {
        match self {
            Search::Now(b) => match b.verdict() {
                BestVerdict::One(a) => Some((vec![a], true)),
                BestVerdict::WithinEpsilon(arms) => Some((arms, true)),
                BestVerdict::OneOf(arms) => Some((arms, false)),
                BestVerdict::Open => out_of_cases.then(|| (b.contenders(), false)),
            },
            Search::Before(b) => match b.verdict() {
                today::BestVerdict::One(a) => Some((vec![a], true)),
                today::BestVerdict::WithinEpsilon(arms) => Some((arms, true)),
                today::BestVerdict::Open => out_of_cases.then(|| (b.remaining(), false)),
            },
        }
    }
}

fn search(s: &Setting, before: bool, rng: &mut StdRng) -> Ended {
    let mut search = Search::new(s, before);
    let (mut jobs, mut offered) = (0, 0);
    let (arms, named) = loop {
        let out_of_cases = s.cases.is_some_and(|n| offered >= n);
        if let Some(end) = search.ended(out_of_cases) {
            break end;
        }
        jobs += search.sent() as u64;
        offered += 1;
        search.hear(&s.case(rng));
    };
    let good = |a: usize| s.p(a) >= s.p(0) - EPSILON - 1e-12;
    Ended {
        // Named: every arm named is within ε of the best; left: one of them is.
        right: if named {
            arms.iter().all(|&a| good(a))
        } else {
            arms.iter().any(|&a| good(a))
        },
        one: named && arms.len() == 1,
        jobs,
    }
}

/// Runs `runs` searches of `s` from `seed`: (share right, share naming one arm, mean jobs).
fn rows(s: &Setting, before: bool, runs: u32, seed: u64) -> (f64, f64, f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut right, mut one, mut jobs) = (0u32, 0u32, 0u64);
    for _ in 0..runs {
        let e = search(s, before, &mut rng);
        right += u32::from(e.right);
        one += u32::from(e.one);
        jobs += e.jobs;
    }
    let runs_f = f64::from(runs);
    (
        f64::from(right) / runs_f,
        f64::from(one) / runs_f,
        jobs as f64 / runs_f,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let only_edge = args.iter().any(|a| a == "edge");
    let mut worst: f64 = 1.0;
    println!(
        "best of K (crates/stats/src/best.rs): confidence {CONFIDENCE}, ε {EPSILON}, best arm at {BEST}; seed 2026 + row; before: the rules before issue 54, on the same seeds"
    );
    let mut row = 0u64;
    if !only_edge {
        let runs = if quick { 100 } else { 400 };
        println!();
        println!(
            "1. A bench of N cases: right, named one arm, jobs as a share of K × N ({runs} runs a row)"
        );
        println!(
            "{:>3} {:>5} {:>5} {:>6} | {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7}",
            "K", "N", "gap", "shared", "right", "one", "jobs", "before", "one", "jobs"
        );
        for arms in [4, 8, 16] {
            if quick && arms > 8 {
                continue;
            }
            for cases in [100, 300, 1000] {
                for gap in [0.15, 0.10, 0.05, 0.0] {
                    for shared in [false, true] {
                        let s = Setting {
                            arms,
                            gap,
                            shared,
                            cases: Some(cases),
                        };
                        let now = rows(&s, false, runs, 2026 + row);
                        let before = rows(&s, true, runs, 2026 + row);
                        row += 1;
                        worst = worst.min(now.0);
                        let kn = arms as f64 * cases as f64;
                        println!(
                            "{:>3} {:>5} {:>5.2} {:>6} | {:>6.1}% {:>6.1}% {:>6.1}% | {:>6.1}% {:>6.1}% {:>6.1}%",
                            arms,
                            cases,
                            gap,
                            if shared { "yes" } else { "no" },
                            100.0 * now.0,
                            100.0 * now.1,
                            100.0 * now.2 / kn,
                            100.0 * before.0,
                            100.0 * before.1,
                            100.0 * before.2 / kn,
                        );
                    }
                }
            }
        }
    }
    let runs = match (quick, only_edge) {
        (_, true) => 1000,
        (true, false) => 50,
        (false, false) => 200,
    };
    println!();
    println!(
        "2. No bench limit, the best just over ε ahead: right, and jobs against the fixed design ({runs} runs a row)"
    );
    println!(
        "{:>3} {:>6} {:>6} {:>7} {:>10} {:>10} {:>6}",
        "K", "gap", "shared", "right", "jobs", "fixed", "share"
    );
    for arms in [2, 4, 8, 16] {
        if (quick || only_edge) && arms > 8 {
            continue;
        }
        for gap in [0.021, 0.025] {
            for shared in [false, true] {
                let s = Setting {
                    arms,
                    gap,
                    shared,
                    cases: None,
                };
                let (right, _, jobs) = rows(&s, false, runs, 2026 + row);
                row += 1;
                worst = worst.min(right);
                let fixed = s.fixed_cases() * arms as u64;
                println!(
                    "{:>3} {:>6.3} {:>6} {:>6.1}% {:>10.0} {:>10} {:>5.0}%",
                    arms,
                    gap,
                    if shared { "yes" } else { "no" },
                    100.0 * right,
                    jobs,
                    fixed,
                    100.0 * jobs / fixed as f64
                );
            }
        }
    }
    println!();
    println!("lowest share right: {:.1}%", 100.0 * worst);
}
