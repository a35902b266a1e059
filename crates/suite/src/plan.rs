//! The job plan: every (case, variant, repeat), ordered so a partial run stays paired.

use serde::{Deserialize, Serialize};

/// One logical chat request, however many attempts it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Position in the plan.
    pub index: usize,
    pub case: usize,
    pub variant: usize,
    /// Which of the run's endpoints answers it (its position; 0 when the run has one). A
    /// `u16` keeps a job in 32 bytes: a plan of 200,000 jobs is held more than once.
    #[serde(default)]
    pub endpoint: u16,
    pub repeat: u32,
}

/// What a (variant, endpoint) cell of a run is called wherever one name must say which: the
/// variant's own name when the run has one endpoint, else `ENDPOINT/VARIANT` (endpoint names
/// hold no `/`).
pub fn arm_name(variant: &str, endpoint: Option<&str>) -> String {
    match endpoint {
        Some(e) => format!("{e}/{variant}"),
        None => variant.to_string(),
    }
}

/// The largest family of comparisons a verdict is adjusted in (Holm's): every variant
/// against the baseline, or in a run of several endpoints the larger axis — the variants at
/// one endpoint, or the endpoints for one variant (docs/dev/statistics.md §2a).
pub fn largest_family(variants: usize, endpoints: usize) -> usize {
    variants.max(endpoints).saturating_sub(1)
}

/// A run's arms: every (variant, endpoint) it measures, named by [`arm_name`], endpoint by
/// endpoint (the baseline endpoint's variants first), the baseline variant first in each.
/// With no endpoints named (one endpoint), the variants themselves.
pub fn arm_names(variants: &[String], endpoints: &[String]) -> Vec<String> {
    if endpoints.is_empty() {
        return variants.to_vec();
    }
    endpoints
        .iter()
        .flat_map(|e| variants.iter().map(move |v| arm_name(v, Some(e))))
        .collect()
}

impl Job {
    /// The job's arm: its position in [`arm_names`], when its variant is at
    /// `variant_position` among the `variants` the run selected.
    pub fn arm(&self, variant_position: usize, variants: usize) -> usize {
        usize::from(self.endpoint) * variants + variant_position
    }
}

/// Every job of a run, in dispatch order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub jobs: Vec<Job>,
}

/// `--shard i/n`: this process runs the cases whose position modulo n is i − 1, every
/// variant and repeat of each, so each shard holds whole pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawShard")]
pub struct Shard {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

/// A shard as read from `run.json`, checked like the flag: 1 ≤ index ≤ count.
#[derive(Deserialize)]
struct RawShard {
    index: u32,
    count: u32,
}

/// Not a shard: `i/n` with 1 ≤ i ≤ n.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a shard; write i/n with 1 ≤ i ≤ n, e.g. 2/4")]
pub(crate) struct NotAShard {
    text: String,
}

impl TryFrom<RawShard> for Shard {
    type Error = NotAShard;

