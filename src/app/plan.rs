//! `plan`: how many cases a bench needs, or what its cases can detect, by the exact power
//! of the test the reports use (exact McNemar, Holm over the variants compared).

use std::path::{Path, PathBuf};

use super::{Exit, Failure};
use crate::cli::PowerArgs;
use promptgauge_report::Summary;
use promptgauge_stats::power::{self, Assumptions};
use promptgauge_suite::Bench;

/// Differences the default table sizes a bench for, in points.
const DIFFERENCES: [f64; 4] = [5.0, 10.0, 15.0, 20.0];

/// The newest complete run of `bench` under `reports` with graded answers, and its folder:
/// what `check` and `plan` size gates from.
pub(super) fn last_run(reports: &Path, bench: &str) -> Option<(Summary, PathBuf)> {
    let mut runs: Vec<(Summary, PathBuf)> = std::fs::read_dir(reports)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("summary.json")).ok()?;
            let s: Summary = serde_json::from_str(&text).ok()?;
            let graded = s.variants.iter().all(|v| v.n > 0);
            (s.complete && graded && s.run.bench == bench).then(|| (s, e.path()))
        })
        .collect();
    runs.sort_by(|a, b| a.0.run.started_at.cmp(&b.0.run.started_at));
    runs.pop()
}

/// Each gate the flags name, sized from the newest run of the bench under reports/
/// (docs/guide/ci.md, "Sizing a gate before it runs").
pub(super) fn say_gates(gates: &promptgauge_report::gates::Gates, bench: &Bench, compared: usize) {
    let last = last_run(Path::new("reports"), &bench.name);
    let sizing = promptgauge_report::gates::Sizing {
        cases: bench.cases.len() as u64,
        compared,
        confidence: bench.confidence,
        last: last
            .as_ref()
            .map(|(s, dir)| (s, promptgauge_report::shell_path(dir))),
    };
    for line in promptgauge_report::gates::sized(gates, &sizing) {
        out!("  gate {line}");
    }
}

/// The baseline of the newest complete run of `bench` under `reports` with graded answers
/// scored 0 or 1: what it measured, and its folder.
struct LastBaseline {
    /// The baseline variant's accuracy, and its interval.
    accuracy: f64,
    interval: (Option<f64>, Option<f64>),
    /// Its answers right, of those graded.
    correct: u64,
    n: u64,
    run: PathBuf,
}

fn last_baseline(reports: &Path, bench: &str) -> Option<LastBaseline> {
    let mut runs: Vec<(String, LastBaseline)> = std::fs::read_dir(reports)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path().join("summary.json")).ok()?;
            let s: Summary = serde_json::from_str(&text).ok()?;
            let v = s.variants.first().filter(|v| v.n > 0)?;
            let accuracy = v.accuracy?;
            if !s.complete || s.run.bench != bench {
                return None;
            }
            let last = LastBaseline {
                accuracy,
                interval: (v.ci_low, v.ci_high),
                correct: v.correct,
                n: v.n,
                run: e.path(),
            };
            Some((s.run.started_at.clone(), last))
        })
        .collect();
    runs.sort_by(|a, b| a.0.cmp(&b.0));
    runs.pop().map(|(_, last)| last)
}

