//! The answers report.html shows: every variant's answer to the first
//! [`SHOWN_CASES`] cases (first repeat), and the cases where the variants' scores differ.
//! Settled cases where they agree are forgotten as soon as all are in, so a large bench
//! keeps only what the page shows.

use std::collections::{BTreeMap, HashMap};

use crate::result::{CaseAnswers, RunResult, SHOWN_CASES, SHOWN_CHARS, ShownAnswer, ShownCase};
use promptgauge_runner::journal::{JobRecord, JobStatus};

/// A sink keeping the answers report.html shows.
pub(crate) struct ShownAnswers {
    /// Variants in the run.
    arms: usize,
    answers: BTreeMap<String, ShownCase>,
    /// Cases whose first samples are not all in yet; `None` once settled as agreeing.
    pending: HashMap<String, Option<CaseAnswers>>,
    disagreements: BTreeMap<String, CaseAnswers>,
}

impl ShownAnswers {
    pub(crate) fn new(arms: usize) -> ShownAnswers {
        ShownAnswers {
            arms,
            answers: BTreeMap::new(),
            pending: HashMap::new(),
            disagreements: BTreeMap::new(),
        }
    }

    /// Keeps the full answer of a case's first repeat, for the first cases heard.
    fn show(&mut self, arm: usize, r: &JobRecord) {
        if r.repeat != 0 {
            return;
        }
        let arms = self.arms;
        if !self.answers.contains_key(&r.case_id) && self.answers.len() >= SHOWN_CASES {
            return;
        }
        let reason = crate::reason_of(r);
        let entry = self
            .answers
            .entry(r.case_id.clone())
            .or_insert_with(|| (r.expected.clone(), vec![None; arms]));
        entry.1[arm] = Some(ShownAnswer {
            output: promptgauge_client::protocol::truncate(&r.output, SHOWN_CHARS),
            read: r
                .read
                .as_ref()
                .map(|t| promptgauge_client::protocol::truncate(t, SHOWN_CHARS)),
            extracted: r.extracted.clone(),
            score: r.score(),
            reason,
            filtered: r.status == JobStatus::Filtered,
            files: r.files.clone(),
            steps: r
                .steps
                .iter()
                .take(crate::figures::result::SHOWN_STEPS)
                .cloned()
                .collect(),
            steps_made: r.steps.len(),
            turns: r
                .turns
                .iter()
                .take(crate::figures::result::SHOWN_STEPS)
                .cloned()
                .collect(),
        });
    }

    /// Keeps a case's first-repeat answer per variant until all are in; keeps them only
    /// if the variants disagree, and forgets the case otherwise (a large bench's settled
    /// cases would otherwise each keep an entry).
    fn answer(&mut self, arm: usize, r: &JobRecord, score: f64) {
        if r.repeat != 0 || self.disagreements.contains_key(&r.case_id) {
            return;
        }
        let arms = self.arms;
        let slot = self
            .pending
            .entry(r.case_id.clone())
            .or_insert_with(|| Some((r.expected.clone(), vec![None; arms])));
        let Some((_, got)) = slot else {
            return;
        };
        if got[arm].is_some() {
            return;
        }
        got[arm] = Some((r.extracted.clone().unwrap_or_default(), score));
        if got.iter().all(Option::is_some)
            && let Some(Some(answers)) = self.pending.remove(&r.case_id)
            && disagree(&answers)
        {
            self.disagreements.insert(r.case_id.clone(), answers);
        }
    }
}

impl crate::sinks::Sink for ShownAnswers {
    fn counted(&mut self, arm: Option<usize>, r: &JobRecord) {
        let Some(arm) = arm else { return };
        self.show(arm, r);
        if let Some(score) = r.score() {
            self.answer(arm, r, score);
        }
    }

    fn finish(self: Box<Self>, result: &mut RunResult) -> Result<(), crate::ReportError> {
        let mut disagreements = self.disagreements;
        for (case, answers) in self.pending {
            // Variants that never all answered a case may still disagree among those that did.
            if let Some(answers) = answers.filter(disagree) {
                disagreements.insert(case, answers);
            }
        }
        result.disagreements = disagreements;
        result.answers = self.answers;
        Ok(())
    }
}

/// Whether the variants' scores of a case differ: full marks against none, and as much
/// 0.9 against 0.4 (a scored run's partial credit).
fn disagree(answers: &CaseAnswers) -> bool {
    let scores: Vec<f64> = answers.1.iter().flatten().map(|(_, s)| *s).collect();
    let (lo, hi) = scores
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &s| {
            (lo.min(s), hi.max(s))
        });
    hi - lo > 1e-9
}
