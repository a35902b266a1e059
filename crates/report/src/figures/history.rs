//! `promptgauge history`: a bench's runs over time, per variant, from the history store,
//! with each step from the run before tested the way `compare` tests two runs: paired by
//! case (only cases whose content is unchanged), Holm across the variants of the step.
//! Rendered as JSON, a terminal table and history.html.

use std::collections::HashMap;

use serde::Serialize;

use crate::compare::{Comparison, Paired, Verdict, compare, decide_with};
use crate::rows::{PartRow, RunRow, ScoreRow, VariantRow};
use crate::text::interval;
use promptgauge_stats::cluster::CaseScore;

/// The JSON schema name of `history --json`.
pub(crate) const SCHEMA: &str = "promptgauge.history/1";

/// A bench's runs, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub schema: String,
    pub bench: String,
    /// The variants in the order they first appear.
    pub variants: Vec<String>,
    /// The named parts of the runs' scores, in the order they first appear (none for a
    /// score without parts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
    /// `history --part NAME`: the part whose figures each variant shows in place of the
    /// whole score's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    pub runs: Vec<HistoryRun>,
}

/// One run in the history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryRun {
    #[serde(flatten)]
    pub run: RunRow,
    /// The run its steps are measured from: the complete run before it at the same
    /// confidence level (none for the first, nor for an incomplete run).
    pub previous: Option<String>,
    pub variants: Vec<HistoryVariant>,
}

/// One variant of a run, and its step from the previous run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryVariant {
    #[serde(flatten)]
    pub result: VariantRow,
    pub step: Option<Step>,
    /// Each named part's figures for this variant in this run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartRow>,
}

/// A variant's change from the previous run, paired by case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Cases graded in both runs, with unchanged content.
    pub cases: u64,
    /// Cases in both runs whose content changed: left out of the pairing.
    pub cases_changed: usize,
    pub difference: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub p_value: Option<f64>,
    /// Holm-adjusted across the variants of this step.
    pub p_holm: Option<f64>,
    pub verdict: Verdict,
    pub sentence: String,
}

impl Step {
    fn of(c: Comparison, cases_changed: usize) -> Step {
        Step {
            cases: c.cases,
            cases_changed,
            difference: c.difference,
            ci_low: c.ci_low,
            ci_high: c.ci_high,
            p_value: c.p_value,
            p_holm: c.p_holm,
            verdict: c.verdict,
            sentence: c.sentence,
        }
    }

    /// Whether the step is a significant change.
    pub(crate) fn significant(&self) -> bool {
        matches!(self.verdict, Verdict::Better | Verdict::Worse)
    }
}

/// One run's graded jobs, compact and sorted by case, for pairing with the runs beside it
/// in the history: what a 100,000-case run keeps is a few dozen bytes a case.
pub struct RunScores {
    variants: Vec<String>,
    /// Each case: its id, content hash and group (its number in `groups`, or
    /// [`NO_GROUP`]); sorted by id once every row is in.
    cases: Vec<(Box<str>, Option<u64>, u32)>,
    groups: promptgauge_base::ids::Ids,
    /// Case-major: case c's score for variant v at `c * variants.len() + v`.
    scores: Vec<CaseScore>,
    sorted: bool,
}

/// A case in no group.
const NO_GROUP: u32 = u32::MAX;

impl RunScores {
    /// No job yet of a run with these variants (rows of other variants are not kept).
    pub fn new(variants: &[VariantRow]) -> RunScores {
        RunScores {
            variants: variants.iter().map(|v| v.variant.clone()).collect(),
            cases: Vec::new(),
            groups: promptgauge_base::ids::Ids::new(),
            scores: Vec::new(),
            sorted: true,
        }
    }