/// `plan`: sizes a bench; sends nothing.
pub fn plan(args: &PowerArgs) -> Result<Exit, Failure> {
    let path = super::settings::bench_file(args.bench.as_deref())?;
    let bench = Bench::load(&path)?;
    // A bench whose scorers cannot be built is not planned for.
    let scorers = promptgauge_grade::scorers_for(&bench)?;
    let endpoints = bench.endpoints.len().max(1);
    let comparisons = args.comparisons.map_or(
        promptgauge_suite::plan::largest_family(bench.variants.len(), endpoints).max(1),
        |m| m as usize,
    );
    let (baseline, source) = baseline_accuracy(args.baseline_accuracy, &bench.name);
    let mut a = Assumptions::new(baseline, 1.0 - bench.confidence);
    a.comparisons = comparisons;
    a.correlation = args.correlation;
    if power::power(10, 0.0, &a).is_none() {
        return Err(crate::error::UsageError::with_fix(
            format!(
                "--correlation {} is impossible at a baseline accuracy of {:.0}%",
                args.correlation,
                baseline * 100.0
            ),
            "use a correlation between 0 and 0.5",
        )
        .into());
    }
    if let Some(arms) = args.best {
        let job = job_ceiling(&bench, &scorers);
        say_best(&bench, arms as usize, baseline, &source, job, args)?;
        return Ok(Exit::Success);
    }
    let conf = (bench.confidence * 100.0).round();
    let power_pct = (args.power * 100.0).round();
    let family = family_line(bench.variants.len(), endpoints, comparisons);
    out!(
        "plan for {}: {family}, {conf}% confidence, {power_pct}% power",
        bench.name
    );
    out!("  baseline accuracy {:.1}% ({source})", baseline * 100.0);
    out!(
        "  errors {}; variants that fail on the same cases need fewer cases, variants that fail on different cases more",
        if args.correlation == 0.0 {
            "assumed independent (--correlation 0)".to_string()
        } else {
            format!("correlated at phi = {}", args.correlation)
        }
    );
    say_cases_needed(args, &a, bench.cases.len() as u64);
    say_gates(&args.gates.gates(), &bench, comparisons);
    if bench.repeats > 1 {
        out!(
            "  repeats ({}): these figures count cases, one answer each. Repeats add information only where answers to the same case vary (a run's reports give the detectable difference at the agreement they measure); they never stand in for cases.",
            bench.repeats
        );
    }
    Ok(Exit::Success)
}

/// The baseline's accuracy the plan sizes at, and where it comes from: `--baseline-accuracy`,
/// else the latest run of the bench under `reports/`, else 50% (which needs the most cases).
fn baseline_accuracy(given: Option<f64>, bench: &str) -> (f64, String) {
    match given {
    Some(p) => (p, "as given".to_string()),
    None => match last_baseline(Path::new("reports"), bench) {
        Some(last) => from_last_run(&last),
        None => (
            0.5,
            "assumed, which needs the most cases: no earlier run of this bench under reports/; set --baseline-accuracy P"
                .to_string(),
        ),
    },
}
}

/// The accuracy to size at from the last run, and where it comes from. A baseline that got
/// every answer right (or none) measured no rate of failure to size at: the plan takes the
/// end of its interval nearest 50% (more cases, not fewer), and says what such a bench can
/// and cannot show.
fn from_last_run(last: &LastBaseline) -> (f64, String) {
    let run = last.run.display();
    let (all, nearer) = match last.accuracy {
        a if a >= 1.0 => ("every answer right", last.interval.0),
        a if a <= 0.0 => ("no answer right", last.interval.1),
        a => return (a, format!("the baseline's accuracy in {run}")),
    };
    let score = format!("{} of {}", last.correct, last.n);
    match nearer.filter(|p| *p > 0.0 && *p < 1.0) {
        Some(p) => (
            p,
            format!(
                "the baseline got {all} in {run} ({score}), which measures no rate to size at: sized at the end of its interval nearest 50%; on this bench a variant can only show itself {}; harder (or easier) cases show both ways, or set --baseline-accuracy P",
                if last.accuracy >= 1.0 {
                    "worse"
                } else {
                    "better"
                }
            ),
        ),
        None => (
            0.5,
            format!(
                "assumed, which needs the most cases: the baseline got {all} in {run} ({score}); set --baseline-accuracy P"
            ),
        ),
    }
}

/// What the plan compares: the variants (at each endpoint), and how many of them.
fn family_line(variants: usize, endpoints: usize, comparisons: usize) -> String {
    match (variants, comparisons) {
        _ if endpoints > 1 => format!(
            "{} × {}, each question's family of up to {comparisons} compared (Holm within each)",
            super::count(variants as u64, "variant", "variants"),
            super::count(endpoints as u64, "endpoint", "endpoints"),
        ),
        (1, 1) => "1 variant: sizing one comparison with it".to_string(),
        (_, 1) => format!("{variants} variants, one compared with the baseline"),
        (n, m) => format!("{n} variants, {m} compared with the baseline (Holm over {m})"),
    }
}