    fn try_from(raw: RawShard) -> Result<Shard, NotAShard> {
        let text = format!("{}/{}", raw.index, raw.count);
        text.parse().map_err(|_: String| NotAShard { text })
    }
}

impl Shard {
    /// Whether this shard runs the job.
    pub fn holds(&self, job: &Job) -> bool {
        job.case as u64 % u64::from(self.count) == u64::from(self.index - 1)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            NotAShard {
                text: s.to_string(),
            }
            .to_string()
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// `run --until-decided`: the order cases run in and when the run stops, as recorded in
/// `run.json` so `report` and `--resume` decide the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialPlan {
    /// Seeds the random case order.
    pub seed: u64,
    /// The smallest difference worth detecting, as a share.
    pub detect: f64,
    pub power: f64,
    pub min_cases: u64,
    /// Cases in the plan: the run stops undecided after them.
    pub max_cases: u64,
    /// Variants compared with the baseline (the error budget is split over them).
    pub comparisons: usize,
    /// Every score is 0/1 with one answer per case (else case means are tested).
    pub binary: bool,
    /// The cases the fixed design needs for the same detect and power (exact McNemar,
    /// Holm over the comparisons, baseline at ½): what the savings are counted against.
    pub fixed_design_cases: Option<u64>,
    /// `--max-drop`, as a share: each variant also runs the sequential non-inferiority
    /// check and stops once both it and its difference are settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drop: Option<f64>,
    /// `--best`: the cases find the best of the arms instead of testing each against the
    /// baseline (docs/guide/best.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<BestPlan>,
    /// `--best` over cases that carry `group:`: each case's unit, in bench order (the cases
    /// of a group share one; a case without a group is a unit of its own). The order draws
    /// units, and the search hears a unit once all its cases are in; empty when the case
    /// is the unit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<u32>,
}

/// `--best`: how close to the best counts as the best.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestPlan {
    /// As a share (0.02 is 2 points).
    pub epsilon: f64,
    /// The cases the workers may send ahead of the search, as the run's first start set
    /// it: a change of which arms a case goes to applies from the first case no worker may
    /// have taken yet, so a resume and a replay of the journal need the same number.
    /// Absent (records before it, shards merged): 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ahead: Option<usize>,
}

impl SequentialPlan {
    /// `--until-decided --batch` (or `--best --batch`): the cases of one wave. Each wave is a provider batch
    /// that may take hours, so waves are few: a fifth of the cases the fixed design would
    /// need (at least `min_cases`, at most the plan's), so a clear difference stops after a
    /// wave or two and a run that goes to the fixed design's size takes about five
    /// (docs/guide/batch.md, "Waves").
    pub fn wave_cases(&self) -> usize {
        // `--best`: a tenth of the cases (20 to 200): a clear loser goes out after the
        // first wave or two, and each later wave leaves it out.
        if self.best.is_some() {
            return (self.max_cases / 10)
                .clamp(20, 200)
                .min(self.max_cases)
                .max(1) as usize;
        }
        let fixed = self.fixed_design_cases.unwrap_or(self.max_cases);
        fixed
            .div_ceil(5)
            .max(self.min_cases)
            .min(self.max_cases)
            .max(1) as usize
    }
}

impl SequentialPlan {
    /// The plan's cases (bench positions) in the order they are sent: a seeded random
    /// order, cut at `max_cases`. With `units`, the units are drawn in that order, each
    /// unit's cases together in bench order, and the cut falls between units (the first is
    /// always kept).
    pub fn order(&self, cases: usize) -> Vec<usize> {
        let max = usize::try_from(self.max_cases).unwrap_or(usize::MAX);
        if self.units.len() != cases {
            let mut order = case_order(cases, self.seed);
            order.truncate(max);
            return order;
        }
        let count = self.units.iter().max().map_or(0, |&u| u as usize + 1);
        let mut members = vec![Vec::new(); count];
        for (case, &unit) in self.units.iter().enumerate() {
            members[unit as usize].push(case);
        }
        let mut order = Vec::with_capacity(cases);
        for unit in case_order(count, self.seed) {
            if !order.is_empty() && order.len() + members[unit].len() > max {
                break;
            }
            order.extend_from_slice(&members[unit]);
        }
        order
    }
}

impl SequentialPlan {
    /// The cases a run of this plan sends, in order: [`SequentialPlan::order`], or with
    /// `--shard i/n` under `--best`, its i-th block of units (the order cut into n runs of
    /// whole units): shards 1 to k merged are the order's first k blocks, so a merge of
    /// the first shards searches a prefix of the order, and a later shard goes on from it.
    pub fn sent(&self, cases: usize, shard: Option<Shard>) -> Vec<usize> {
        let order = self.order(cases);
        let Some(shard) = shard.filter(|_| self.best.is_some()) else {
            return order;
        };
        let starts = self.unit_starts(&order, cases);
        let units = starts.len() - 1;
        let (i, n) = (shard.index as usize, shard.count as usize);
        let block = starts[(i - 1) * units / n]..starts[i * units / n];
        order[block].to_vec()
    }

    /// Where each unit starts in `order` (this plan's [`SequentialPlan::order`] of `cases`),
    /// and its end after the last: every position when the case is the unit.
    pub fn unit_starts(&self, order: &[usize], cases: usize) -> Vec<usize> {
        let grouped = self.units.len() == cases;
        (0..order.len())
            .filter(|&at| !grouped || at == 0 || self.units[order[at]] != self.units[order[at - 1]])
            .chain([order.len()])
            .collect()
    }

    /// Whether `--shard` splits this plan into blocks of its order ([`SequentialPlan::sent`])
    /// rather than by case position.
    pub fn shards_in_blocks(&self) -> bool {
        self.best.is_some()
    }
}

/// The units of `--best` over cases with `group:` ([`SequentialPlan::units`]): numbered in
/// order of first appearance; empty when no case has a group.
pub fn units_of<'a>(groups: impl Iterator<Item = Option<&'a str>> + Clone) -> Vec<u32> {
    if groups.clone().all(|g| g.is_none()) {
        return Vec::new();
    }
    let mut named = std::collections::HashMap::new();
    let mut next = 0u32;
    groups
        .map(|g| {
            let mut fresh = || {
                next += 1;
                next - 1
            };
            match g {
                Some(g) => *named.entry(g).or_insert_with(fresh),
                None => fresh(),
            }
        })
        .collect()
}