    /// Adds one job row. Rows of a case one after another (as the store gives them) cost
    /// one entry; any order is right.
    pub fn add(&mut self, row: ScoreRow) {
        let Some(v) = self.variants.iter().position(|n| *n == row.variant) else {
            return;
        };
        let n = self.variants.len();
        let c = match self.cases.last() {
            Some((id, _, _)) if **id == *row.case_id => self.cases.len() - 1,
            last => {
                if last.is_some_and(|(id, _, _)| **id > *row.case_id) {
                    self.sorted = false;
                }
                self.cases
                    .push((row.case_id.into(), row.case_hash, NO_GROUP));
                self.scores
                    .extend(std::iter::repeat_n(CaseScore::default(), n));
                self.cases.len() - 1
            }
        };
        if let Some(g) = row.group
            && self.cases[c].2 == NO_GROUP
        {
            self.cases[c].2 = self.groups.intern(&g);
        }
        if let Some(score) = row.score {
            self.scores[c * n + v].add(score);
        }
    }

    /// Sorted by case id, each case once (rows given out of order are merged).
    fn finish(&mut self) {
        if self.sorted {
            return;
        }
        let n = self.variants.len();
        let mut order: Vec<usize> = (0..self.cases.len()).collect();
        order.sort_by(|&x, &y| self.cases[x].0.cmp(&self.cases[y].0));
        let mut cases: Vec<(Box<str>, Option<u64>, u32)> = Vec::with_capacity(order.len());
        let mut scores: Vec<CaseScore> = Vec::with_capacity(self.scores.len());
        for i in order {
            let (id, hash, group) = std::mem::take(&mut self.cases[i]);
            let row = &self.scores[i * n..(i + 1) * n];
            match cases.last_mut() {
                Some(last) if last.0 == id => {
                    let at = scores.len() - n;
                    for (pooled, s) in scores[at..].iter_mut().zip(row) {
                        pooled.pool(*s);
                    }
                    if last.2 == NO_GROUP {
                        last.2 = group;
                    }
                }
                _ => {
                    cases.push((id, hash, group));
                    scores.extend_from_slice(row);
                }
            }
        }
        (self.cases, self.scores, self.sorted) = (cases, scores, true);
    }

    fn variant(&self, name: &str) -> Option<usize> {
        self.variants.iter().position(|n| n == name)
    }

    /// `case`'s group name.
    fn group(&self, group: u32) -> Option<&str> {
        (group != NO_GROUP).then(|| self.groups.id(group))
    }
}

/// Builds a history run by run, oldest first. Only the job rows of the runs a later step
/// may start from (the last complete run at each confidence level) are kept, so memory
/// stays bounded by two runs' jobs however long the history.
pub struct Builder {
    bench: String,
    names: Vec<String>,
    parts: Vec<String>,
    runs: Vec<HistoryRun>,
    /// Per confidence level and line: the last complete run's position and its job rows.
    previous: HashMap<(u64, Option<String>), (usize, RunScores)>,
}

/// Branches whose runs make the main line; a run without a branch (no git) is on it too.
pub(crate) const MAIN_BRANCHES: [&str; 4] = ["main", "master", "trunk", "develop"];

/// The line a run belongs to: `None` for the main line, else its branch (a pull request's
/// own branch, a feature branch). Each line is measured against itself; a branch's first
/// run against the main line's run before it (its base).
pub(crate) fn line_of(run: &RunRow) -> Option<String> {
    run.git_branch
        .as_deref()
        .filter(|b| !MAIN_BRANCHES.contains(b))
        .map(String::from)
}

impl Builder {
    /// A history of `bench` with no run yet.
    pub fn new(bench: &str) -> Builder {
        Builder {
            bench: bench.into(),
            names: Vec::new(),
            parts: Vec::new(),
            runs: Vec::new(),
            previous: HashMap::new(),
        }
    }