/// The cases needed: to detect `--detect`'s difference, what `--cases` detects, or a table
/// of differences and what the bench's `cases` detect.
fn say_cases_needed(args: &PowerArgs, a: &Assumptions, cases: u64) {
    let need = |points: f64| match power::cases_either_way(points / 100.0, args.power, a) {
        Some(n) => format!("{n} cases"),
        None => "out of reach (more than 1,000,000 cases, or past 0% or 100%)".to_string(),
    };
    match (args.detect, args.cases) {
        (Some(points), _) => {
            out!(
                "  to detect a difference of {points} points: {}",
                need(points)
            );
        }
        (None, Some(n)) => out!("  {}", detectable_line(n, args.power, a)),
        (None, None) => {
            out!("  difference   cases needed");
            for points in DIFFERENCES {
                out!("  {:>3} points   {}", points, need(points));
            }
            out!(
                "  the bench has {} cases: {}",
                cases,
                detectable_line(cases, args.power, a)
            );
        }
    }
}

fn detectable_line(cases: u64, target: f64, a: &Assumptions) -> String {
    match power::detectable_difference(cases, target, a) {
        Some(d) => format!(
            "{cases} cases detect a difference of about {:.1} points",
            d * 100.0
        ),
        None => format!("{cases} cases cannot reliably detect any difference"),
    }
}

/// `plan --best K`: the jobs `run --best` takes over K arms — 200 seeded searches on 0/1
/// answers, the best `--detect` points (10) ahead of K − 1 equal others at the baseline
/// accuracy, independent errors (correlated arms take fewer) — and the fixed design with
/// the same guarantee (z²·Var(d)/ε² cases an arm, docs/dev/statistics.md §9).
fn say_best(
    bench: &Bench,
    arms: usize,
    baseline: f64,
    source: &str,
    job: JobCost,
    args: &PowerArgs,
) -> Result<(), Failure> {
    use promptgauge_stats::best::BestSettings;
    let points = args.epsilon.or(bench.best_epsilon).unwrap_or(2.0);
    if !(points > 0.0 && points < 50.0) {
        return Err(crate::error::UsageError::with_fix(
            format!("plan --best sizes a search for an ε above 0 and below 50 points, and ε is {points}: at 0 no fixed design can promise the best"),
            "--epsilon 2 (two points: an arm within 2 points of the best counts as the best)",
        )
        .into());
    }
    let (gap, epsilon) = (args.detect.unwrap_or(10.0) / 100.0, points / 100.0);
    let best_p = (baseline + gap).min(1.0);
    let others = best_p - gap;
    if baseline + gap > 1.0 {
        out!(
            "  note: the best cannot be {:.0} points above {:.1}%: sized with the best at 100% and the others at {:.1}%",
            gap * 100.0,
            baseline * 100.0,
            others * 100.0
        );
    }
    let odds = SimulatedArms {
        arms,
        best: best_p,
        others,
    };
    let search = BestSettings {
        arms,
        epsilon,
        confidence: bench.confidence,
        gap_bounds: false,
        units: None,
    };
    let mut jobs: Vec<u64> = (0..200u64)
        .map(|seed| odds.search(search, seed, 1_000_000).1 * u64::from(bench.repeats.max(1)))
        .collect();
    jobs.sort_unstable();
    let mean = jobs.iter().sum::<u64>() as f64 / jobs.len() as f64;
    let p90 = jobs[jobs.len() * 9 / 10];
    let variance = best_p * (1.0 - best_p) + others * (1.0 - others);
    let fixed_cases =
        promptgauge_stats::best::fixed_design_cases(arms, bench.confidence, variance, epsilon);
    let fixed = fixed_cases * arms as u64 * u64::from(bench.repeats.max(1));
    out!(
        "plan for {}: best of {arms} (run --best), ε {} points, {:.0}% confidence",
        bench.name,
        points,
        bench.confidence * 100.0
    );
    out!("  baseline accuracy {:.1}% ({source})", baseline * 100.0);
    out!(
        "  with the best {:.0} points ahead of the others (--detect), independent errors: about {:.0} jobs on average, {p90} in 9 searches of 10 (200 seeded simulations)",
        gap * 100.0,
        mean
    );
    out!(
        "  the fixed design with the same guarantee: {fixed} jobs ({fixed_cases} cases an arm): the search's average is {:.0}% of it",
        100.0 * mean / fixed as f64
    );
    out!("  {}", job.dollars(mean, fixed));
    say_room(bench, jobs[jobs.len() / 2] / arms as u64);
    say_on_bench(bench, arms, baseline, epsilon);
    Ok(())
}