/// A seeded random order of `cases` case positions.
pub fn case_order(cases: usize, seed: u64) -> Vec<usize> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut order: Vec<usize> = (0..cases).collect();
    order.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    order
}

impl Plan {
    /// Case-major order: all variants of a case run close together, so a run stopped early
    /// still has paired answers to compare.
    pub fn new(cases: usize, variants: &[usize], repeats: u32) -> Plan {
        let order: Vec<usize> = (0..cases).collect();
        Plan::grid(&order, variants, 1, repeats)
    }

    /// The cases in `order`, each with every repeat, variant and endpoint (of `endpoints`),
    /// in that nesting: a case's cells are sent close together, so a run stopped early still
    /// has pairs on both axes. A job's position among its case's jobs is its arm's (see
    /// [`arm_names`]) only with one endpoint; [`Job::arm`] says which arm it is.
    pub fn grid(order: &[usize], variants: &[usize], endpoints: u16, repeats: u32) -> Plan {
        let endpoints = endpoints.max(1);
        let mut jobs = Vec::with_capacity(
            order.len() * variants.len() * usize::from(endpoints) * repeats as usize,
        );
        for &case in order {
            for repeat in 0..repeats {
                for &variant in variants {
                    for endpoint in 0..endpoints {
                        jobs.push(Job {
                            index: jobs.len(),
                            case,
                            variant,
                            endpoint,
                            repeat,
                        });
                    }
                }
            }
        }
        Plan { jobs }
    }
}

/// Stable fingerprints of what a run measures, recorded in `run.json` so a resume can
/// refuse a bench whose cases or variants changed underneath it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Case ids, variables, expected answers, graders and tags.
    pub cases: String,
    /// The selected variants: names, messages and parameters.
    pub variants: String,
    /// Bench-wide request parameters, default grader and repeats.
    pub settings: String,
}

/// One case's content, hashed: what `compare` checks to tell a case that kept its id but
/// changed (its variables, expected answer, grader, history or group) from the same case.
pub fn case_hash(c: &super::Case) -> u64 {
    let mut h = promptgauge_base::hash::StableHasher::default();
    let _ = serde_json::to_writer(
        &mut h,
        &(
            &c.id,
            &c.vars,
            &c.expected,
            &c.grade,
            &c.expected_json,
            &c.messages,
            &c.group,
        ),
    );
    h.finish()
}

impl Fingerprint {
    /// The fingerprints of a bench with these variants selected.
    pub fn of(bench: &super::Bench, variants: &[usize]) -> Fingerprint {
        // Streamed case by case: a large bench is never held twice in memory.
        let mut cases = promptgauge_base::hash::StableHasher::default();
        for c in &bench.cases {
            let _ = serde_json::to_writer(
                &mut cases,
                &(&c.id, &c.vars, &c.expected, &c.grade, &c.tags),
            );
            // Only cases that have them add these, so older fingerprints stay as they were.
            if c.expected_json.is_some() || !c.messages.is_empty() {
                let _ = serde_json::to_writer(&mut cases, &(&c.expected_json, &c.messages));
            }
            if let Some(group) = &c.group {
                let _ = serde_json::to_writer(&mut cases, &("group", group));
            }
        }
        // Where the files are is not what they say: paths stay out.
        let chosen: Vec<serde_json::Value> = variants
            .iter()
            .map(|&v| &bench.variants[v])
            .map(|v| match &v.extract {
                // How its answers are read decides their scores; added only when there is
                // one, so older fingerprints stay as they were.
                Some(x) => serde_json::json!([v.name, v.messages, v.params, x]),
                None => serde_json::json!([v.name, v.messages, v.params]),
            })
            .collect();
        // The judge decides scores: a changed judge is a changed bench (added only when
        // there is one, so older fingerprints stay as they were).
        let settings = match &bench.judge {
            None => serde_json::json!([bench.params, bench.grade, bench.repeats]),
            Some(j) => serde_json::json!([
                bench.params,
                bench.grade,
                bench.repeats,
                [&j.base_url, &j.model, &j.params]
            ]),
        };
        Fingerprint {
            cases: format!("{:016x}", cases.finish()),
            variants: digest(&serde_json::json!(chosen)),
            settings: digest(&settings),
        }
    }
}