    /// Adds the next run (later than every run added), its variants, its parts' figures
    /// and its job rows.
    pub fn push(
        &mut self,
        run: RunRow,
        rows: Vec<VariantRow>,
        parts: Vec<PartRow>,
        mut jobs: RunScores,
    ) {
        jobs.finish();
        for p in &parts {
            if !self.parts.contains(&p.part) {
                self.parts.push(p.part.clone());
            }
        }
        for v in &rows {
            if !self.names.contains(&v.variant) {
                self.names.push(v.variant.clone());
            }
        }
        let level = run.confidence.to_bits();
        let line = line_of(&run);
        // A main-line run steps from the main line's last run (never from a pull request's);
        // a branch's run from its own branch's last run, else from its base on the main line.
        let prev = self
            .previous
            .get(&(level, line.clone()))
            .or_else(|| {
                line.as_ref()
                    .and_then(|_| self.previous.get(&(level, None)))
            })
            .filter(|_| run.complete);
        let mut steps: Vec<Option<(Comparison, usize)>> = vec![None; rows.len()];
        if let Some((p, before)) = prev {
            let after = &jobs;
            let earlier = &self.runs[*p].variants;
            for (slot, v) in steps.iter_mut().zip(&rows) {
                let Some(b) = earlier.iter().find(|b| b.result.variant == v.variant) else {
                    continue;
                };
                *slot = Some(step(before, after, &b.result, v, run.confidence));
            }
            // Holm across the variants of the step.
            let mut made: Vec<Comparison> = steps.iter().flatten().map(|s| s.0.clone()).collect();
            decide_with(&mut made, run.confidence, false);
            for (slot, c) in steps.iter_mut().flatten().zip(made) {
                slot.0 = c;
            }
        }
        let previous = prev.map(|(p, _)| self.runs[*p].run.run_id.clone());
        let complete = run.complete;
        self.runs.push(HistoryRun {
            run,
            previous,
            variants: rows
                .into_iter()
                .zip(steps)
                .map(|(result, s)| HistoryVariant {
                    parts: parts
                        .iter()
                        .filter(|p| p.variant == result.variant)
                        .cloned()
                        .collect(),
                    result,
                    step: s.map(|(c, changed)| Step::of(c, changed)),
                })
                .collect(),
        });
        if complete {
            self.previous
                .insert((level, line), (self.runs.len() - 1, jobs));
        }
    }

    /// The history.
    pub fn finish(self) -> History {
        History {
            schema: SCHEMA.into(),
            bench: self.bench,
            variants: self.names,
            parts: self.parts,
            part: None,
            runs: self.runs,
        }
    }
}

impl History {
    /// The history of one named part (`history --part NAME`): each variant shows the
    /// part's mean (an accuracy for a part scored 0 or 1) with its interval, in place of
    /// the whole score's. The runs without the part (recorded before parts were kept, or of
    /// a bench without it) are left out; steps between runs are not tested for a part (the
    /// store keeps each job's whole score, not its parts'), so none is shown. `None` when no
    /// run has the part.
    pub fn of_part(mut self, name: &str) -> Option<History> {
        if !self.parts.iter().any(|p| p == name) {
            return None;
        }
        self.runs.retain(|r| {
            r.variants
                .iter()
                .any(|v| v.parts.iter().any(|p| p.part == name))
        });
        for r in &mut self.runs {
            r.previous = None;
            let mut binary = true;
            for v in &mut r.variants {
                v.step = None;
                let part = v.parts.iter().find(|p| p.part == name).cloned();
                let res = &mut v.result;
                (res.accuracy, res.ci_low, res.ci_high) = (None, None, None);
                (res.mean_score, res.score_ci_low, res.score_ci_high) = (None, None, None);
                res.n = part.as_ref().map_or(0, |p| p.n);
                res.correct = 0;
                if let Some(p) = part {
                    binary &= p.binary;
                    if p.binary {
                        (res.accuracy, res.ci_low, res.ci_high) = (p.mean, p.ci_low, p.ci_high);
                        res.correct = p.mean.map_or(0, |m| (m * p.n as f64).round() as i64);
                    } else {
                        (res.mean_score, res.score_ci_low, res.score_ci_high) =
                            (p.mean, p.ci_low, p.ci_high);
                    }
                }
            }
            r.run.scored = !binary;
        }
        self.part = Some(name.to_string());
        Some(self)
    }
}