/// `plan --best` on the bench the user has: for its cases (or groups), how often a search
/// names one arm and what share of the bench's jobs it sends, with the best 15, 10 or 5
/// points ahead and with every arm equal — 100 seeded searches each, independent 0/1
/// answers at the baseline accuracy, the search told the bench's size (so it stops when the
/// rest cannot decide).
fn say_on_bench(bench: &Bench, arms: usize, baseline: f64, epsilon: f64) {
    use promptgauge_stats::best::{BestSettings, BestVerdict};
    let units = promptgauge_suite::plan::units_of(bench.cases.iter().map(|c| c.group.as_deref()));
    let n = units
        .iter()
        .max()
        .map_or(bench.cases.len() as u64, |&last| u64::from(last) + 1);
    if n == 0 || arms < 2 {
        return;
    }
    let unit = if units.is_empty() { "cases" } else { "groups" };
    out!(
        "  on this bench's {n} {unit} (100 seeded searches a line, independent answers, the others at {:.1}%):",
        baseline * 100.0
    );
    for points in [15.0, 10.0, 5.0, 0.0] {
        let best_p = (baseline + points / 100.0).min(1.0);
        let (mut one, mut sent) = (0u32, 0u64);
        let odds = SimulatedArms {
            arms,
            best: best_p,
            others: baseline,
        };
        let search = BestSettings {
            arms,
            epsilon,
            confidence: bench.confidence,
            gap_bounds: false,
            units: Some(n),
        };
        for seed in 0..100u64 {
            let (verdict, jobs) = odds.search(search, seed, n);
            sent += jobs;
            one += u32::from(match verdict {
                BestVerdict::One(_) => true,
                BestVerdict::WithinEpsilon(named) => named.len() == 1,
                BestVerdict::OneOf(_) | BestVerdict::Open => false,
            });
        }
        let share = 100.0 * sent as f64 / (100.0 * (arms as u64 * n) as f64);
        let ahead = if points > 0.0 {
            format!("the best {points:.0} points ahead")
        } else {
            "every arm equal".to_string()
        };
        out!(
            "    {ahead}: one arm named in {one}% of searches, {share:.0}% of the bench's jobs sent"
        );
    }
}

/// Whether the bench holds the units (cases, or groups when its cases carry `group:`) a
/// typical search takes: `needed`.
fn say_room(bench: &Bench, needed: u64) {
    // Grouped cases are searched by group: the figures count units, each a group.
    let units = promptgauge_suite::plan::units_of(bench.cases.iter().map(|c| c.group.as_deref()));
    let (have, unit) = match units.iter().max() {
        Some(&last) => {
            out!(
                "  the cases carry group:, and a search counts groups: read the figures as groups (a group's mean varies less than a case's, so it may need fewer), each group's cases sent together"
            );
            (u64::from(last) + 1, "groups")
        }
        None => (bench.cases.len() as u64, "cases"),
    };
    if have < needed {
        out!(
            "  the bench has {have} {unit}: a search that needs more ends with \"the best is one of …\"; add cases, or a larger --epsilon"
        );
    }
}

/// Arms answering 0/1 independently for `plan --best`'s simulations: arm 0 right with
/// probability `best`, every other with `others`.
struct SimulatedArms {
    arms: usize,
    best: f64,
    others: f64,
}

