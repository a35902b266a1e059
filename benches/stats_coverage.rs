//! Seeded simulation of the sign-flip interval (coverage against Newcombe's) and of the
//! Holm-consistent intervals. Output: tests/fixtures/coverage.txt.
//!
//!   cargo bench --bench stats_coverage > tests/fixtures/coverage.txt
//!
//! About 1–2 minutes on 2 cores (two worker threads).

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use promptgauge::stats::holm::{holm, holm_level};
use promptgauge::stats::paired::{PairedTable, exact_paired_interval};
use promptgauge::stats::permutation::{sign_flip_interval, sign_flip_test};
use promptgauge::stats::scores::paired_interval;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Newcombe's hybrid score interval for paired proportions (method 10), as
/// `stats::paired::newcombe_paired` in promptgauge (checked there against the published
/// example); copied so this crate stands alone.
fn newcombe(b: f64, c: f64, a: f64, d: f64, confidence: f64) -> (f64, f64, f64) {
    let z = statrs::distribution::ContinuousCDF::inverse_cdf(
        &statrs::distribution::Normal::standard(),
        1.0 - (1.0 - confidence) / 2.0,
    );
    let wilson = |x: f64, n: f64| {
        let p = x / n;
        let z2 = z * z;
        let denom = 1.0 + z2 / n;
        let center = (p + z2 / (2.0 * n)) / denom;
        let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
        ((center - half).max(0.0), (center + half).min(1.0))
    };
    let n = a + b + c + d;
    let (p1, p2) = ((a + b) / n, (a + c) / n);
    let (l1, u1) = wilson(a + b, n);
    let (l2, u2) = wilson(a + c, n);
    let margins = [a + b, c + d, a + c, b + d];
    let phi = if margins.contains(&0.0) {
        0.0
    } else {
        let det = a * d - b * c;
        let den = margins.iter().product::<f64>().sqrt();
        if det > n / 2.0 {
            (det - n / 2.0) / den
        } else if det >= 0.0 {
            0.0
        } else {
            det / den
        }
    };
    let est = p1 - p2;
    let below = (p1 - l1).powi(2) + (u2 - p2).powi(2) - 2.0 * phi * (p1 - l1) * (u2 - p2);
    let above = (p2 - l2).powi(2) + (u1 - p1).powi(2) - 2.0 * phi * (p2 - l2) * (u1 - p1);
    (
        est,
        (est - below.max(0.0).sqrt()).max(-1.0),
        (est + above.max(0.0).sqrt()).min(1.0),
    )
}

/// n paired 0/1 answers: baseline right with p0, each variant with p0 + its delta, phi
/// correlation rho with the baseline; the per-case differences of each variant.
fn draw(rng: &mut StdRng, n: usize, p0: f64, deltas: &[f64], rho: f64) -> Vec<Vec<f64>> {
    let baseline: Vec<bool> = (0..n).map(|_| rng.random::<f64>() < p0).collect();
    deltas
        .iter()
        .map(|&delta| {
            let p1 = p0 + delta;
            let both = p0 * p1 + rho * (p0 * (1.0 - p0) * p1 * (1.0 - p1)).sqrt();
            let (right_if_right, right_if_wrong) = (both / p0, (p1 - both) / (1.0 - p0));
            baseline
                .iter()
                .map(|&y| {
                    let x = rng.random::<f64>() < if y { right_if_right } else { right_if_wrong };
                    f64::from(u8::from(x)) - f64::from(u8::from(y))
                })
                .collect()
        })
        .collect()
}

#[derive(Default, Clone, Copy)]
struct Tally {
    runs: u64,
    covered: u64,
    width: f64,
    newcombe_covered: u64,
    newcombe_width: f64,
    mismatches: u64,
    /// The shipped interval (`exact_paired_interval`: Clopper–Pearson on the discordant
    /// split times Wilson on the discordance).
    exact_covered: u64,
    exact_width: f64,
    exact_mismatches: u64,
}