/// One variant's change from `before` to `after`, paired by unchanged case.
fn step(
    before: &RunScores,
    after: &RunScores,
    a: &VariantRow,
    b: &VariantRow,
    confidence: f64,
) -> (Comparison, usize) {
    // The cases both runs have, walked in id order; paired only where they are the same
    // question and both runs graded the variant.
    let (va, vb) = (before.variant(&a.variant), after.variant(&a.variant));
    let (na, nb) = (before.variants.len(), after.variants.len());
    let mut pairs = Vec::new();
    let mut units = Vec::new();
    let mut grouped = false;
    let mut changed = 0;
    let (mut i, mut j) = (0, 0);
    while i < before.cases.len() && j < after.cases.len() {
        let (x, y) = (&before.cases[i], &after.cases[j]);
        match x.0.cmp(&y.0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                if !crate::compare::same_case(x.1, y.1) {
                    changed += 1;
                } else if let (Some(va), Some(vb)) = (va, vb) {
                    // The first run's group, else the second's.
                    let group = before.group(x.2).or_else(|| after.group(y.2));
                    grouped |= group.is_some();
                    let (s, t) = (before.scores[i * na + va], after.scores[j * nb + vb]);
                    if s.graded > 0 && t.graded > 0 {
                        pairs.push((t, s));
                        units.push(crate::compare::unit_of(&x.0, group));
                    }
                }
                i += 1;
                j += 1;
            }
        }
    }
    let mut c = compare(
        &format!("{} now", b.variant),
        &format!("{} before", a.variant),
        Paired {
            pairs: &pairs,
            groups: grouped.then_some(units.as_slice()),
            scored: a.mean_score.is_some() || b.mean_score.is_some(),
        },
        confidence,
    );
    c.explain_against(b.shown().0, a.shown().0);
    (c, changed)
}

/// `+3.1` / `−4.0` points.
fn signed_points(d: Option<f64>) -> String {
    match d {
        Some(d) if d < 0.0 => format!("−{:.1}", -d * 100.0),
        Some(d) => format!("+{:.1}", d * 100.0),
        None => "–".into(),
    }
}

/// A step as a table shows it: `▲ +12.0` (better), `▼ −8.0` (worse), `+1.0` (noise).
pub(crate) fn step_cell(step: Option<&Step>) -> String {
    let Some(s) = step else {
        return "–".into();
    };
    let cell = match s.verdict {
        Verdict::Better => format!("▲ {}", signed_points(s.difference)),
        Verdict::Worse => format!("▼ {}", signed_points(s.difference)),
        Verdict::NoData => "no shared cases".into(),
        Verdict::NotDistinguishable => format!("{} (noise)", signed_points(s.difference)),
    };
    // Cases whose content changed were left out of the pairing: said where it is read.
    match s.cases_changed {
        0 => cell,
        n => format!("{cell} ({n} changed)"),
    }
}

/// The date and minute of an RFC 3339 time: `2026-11-30 14:59`.
pub(crate) fn short_time(t: &str) -> String {
    t.get(..16).unwrap_or(t).replace('T', " ")
}

/// Labels for run times on an axis, as precise as it takes to tell them apart: the day, or
/// the day and minute, or the time to the second (runs of one CI job start in the same
/// minute), or, for runs that started in the same second, that with the run's place.
pub(crate) fn axis_labels(times: &[&str]) -> Vec<String> {
    let distinct = |labels: &[String]| {
        let mut seen = std::collections::HashSet::new();
        labels.iter().all(|l| seen.insert(l.as_str()))
    };
    let cut = |t: &str, n: usize| t.get(..n).unwrap_or(t).replace('T', " ");
    let days: Vec<String> = times.iter().map(|t| cut(t, 10)).collect();
    if distinct(&days) {
        return days;
    }
    let minutes: Vec<String> = times.iter().map(|t| short_time(t)).collect();
    if distinct(&minutes) {
        return minutes;
    }
    let seconds: Vec<String> = times.iter().map(|t| cut(t, 19)).collect();
    if distinct(&seconds) {
        return seconds;
    }
    seconds
        .into_iter()
        .enumerate()
        .map(|(i, s)| format!("{s} #{}", i + 1))
        .collect()
}

