//! Wall-clock of the heavier calls, for docs/dev/statistics.md:  cargo bench --bench stats_timing > tests/fixtures/timing.txt

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use promptgauge::stats::permutation::{sign_flip_interval, sign_flip_test};
use promptgauge::stats::power::{Assumptions, cases_needed, detectable_difference};
use std::time::Instant;

fn time<T: std::fmt::Debug>(label: &str, f: impl FnOnce() -> T) {
    let start = Instant::now();
    let out = f();
    println!(
        "{label:<58} {:>9.1} ms  {out:?}",
        start.elapsed().as_secs_f64() * 1e3
    );
}

fn main() {
    let binary =
        |n: usize| -> Vec<f64> { (0..n).map(|i| [1.0, -1.0, 0.0, 0.0, 1.0][i % 5]).collect() };
    let thirds = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| ((i * 7919) % 7) as f64 / 3.0 - 1.0)
            .map(|x: f64| x.clamp(-1.0, 1.0))
            .collect()
    };
    let reals = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| ((i as f64) * 0.7137).sin() * 0.5 + 0.03)
            .collect()
    };
    time("sign_flip_test, 100,000 binary cases", || {
        sign_flip_test(&binary(100_000)).map(|r| r.method)
    });
    time("sign_flip_test, 100,000 cases in thirds (k = 3)", || {
        sign_flip_test(&thirds(100_000)).map(|r| r.method)
    });
    time("sign_flip_test, 64 arbitrary reals (Monte Carlo)", || {
        sign_flip_test(&reals(64)).map(|r| r.method)
    });
    time(
        "sign_flip_test, 10,000 arbitrary reals (Monte Carlo)",
        || sign_flip_test(&reals(10_000)).map(|r| r.method),
    );
    time("sign_flip_interval, 64 binary cases", || {
        sign_flip_interval(&binary(64), 0.95).map(|r| (r.low, r.high))
    });
    time("sign_flip_interval, 2,000 binary cases", || {
        sign_flip_interval(&binary(2_000), 0.95).map(|r| (r.low, r.high))
    });
    time("sign_flip_interval, 300 arbitrary reals", || {
        sign_flip_interval(&reals(300), 0.95).map(|r| (r.low, r.high))
    });
    let a = Assumptions::new(0.7, 0.05);
    time("detectable_difference(n = 64)", || {
        detectable_difference(64, 0.8, &a)
    });
    time("detectable_difference(n = 2,000)", || {
        detectable_difference(2_000, 0.8, &a)
    });
    time("detectable_difference(n = 100,000)", || {
        detectable_difference(100_000, 0.8, &a)
    });
    time("cases_needed(10 points from 70%)", || {
        cases_needed(0.10, 0.8, &a)
    });
    time("cases_needed(2 points from 70%)", || {
        cases_needed(0.02, 0.8, &a)
    });
}