/// A stable digest of a value's JSON, as hex.
fn digest(value: &serde_json::Value) -> String {
    let mut h = promptgauge_base::hash::StableHasher::default();
    h.write(value.to_string().as_bytes());
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_is_every_case_variant_endpoint_and_repeat_case_by_case_in_32_bytes_a_job() {
        // Held more than once for a 200,000-job plan: the endpoint must not grow a job.
        assert_eq!(std::mem::size_of::<Job>(), 32);
        let plan = Plan::grid(&[1, 0], &[0, 2], 3, 2);
        assert_eq!(plan.jobs.len(), 2 * 2 * 3 * 2);
        // A case's jobs are together; within a repeat, each variant at every endpoint.
        let first: Vec<(usize, u32, usize, u16)> = plan.jobs[..6]
            .iter()
            .map(|j| (j.case, j.repeat, j.variant, j.endpoint))
            .collect();
        assert_eq!(
            first,
            [
                (1, 0, 0, 0),
                (1, 0, 0, 1),
                (1, 0, 0, 2),
                (1, 0, 2, 0),
                (1, 0, 2, 1),
                (1, 0, 2, 2)
            ]
        );
        assert!(plan.jobs.iter().enumerate().all(|(i, j)| j.index == i));
        // The arm of variant position 1 at endpoint 2, with 2 variants: 2 × 2 + 1.
        assert_eq!(plan.jobs[5].arm(1, 2), 5);
        assert_eq!(
            arm_names(&["a".into(), "b".into()], &["x".into(), "y".into()]),
            ["x/a", "x/b", "y/a", "y/b"]
        );
        assert_eq!(arm_names(&["a".into()], &[]), ["a"]);
    }

    #[test]
    fn grouped_orders_keep_each_group_together_and_cut_between_groups() {
        let groups = ["a", "b", "a", "c", "b", "a"];
        let units = units_of(groups.iter().map(|g| Some(*g)).chain([None, None]));
        assert_eq!(units, vec![0, 1, 0, 2, 1, 0, 3, 4]);
        assert!(units_of([None, None].into_iter()).is_empty());
        let mut plan = SequentialPlan {
            seed: 3,
            detect: 0.1,
            power: 0.8,
            min_cases: 0,
            max_cases: 8,
            comparisons: 1,
            binary: true,
            fixed_design_cases: None,
            max_drop: None,
            best: None,
            units,
        };
        for seed in 0..20 {
            plan.seed = seed;
            let order = plan.order(8);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..8).collect::<Vec<_>>(), "every case once");
            // A group's cases are next to each other, in bench order.
            let a: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&c| plan.units[c] == 0)
                .collect();
            assert_eq!(a, vec![0, 2, 5]);
            let at = order.iter().position(|&c| c == 0).unwrap();
            assert_eq!(&order[at..at + 3], &[0, 2, 5]);
        }
        // Cut at 4 cases: whole groups only (the first is kept even if larger).
        plan.max_cases = 4;
        for seed in 0..20 {
            plan.seed = seed;
            let order = plan.order(8);
            let kept: std::collections::HashSet<u32> =
                order.iter().map(|&c| plan.units[c]).collect();
            let whole: usize = kept
                .iter()
                .map(|&u| plan.units.iter().filter(|&&x| x == u).count())
                .sum();
            assert_eq!(whole, order.len(), "seed {seed}: {order:?}");
            assert!(order.len() <= 4 || kept.len() == 1);
        }
        // Without units, as before: the seeded case order.
        plan.units.clear();
        assert_eq!(plan.order(8)[..4], case_order(8, plan.seed)[..4]);
    }

    #[test]
    fn shards_split_by_case_and_cover_the_plan_once() {
        let p = Plan::new(10, &[0, 1], 2);
        let shards: Vec<Shard> = (1..=3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for job in &p.jobs {
            assert_eq!(shards.iter().filter(|s| s.holds(job)).count(), 1);
        }
        assert!("0/3".parse::<Shard>().is_err());
        assert!("4/3".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn interleaves_variants_per_case() {
        let p = Plan::new(2, &[0, 2], 2);
        assert_eq!(p.jobs.len(), 8);
        let first: Vec<(usize, u32, usize)> = p.jobs[..4]
            .iter()
            .map(|j| (j.case, j.repeat, j.variant))
            .collect();
        assert_eq!(first, vec![(0, 0, 0), (0, 0, 2), (0, 1, 0), (0, 1, 2)]);
        assert!(p.jobs.iter().enumerate().all(|(i, j)| j.index == i));
    }
}