fn main() {
    println!("# benches/stats_coverage.rs; seeded; n = 64 binary paired cases; 95% intervals");
    println!(
        "## 1. Intervals for the paired difference (per setting: runs, coverage, mean width, and how often 'excludes 0' disagrees with exact McNemar at 5%)"
    );
    println!(
        "     signflip = inverting the sign-flip test on all cases (tied cases pin a bound to 0: it fails near small true differences)"
    );
    println!(
        "     exact    = shipped: Clopper-Pearson on the discordant split x Wilson on the discordance"
    );
    println!(
        "p0   delta  rho  runs  signflip_cov  signflip_width  newcombe_cov  newcombe_width  exact_cov  exact_width  signflip_mism  exact_mism"
    );
    let settings: Vec<(f64, f64, f64)> = [-0.05, -0.02, 0.0, 0.02, 0.05, 0.1, 0.2, 0.3]
        .iter()
        .flat_map(|&d| [(0.6, d, 0.0), (0.6, d, 0.3)])
        .collect();
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let mine: Vec<(usize, (f64, f64, f64))> = settings
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, _)| i % 2 == w)
                .collect();
            std::thread::spawn(move || {
                mine.into_iter()
                    .map(|(i, (p0, delta, rho))| {
                        (i, run_with_tables(1000 + i as u64, 1000, p0, delta, rho))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut results: Vec<(usize, Tally)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect();
    results.sort_by_key(|r| r.0);
    for (i, t) in results {
        let (p0, delta, rho) = settings[i];
        let r = t.runs as f64;
        println!(
            "{p0:.1}  {delta:+.2}  {rho:.1}  {:4}  {:.3}         {:.3}           {:.3}         {:.3}           {:.3}      {:.3}        {:4}           {}",
            t.runs,
            t.covered as f64 / r,
            t.width / r,
            t.newcombe_covered as f64 / r,
            t.newcombe_width / r,
            t.exact_covered as f64 / r,
            t.exact_width / r,
            t.mismatches,
            t.exact_mismatches
        );
    }

    println!();
    println!("## 2. Holm-consistent intervals, 3 variants vs one baseline, alpha = 0.05");
    println!(
        "deltas            runs  mismatches  per-comparison_cov  simultaneous_cov  mean_level  holm_rejections"
    );
    let holm_settings: [[f64; 3]; 4] = [
        [0.0, 0.0, 0.0],
        [0.2, 0.0, 0.0],
        [0.15, 0.15, 0.0],
        [0.25, 0.1, -0.1],
    ];
    let handles: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                holm_settings
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 2 == w)
                    .map(|(i, deltas)| (i, holm_setting(2000 + i as u64, 400, deltas)))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut results: Vec<(usize, [f64; 6])> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect();
    results.sort_by_key(|r| r.0);
    for (i, r) in results {
        println!(
            "{:<17} {:4}  {:10}  {:.3}               {:.3}             {:.4}      {:.3}",
            format!("{:?}", holm_settings[i]),
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5]
        );
    }

    println!();
    println!(
        "## 3. Case means of k repeats (answers to a case correlate), shipped paired_interval; mismatches = 'excludes 0' != sign-flip p < .05"
    );
    println!("p0   delta  k  runs  coverage  width  mismatches");
    let mean_settings: Vec<(f64, f64, usize)> = [-0.05, 0.0, 0.05, 0.1, 0.2]
        .iter()
        .flat_map(|&d| [(0.6, d, 3), (0.6, d, 5)])
        .collect();
    let handles: Vec<_> = (0..2)
        .map(|w| {
            let mine: Vec<(usize, (f64, f64, usize))> = mean_settings
                .iter()
                .copied()
                .enumerate()
                .filter(|(i, _)| i % 2 == w)
                .collect();
            std::thread::spawn(move || {
                mine.into_iter()
                    .map(|(i, (p0, d, k))| (i, run_case_means(3000 + i as u64, 400, p0, d, k)))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut results: Vec<(usize, (f64, f64, f64, u64))> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect();
    results.sort_by_key(|r| r.0);
    for (i, (cov, width, _, mism)) in results {
        let (p0, d, k) = mean_settings[i];
        println!("{p0:.1}  {d:+.2}  {k}  400   {cov:.3}     {width:.3}  {mism}");
    }
}

/// One setting of part 1: draw the 2×2 table (Newcombe needs the concordant split), test,
/// and tally the intervals.
fn run_with_tables(seed: u64, reps: usize, p0: f64, delta: f64, rho: f64) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = Tally::default();
    for _ in 0..reps {
        // Draw the four cells directly (multinomial by inversion), then the differences.
        let p1 = p0 + delta;
        let both = p0 * p1 + rho * (p0 * (1.0 - p0) * p1 * (1.0 - p1)).sqrt();
        let (pv, pb) = (p1 - both, p0 - both);
        let (mut a, mut b, mut c, mut dd) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..64 {
            let u = rng.random::<f64>();
            if u < both {
                a += 1.0
            } else if u < both + pv {
                b += 1.0
            } else if u < both + pv + pb {
                c += 1.0
            } else {
                dd += 1.0
            }
        }
        let mut d = vec![1.0; b as usize];
        d.extend(vec![-1.0; c as usize]);
        d.extend(vec![0.0; (a + dd) as usize]);
        let p = sign_flip_test(&d).map_or(1.0, |r| r.p_value);
        let Some(i) = sign_flip_interval(&d, 0.95) else {
            continue;
        };
        let (_, nl, nh) = newcombe(b, c, a, dd, 0.95);
        t.runs += 1;
        t.covered += u64::from(i.low <= delta && delta <= i.high);
        t.width += i.high - i.low;
        t.newcombe_covered += u64::from(nl <= delta && delta <= nh);
        t.newcombe_width += nh - nl;
        let excludes = i.low > 0.0 || i.high < 0.0;
        t.mismatches += u64::from(excludes != (p < 0.05));
        let table = PairedTable {
            both_right: a as u64,
            only_variant: b as u64,
            only_baseline: c as u64,
            both_wrong: dd as u64,
        };
        if let Some((_, el, eh)) = exact_paired_interval(&table, 0.95) {
            t.exact_covered += u64::from(el <= delta && delta <= eh);
            t.exact_width += eh - el;
            t.exact_mismatches += u64::from((el > 0.0 || eh < 0.0) != (p < 0.05));
        }
    }
    t
}

/// Part 3: case means of `k` repeats (each answer right with a per-case probability drawn
/// from Beta around the arm's accuracy), the shipped `paired_interval`.
fn run_case_means(seed: u64, reps: usize, p0: f64, delta: f64, k: usize) -> (f64, f64, f64, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut covered, mut width, mut mismatches) = (0.0, 0.0, 0);
    // The true mean difference, over the difficulty (clamping moves it off `delta`).
    let grid = 100_000;
    let truth = (0..grid)
        .map(|i| {
            let hard = (i as f64 + 0.5) / grid as f64 - 0.5;
            (p0 + delta + 0.6 * hard).clamp(0.0, 1.0) - (p0 + 0.6 * hard).clamp(0.0, 1.0)
        })
        .sum::<f64>()
        / grid as f64;
    for _ in 0..reps {
        let d: Vec<f64> = (0..64)
            .map(|_| {
                // A case's difficulty shifts both arms alike (answers to a case correlate).
                let hard = rng.random::<f64>() - 0.5;
                let pb = (p0 + 0.6 * hard).clamp(0.0, 1.0);
                let pv = (p0 + delta + 0.6 * hard).clamp(0.0, 1.0);
                let mean = |p: f64, rng: &mut StdRng| {
                    (0..k).filter(|_| rng.random::<f64>() < p).count() as f64 / k as f64
                };
                mean(pv, &mut rng) - mean(pb, &mut rng)
            })
            .collect();
        let Some((_, lo, hi)) = paired_interval(&d, 0.95) else {
            continue;
        };
        let p = sign_flip_test(&d).map_or(1.0, |r| r.p_value);
        covered += f64::from(u8::from(lo <= truth && truth <= hi));
        width += hi - lo;
        mismatches += u64::from((lo > 0.0 || hi < 0.0) != (p < 0.05));
    }
    (covered / reps as f64, width / reps as f64, 0.0, mismatches)
}

/// [runs, mismatches, per-comparison coverage, simultaneous coverage, mean level, share rejected]
fn holm_setting(seed: u64, reps: usize, deltas: &[f64; 3]) -> [f64; 6] {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut runs, mut mismatches, mut covered, mut all_covered, mut level, mut rejected) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for _ in 0..reps {
        let ds = draw(&mut rng, 64, 0.6, deltas, 0.0);
        // As the reports do: exact McNemar, Holm, each interval at its Holm level.
        let tables: Vec<PairedTable> = ds
            .iter()
            .map(|d| PairedTable {
                both_right: d.iter().filter(|&&x| x == 0.0).count() as u64,
                only_variant: d.iter().filter(|&&x| x > 0.0).count() as u64,
                only_baseline: d.iter().filter(|&&x| x < 0.0).count() as u64,
                both_wrong: 0,
            })
            .collect();
        let ps: Vec<f64> = ds
            .iter()
            .map(|d| sign_flip_test(d).map_or(1.0, |r| r.p_value))
            .collect();
        let adjusted = holm(&ps);
        runs += 1.0;
        let mut all = true;
        for (i, &delta) in deltas.iter().enumerate() {
            let rejected_here = adjusted[i] < 0.05;
            let Some(l) = holm_level(0.05, ps[i], adjusted[i], 3) else {
                continue;
            };
            let Some((_, lo, hi)) = exact_paired_interval(&tables[i], l) else {
                continue;
            };
            let excludes = lo > 0.0 || hi < 0.0;
            mismatches += f64::from(u8::from(excludes != rejected_here));
            let inside = lo <= delta && delta <= hi;
            covered += f64::from(u8::from(inside));
            all &= inside;
            level += l;
            rejected += f64::from(u8::from(rejected_here));
        }
        all_covered += f64::from(u8::from(all));
    }
    let m = 3.0 * runs;
    [
        runs,
        mismatches,
        covered / m,
        all_covered / runs,
        level / m,
        rejected / m,
    ]
}