impl SimulatedArms {
    /// One seeded search, each case sent to its contenders, until it ends or `cases` were
    /// offered: its verdict and the jobs it sent (one a contender a case).
    fn search(
        &self,
        settings: promptgauge_stats::best::BestSettings,
        seed: u64,
        cases: u64,
    ) -> (promptgauge_stats::best::BestVerdict, u64) {
        use promptgauge_stats::best::{BestArm, BestVerdict};
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut search = BestArm::new(settings);
        let (mut offered, mut sent) = (0, 0u64);
        while search.verdict() == BestVerdict::Open && offered < cases {
            let to = search.contenders();
            sent += to.len() as u64;
            let case: Vec<Option<f64>> = (0..self.arms)
                .map(|a| {
                    let p = if a == 0 { self.best } else { self.others };
                    let x = f64::from(u8::from(rng.random::<f64>() < p));
                    to.contains(&a).then_some(x)
                })
                .collect();
            search.hear(&case);
            offered += 1;
        }
        (search.verdict(), sent)
    }
}

/// What one job may cost at most, as `plan --best` prices jobs: the mean of the bench's
/// jobs' ceilings (prompt as rendered, completion at `max_tokens`, the judge's calls).
#[derive(Debug, Clone, Copy)]
enum JobCost {
    /// At most this many dollars a job, on average; `true` when a judge scores and has no
    /// price (its calls are left out).
    AtMost(f64, bool),
    /// The bench has no price.
    Unpriced,
    /// A variant has no `max_tokens`: the completion has no ceiling.
    Unbounded(f64),
}

impl JobCost {
    /// The line that prices the search's `mean` jobs and the fixed design's `fixed`.
    fn dollars(self, mean: f64, fixed: u64) -> String {
        match self {
            JobCost::AtMost(each, judge_unpriced) => format!(
                "in dollars, at the bench's price (prompts as rendered, completions at max_tokens, {}): at most about {} for the search on average, {} for the fixed design",
                if judge_unpriced {
                    "the judge's calls left out: the judge has no price"
                } else {
                    "the judge's calls"
                },
                promptgauge_report::usd(Some(each * mean)),
                promptgauge_report::usd(Some(each * fixed as f64))
            ),
            JobCost::Unbounded(each) => format!(
                "in dollars: a variant has no max_tokens, so only the prompts are priced: about {} for the search's prompts, {} for the fixed design's (set max_tokens to bound the rest)",
                promptgauge_report::usd(Some(each * mean)),
                promptgauge_report::usd(Some(each * fixed as f64))
            ),
            JobCost::Unpriced => "in dollars: the bench has no price (add `price: { input_per_mtok: …, output_per_mtok: … }` to see what the search and the fixed design cost)".to_string(),
        }
    }
}

/// The jobs `plan --best` prices at most: a search's cost depends on how many cases it
/// takes, not which, so an even sample of the bench's jobs stands for them all.
const PRICED_JOBS: usize = 1_000;