/// The run as a short label: the branch and commit, when known.
pub(crate) fn source_label(r: &RunRow) -> String {
    let dirty = if r.git_dirty == Some(true) {
        "+dirty"
    } else {
        ""
    };
    let commit = r
        .git_commit
        .as_deref()
        .map(|c| format!("{}{dirty}", c.get(..7).unwrap_or(c)));
    match (r.git_branch.as_deref(), commit) {
        (Some(b), Some(c)) => format!("{b}@{c}"),
        (Some(b), None) => b.to_string(),
        (None, Some(c)) => c.to_string(),
        (None, None) => "–".into(),
    }
}

/// The significant steps, as sentences, newest last.
pub(crate) fn step_sentences(h: &History) -> Vec<String> {
    let mut out = Vec::new();
    for r in &h.runs {
        for v in &r.variants {
            let Some(s) = v.step.as_ref().filter(|s| s.significant()) else {
                continue;
            };
            let moved = if s.verdict == Verdict::Better {
                "rose"
            } else {
                "fell"
            };
            let before = r
                .previous
                .as_deref()
                .and_then(|id| h.runs.iter().find(|x| x.run.run_id == id));
            let changed = match before {
                Some(b) if b.run.model != r.run.model => {
                    format!("; the model changed from {}", b.run.model)
                }
                Some(b) if b.run.base_url != r.run.base_url => {
                    format!("; the endpoint changed from {}", b.run.base_url)
                }
                _ => String::new(),
            };
            out.push(format!(
                "{} {} ({}): {} {moved} {} points {} from run {} (p {}, Holm; {} cases paired{changed})",
                short_time(&r.run.started_at),
                r.run.run_id,
                source_label(&r.run),
                v.result.variant,
                signed_points(s.difference.map(f64::abs)).trim_start_matches('+'),
                interval(s.ci_low, s.ci_high),
                r.previous.as_deref().unwrap_or("?"),
                crate::compare::p_cell(s.p_holm),
                s.cases
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, variant: &str, score: Option<f64>, group: Option<&str>) -> ScoreRow {
        ScoreRow {
            case_id: case.into(),
            variant: variant.into(),
            case_hash: Some(case.len() as u64),
            group: group.map(String::from),
            score,
            latency_ms: None,
        }
    }

    fn scores(rows: impl IntoIterator<Item = ScoreRow>) -> RunScores {
        let mut s = RunScores {
            variants: vec!["a".into(), "b".into()],
            cases: Vec::new(),
            groups: promptgauge_base::ids::Ids::new(),
            scores: Vec::new(),
            sorted: true,
        };
        rows.into_iter().for_each(|r| s.add(r));
        s.finish();
        s
    }

    /// The store gives a run's rows by case; a caller may not. Either way each case is one
    /// entry, in id order, its repeats pooled, rows of other variants left out.
    #[test]
    fn job_rows_in_any_order_make_the_same_run_scores() {
        let rows = vec![
            row("c1", "a", Some(1.0), None),
            row("c1", "a", Some(0.0), None),
            row("c1", "b", Some(1.0), None),
            row("c1", "other", Some(1.0), None),
            row("c2", "a", None, None),
            row("c3", "b", Some(1.0), Some("g")),
            row("c10", "a", Some(0.0), Some("h")),
        ];
        let ordered = scores({
            let mut r = rows.clone();
            r.sort_by(|x, y| x.case_id.cmp(&y.case_id));
            r
        });
        let shuffled = scores(rows.into_iter().rev());
        for s in [&ordered, &shuffled] {
            let ids: Vec<&str> = s.cases.iter().map(|c| &*c.0).collect();
            assert_eq!(ids, vec!["c1", "c10", "c2", "c3"]);
            let groups: Vec<Option<&str>> = s.cases.iter().map(|c| s.group(c.2)).collect();
            assert_eq!(groups, vec![None, Some("h"), None, Some("g")]);
            assert_eq!(s.scores[0], CaseScore::binary(1, 2));
            assert_eq!(s.scores[1], CaseScore::binary(1, 1));
            assert_eq!(s.scores[4].graded, 0);
        }
        assert_eq!(ordered.scores, shuffled.scores);
    }
}
