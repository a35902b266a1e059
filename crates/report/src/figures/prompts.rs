//! The prompts a run sent, rendered again from its bench file: report.html shows them beside
//! the answers, `view` on a job's page. Only while the bench still measures what the run
//! measured (its fingerprint): a changed bench would show prompts that were never sent.

use std::collections::HashMap;

use promptgauge_runner::record::RunRecord;
use promptgauge_suite::Bench;

/// A bench read for a run, or one the caller holds.
pub enum Held<'a> {
    Read(Box<Bench>),
    Borrowed(&'a Bench),
}

impl std::ops::Deref for Held<'_> {
    type Target = Bench;
    fn deref(&self) -> &Bench {
        match self {
            Held::Read(b) => b,
            Held::Borrowed(b) => b,
        }
    }
}

/// A run's bench, ready to render any of its jobs' prompts.
pub struct Prompts<'a> {
    bench: Held<'a>,
    /// The run's variants, by their place in the bench.
    arms: Vec<usize>,
    cases: HashMap<String, usize>,
}

impl Prompts<'static> {
    /// Reads the run's bench file again, as the run's flags shaped it; `None` when it is
    /// gone or measures something else now.
    pub fn of_run(record: &RunRecord) -> Option<Prompts<'static>> {
        let mut bench = Bench::load(&record.bench_path).ok()?;
        if let Some(limit) = record.plan.limit {
            bench.cases.truncate(limit as usize);
        }
        bench.repeats = record.plan.repeats;
        Prompts::new(Held::Read(Box::new(bench)), record, true)
    }
}

impl Prompts<'static> {
    /// The prompts of one case of `record`'s run (`view`'s page of a job): the bench read
    /// with that case alone, the same when the case's content hash and the variants'
    /// fingerprint are the run's. `None` otherwise, or when the run kept no case hashes.
    pub fn of_case(record: &RunRecord, case_id: &str) -> Option<Prompts<'static>> {
        let at = record.bench.case_ids.iter().position(|c| c == case_id)?;
        let hash = *record.bench.case_hashes.get(at)?;
        let mut bench = Bench::load_case(&record.bench_path, case_id).ok()?;
        bench.repeats = record.plan.repeats;
        let case = bench.cases.first()?;
        if promptgauge_suite::plan::case_hash(case) != hash {
            return None;
        }
        let prompts = Prompts::new(Held::Read(Box::new(bench)), record, false)?;
        let f = promptgauge_suite::Fingerprint::of(&prompts.bench, &prompts.arms);
        (f.variants == record.fingerprint.variants && f.settings == record.fingerprint.settings)
            .then_some(prompts)
    }
}

impl<'a> Prompts<'a> {
    /// `bench`'s prompts for `record`'s variants; with `check`, only when its fingerprint
    /// is the run's (a bench read again from disk may have changed).
    pub fn new(bench: Held<'a>, record: &RunRecord, check: bool) -> Option<Prompts<'a>> {
        let arms: Vec<usize> = record
            .plan
            .variants
            .iter()
            .map(|name| bench.variants.iter().position(|v| &v.name == name))
            .collect::<Option<_>>()?;
        if check && promptgauge_suite::Fingerprint::of(&bench, &arms) != record.fingerprint {
            return None;
        }
        let cases = bench
            .cases
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.clone(), i))
            .collect();
        Some(Prompts { bench, arms, cases })
    }

    /// The prompt case `case_id` was sent with under the run's `variant`-th variant, as
    /// `role: text` paragraphs.
    pub fn render(&self, case_id: &str, variant: usize) -> Option<String> {
        let case = &self.bench.cases[*self.cases.get(case_id)?];
        let v = *self.arms.get(variant)?;
        let messages = self
            .bench
            .templates
            .render(v, case, &self.bench.variants[v])
            .ok()?;
        let text: Vec<String> = messages
            .iter()
            .map(|m| format!("{}: {}", m.role, m.content))
            .collect();
        Some(text.join("\n\n"))
    }

    /// How many variants the run has.
    pub fn variants(&self) -> usize {
        self.arms.len()
    }
}