/// What a job of `bench` costs at most, on average over its jobs (an even sample of them).
fn job_ceiling(bench: &Bench, scorers: &promptgauge_grade::Scorers) -> JobCost {
    use promptgauge_runner::budget::{Prices, UNBOUNDED_JUDGE_COMPLETION};
    let Some(price) = bench.price.clone() else {
        return JobCost::Unpriced;
    };
    let bounded = (0..bench.variants.len()).all(|v| bench.max_tokens(v).is_some());
    let prices = Prices {
        lanes: vec![Some(price.clone())],
        judge: bench.judge.as_ref().and_then(|j| j.price.clone()),
        judge_completion: UNBOUNDED_JUDGE_COMPLETION,
    };
    let variants: Vec<usize> = (0..bench.variants.len()).collect();
    let jobs = promptgauge_suite::Plan::new(bench.cases.len(), &variants, 1).jobs;
    let step = jobs.len().div_ceil(PRICED_JOBS).max(1);
    let (mut sum, mut n) = (0.0, 0usize);
    for job in jobs.iter().step_by(step) {
        let Ok(messages) = bench.render_job(job) else {
            continue;
        };
        sum += if bounded {
            prices.ceiling(bench, job, &messages, scorers[job.case].as_ref(), false)
        } else {
            price.cost(&promptgauge_client::Usage {
                prompt_tokens: promptgauge_suite::prompt_tokens(&messages),
                ..Default::default()
            })
        };
        n += 1;
    }
    let each = if n == 0 { 0.0 } else { sum / n as f64 };
    if bounded {
        let judged = scorers
            .iter()
            .zip(&bench.cases)
            .any(|(s, case)| s.calls(case, &[], 0).count > 0);
        JobCost::AtMost(each, judged && prices.judge.is_none())
    } else {
        JobCost::Unbounded(each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptgauge_stats::holm::holm;
    use promptgauge_stats::permutation::sign_flip_test;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// The share of seeded runs in which variant 0 (right with p0 + delta) is called better
    /// than the baseline (right with p0), with `nulls` more variants like the baseline
    /// compared alongside: the reports' verdict (the sign-flip test on the per-case
    /// differences, Holm over the variants, better when the adjusted p < 5% and the
    /// difference is positive).
    fn simulated_power(cases: u64, p0: f64, delta: f64, nulls: usize, runs: usize) -> f64 {
        let mut rng = StdRng::seed_from_u64(20261130);
        let mut better = 0;
        for _ in 0..runs {
            let mut right = |p: f64| f64::from(u8::from(rng.random::<f64>() < p));
            let base: Vec<f64> = (0..cases).map(|_| right(p0)).collect();
            let arms: Vec<Vec<f64>> = std::iter::once(p0 + delta)
                .chain(std::iter::repeat_n(p0, nulls))
                .map(|p| base.iter().map(|&b| right(p) - b).collect())
                .collect();
            let ps: Vec<f64> = arms
                .iter()
                .map(|d| sign_flip_test(d).unwrap().p_value)
                .collect();
            let gain = arms[0].iter().sum::<f64>() > 0.0;
            better += usize::from(gain && holm(&ps)[0] < 0.05);
        }
        better as f64 / runs as f64
    }

    #[test]
    fn the_planned_cases_reach_the_planned_power_in_simulation() {
        // 10 points up from 70%, Holm over three variants.
        let mut a = Assumptions::new(0.7, 0.05);
        a.comparisons = 3;
        let n = power::cases_needed(0.10, 0.8, &a).unwrap();
        let simulated = simulated_power(n, 0.7, 0.10, 2, 2000);
        assert!((simulated - 0.8).abs() <= 0.03, "{n} cases: {simulated}");
        // And the inverse: what 150 cases detect from ½, with one comparison.
        let a = Assumptions::new(0.5, 0.05);
        let d = power::detectable_difference(150, 0.8, &a).unwrap();
        let simulated = simulated_power(150, 0.5, d, 0, 2000);
        assert!((simulated - 0.8).abs() <= 0.03, "{d}: {simulated}");
    }

    #[test]
    fn with_correlated_errors_the_cases_detect_a_difference() {
        let mut a = Assumptions::new(0.7, 0.05);
        a.correlation = 0.3;
        let line = detectable_line(200, 0.8, &a);
        assert!(
            line.starts_with("200 cases detect a difference of about 11."),
            "{line}"
        );
    }

    #[test]
    fn either_way_takes_the_harder_direction() {
        let a = Assumptions::new(0.8, 0.05);
        let n = power::cases_either_way(0.1, 0.8, &a).unwrap();
        assert_eq!(n, power::cases_needed(-0.1, 0.8, &a).unwrap());
        assert!(n > power::cases_needed(0.1, 0.8, &a).unwrap());
        // 95% + 10 is past 100%: only the drop is possible.
        let a = Assumptions::new(0.95, 0.05);
        assert_eq!(
            power::cases_either_way(0.1, 0.8, &a),
            power::cases_needed(-0.1, 0.8, &a)
        );
    }
}
