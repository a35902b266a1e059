//! People's labels of judged answers (`labels.jsonl` in a run folder, written by
//! `promptgauge label`), and what they say: how often the judge agrees with people, and
//! each variant's score as people would give it, by prediction-powered inference
//! (Angelopoulos et al. 2023, power-tuned as ppi-python's default; checked against
//! `ppi_py` in tests/fixtures/ppi.py).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use promptgauge_runner::journal::JobKey;
use promptgauge_stats::ppi::{self, Arm};

/// One person's score of one answer: a line of `labels.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Label {
    pub case: String,
    pub variant: String,
    #[serde(default)]
    pub repeat: u32,
    /// 1 (right) or 0 (wrong), or a score in between; read also from `true`/`false` and
    /// `"yes"`/`"no"`, as `label` accepts them typed.
    #[serde(deserialize_with = "score")]
    pub score: f64,
}

fn score<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| D::Error::custom("the score is not a number")),
        serde_json::Value::Bool(b) => Ok(if b { 1.0 } else { 0.0 }),
        serde_json::Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" | "y" | "right" | "pass" | "true" => Ok(1.0),
            "no" | "n" | "wrong" | "fail" | "false" => Ok(0.0),
            other => other.parse::<f64>().map_err(|_| {
                D::Error::custom(format!(
                    "the score `{s}` is neither a number from 0 to 1 nor yes/no"
                ))
            }),
        },
        other => Err(D::Error::custom(format!(
            "the score {other} is neither a number from 0 to 1 nor yes/no"
        ))),
    }
}

/// A label with the line it came from, for errors.
pub(crate) type NumberedLabel = (usize, Label);

impl Label {
    pub fn key(&self) -> JobKey {
        (self.case.clone(), self.variant.clone(), self.repeat)
    }
}

/// Labelled cases a variant needs, when some judged cases are unlabelled, before its score
/// is corrected. The corrected interval covers from 3 labels on (tests/fixtures/
/// ppi_small_sim.txt), but below 10 it spans nearly all of [0, 1] (mean width 0.86 at 5
/// labels, 0.54 at 10): a figure that says nothing.
pub const MIN_LABELS: usize = 10;

/// Labels by job; a later label of the same job replaces an earlier one.
pub type Labels = HashMap<JobKey, f64>;

/// [`read`], keeping each label's line number.
pub fn read_numbered(path: &Path) -> Result<Vec<NumberedLabel>, String> {
    read_lines(path, false).map(|(labels, _)| labels)
}

/// A last line cut short by a stopped `label` (no newline after it, and not a label): its
/// line number and the byte offset where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Torn {
    pub line: usize,
    pub offset: u64,
}

/// Reads labels; with `tolerate_torn`, a torn last line is left out and returned instead
/// of being an error (a run folder's own file, as for the journal).
fn read_lines(
    path: &Path,
    tolerate_torn: bool,
) -> Result<(Vec<NumberedLabel>, Option<Torn>), String> {
    let file = promptgauge_base::files::open_regular(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        _ => format!("cannot read {}: {e}", path.display()),
    })?;
    let mut out = Vec::new();
    let mut reader = BufReader::new(file);
    let mut offset = 0u64;
    let mut i = 0usize;
    loop {
        let mut raw = String::new();
        let n = reader
            .read_line(&mut raw)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        let start = offset;
        offset += n as u64;
        let complete = raw.ends_with('\n');
        let line = raw.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        let parsed = serde_json::from_str::<Label>(line);
        if parsed.is_err() && !complete && tolerate_torn {
            return Ok((
                out,
                Some(Torn {
                    line: i + 1,
                    offset: start,
                }),
            ));
        }
        let label: Label = parsed.map_err(|e| {
            // serde's own position is within the line; the line is what a person needs.
            let message = e.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            format!(
                "{}:{}: not a label: {message}; write {{\"case\": \"…\", \"variant\": \"…\", \"repeat\": 0, \"score\": 1}}",
                path.display(),
                i + 1
            )
        })?;
        if !(0.0..=1.0).contains(&label.score) {
            return Err(format!(
                "{}:{}: the score {} is not between 0 and 1",
                path.display(),
                i + 1,
                label.score
            ));
        }
        out.push((i + 1, label));
        i += 1;
    }
    Ok((out, None))
}

/// The labels of a run folder, if it has any, and a torn last line left out (a `label`
/// session stopped mid-write): said, never an error, as for the journal.
pub fn of_run(path: &Path) -> Result<(Labels, Option<Torn>), String> {
    if !path.exists() {
        return Ok((Labels::new(), None));
    }
    let (labels, torn) = read_lines(path, true)?;
    Ok((
        labels
            .into_iter()
            .map(|(_, l)| (l.key(), l.score))
            .collect(),
        torn,
    ))
}

/// The note a torn last line of labels.jsonl gets.
pub fn torn_note(path: &Path, torn: Torn) -> String {
    format!(
        "{}:{}: a torn last line (from a stopped `label`) was left out; label that answer again",
        path.display(),
        torn.line
    )
}

/// A run folder's `labels.jsonl` open for adding labels, as `label` (and `view`'s page)
/// write it: a torn last line cut off, a last line written by hand without its newline
/// ended, then one whole line per label, flushed at once (a stopped session loses nothing
/// labelled). Whoever opens it holds the run folder's lock.
pub struct Appender {
    file: std::fs::File,
    path: std::path::PathBuf,
}

/// Why labels could not be added.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// labels.jsonl holds a line that is not a label (the message names it).
    #[error("{0}")]
    Unreadable(String),
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
}

impl Appender {
    /// Opens `path` (creating it): the labels it holds, and the note a torn line gets.
    pub fn open(path: &Path) -> Result<(Appender, Labels, Option<String>), AppendError> {
        use std::io::Write;
        let (already, torn) = of_run(path).map_err(AppendError::Unreadable)?;
        let write_error = |error| AppendError::Write {
            path: path.to_path_buf(),
            error,
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(write_error)?;
        let mut note = None;
        if let Some(torn) = torn {
            note = Some(torn_note(path, torn));
            file.set_len(torn.offset).map_err(write_error)?;
        } else if std::fs::read(path).is_ok_and(|b| b.last().is_some_and(|&c| c != b'\n')) {
            file.write_all(b"\n").map_err(write_error)?;
        }
        let appender = Appender {
            file,
            path: path.to_path_buf(),
        };
        Ok((appender, already, note))
    }

    /// Adds one label as one line.
    pub fn append(&mut self, label: &Label) -> Result<(), AppendError> {
        use std::io::Write;
        let line = serde_json::to_string(label).map_err(|e| AppendError::Write {
            path: self.path.clone(),
            error: e.into(),
        })? + "\n";
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|error| AppendError::Write {
                path: self.path.clone(),
                error,
            })
    }
}

/// The question a judged answer was asked, from the judge's prompt (what a person labelling
/// it reads, without the judge's verdict).
pub fn question(r: &promptgauge_runner::journal::JobRecord) -> String {
    let prompt = r
        .judge
        .first()
        .and_then(|c| c.request.iter().rev().find(|m| m.role == "user"))
        .map_or("", |m| m.content.as_str());
    let part = |tag: &str| promptgauge_grade::judge::part(prompt, tag);
    match (part("conversation"), part("question")) {
        (Some(c), Some(q)) => format!("(after this conversation)\n{c}\n{q}"),
        (None, Some(q)) => q.to_string(),
        _ => prompt.to_string(),
    }
}

/// The answers to label: a seeded sample of `sample` of the judged answers not labelled
/// yet, the same for the same seed (drawn in plan order, not journal order, which depends
/// on timing).
pub fn sample(
    mut judged: Vec<promptgauge_runner::journal::JobRecord>,
    already: &Labels,
    seed: u64,
    sample: usize,
) -> Vec<promptgauge_runner::journal::JobRecord> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    judged.retain(|r| !already.contains_key(&r.key()));
    judged.sort_by_key(|r| r.job);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    judged.shuffle(&mut rng);
    judged.truncate(sample);
    judged
}

/// A judged answer's label for `score`: its arm (`ENDPOINT/VARIANT` in a run of several
/// endpoints), case and repeat.
pub fn label_of(r: &promptgauge_runner::journal::JobRecord, score: f64) -> Label {
    Label {
        case: r.case_id.clone(),
        variant: r.arm().into_owned(),
        repeat: r.repeat,
        score,
    }
}

/// The judge against people, for one variant, and its score as people would give it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Labelled {
    /// Answers people labelled.
    pub labels: u64,
    /// Cases with a labelled answer: the units of the correction.
    #[serde(default)]
    pub labelled_cases: u64,
    /// The share of labelled answers where the judge and people agree (0/1 verdicts), with
    /// a Wilson interval.
    pub agreement: Option<f64>,
    pub agreement_low: Option<f64>,
    pub agreement_high: Option<f64>,
    /// Cohen's kappa of the judge and people (agreement beyond chance).
    pub kappa: Option<f64>,
    /// Of the answers people failed, the share the judge passed.
    pub judge_passes_people_fail: Option<f64>,
    /// Of the answers people passed, the share the judge failed.
    pub judge_fails_people_pass: Option<f64>,
    /// The variant's score as people would give it: the judge's mean over every answer,
    /// corrected by how far it was off on the labelled ones (prediction-powered).
    pub corrected: Option<f64>,
    pub corrected_low: Option<f64>,
    pub corrected_high: Option<f64>,
}

/// One case of one variant, as the correction needs it: the judge's scores of all its graded
/// repeats, and of the repeats people labelled, with people's scores of those.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct CaseJudged {
    pub judge_sum: f64,
    pub graded: u32,
    pub labelled_person_sum: f64,
    pub labelled_person_squares: f64,
    pub labelled_judge_sum: f64,
    pub labelled: u32,
}

impl CaseJudged {
    /// The judge's mean over the case's graded repeats.
    fn judge(&self) -> f64 {
        self.judge_sum / f64::from(self.graded.max(1))
    }

    /// People's scores of the labelled repeats, as a case's scores are kept.
    pub(crate) fn people(&self) -> Option<promptgauge_stats::cluster::CaseScore> {
        (self.labelled > 0).then(|| promptgauge_stats::cluster::CaseScore {
            score: self.labelled_person_sum,
            squares: self.labelled_person_squares,
            graded: u64::from(self.labelled),
        })
    }

    /// (people's mean, the judge's mean) over the labelled repeats, when there are any.
    fn labels(&self) -> Option<(f64, f64)> {
        let n = f64::from(self.labelled);
        (self.labelled > 0).then(|| (self.labelled_person_sum / n, self.labelled_judge_sum / n))
    }
}

/// One variant's judged answers: (person, judge) per labelled answer (for agreement and
/// κ, which are about answers), and per case what the correction needs (the case is the
/// unit of the correction, as of every other figure: repeats of a case are not independent).
#[derive(Debug, Default, Clone)]
pub struct JudgedScores {
    pub labelled: Vec<(f64, f64)>,
    /// By case id (sorted: the result does not depend on the order records arrived in).
    pub cases: std::collections::BTreeMap<String, CaseJudged>,
}

impl JudgedScores {
    /// Adds one graded answer, with people's label when it has one.
    pub fn add(&mut self, case: &str, judge: f64, person: Option<f64>) {
        let c = self.cases.entry(case.to_string()).or_default();
        c.judge_sum += judge;
        c.graded += 1;
        if let Some(p) = person {
            self.labelled.push((p, judge));
            c.labelled_person_sum += p;
            c.labelled_person_squares += p * p;
            c.labelled_judge_sum += judge;
            c.labelled += 1;
        }
    }

    /// The arrays of the case-level correction: people's and the judge's means over each
    /// labelled case's labelled repeats, and the judge's means of the cases with no label
    /// (a partly labelled case's other repeats are left out: the same case cannot sit on
    /// both sides of the correction).
    fn arrays(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (mut people, mut judge, mut unlabelled) = (Vec::new(), Vec::new(), Vec::new());
        for c in self.cases.values() {
            match c.labels() {
                Some((p, j)) => {
                    people.push(p);
                    judge.push(j);
                }
                None => unlabelled.push(c.judge()),
            }
        }
        (people, judge, unlabelled)
    }

    /// Compares the judge with people and corrects the judge's mean.
    pub fn summarise(&self, confidence: f64) -> Option<Labelled> {
        if self.labelled.is_empty() {
            return None;
        }
        // Agreement is about pass and fail: a score of ½ or more passes, for people and
        // judge alike (partial scores and 0–10 judges included).
        let (agreement, kappa, passes, fails) = {
            let p: Vec<bool> = self.labelled.iter().map(|x| x.0 >= 0.5).collect();
            let j: Vec<bool> = self.labelled.iter().map(|x| x.1 >= 0.5).collect();
            let share = |keep: bool, judged: bool| {
                let among: Vec<bool> = p
                    .iter()
                    .zip(&j)
                    .filter(|(pp, _)| **pp == keep)
                    .map(|(_, jj)| *jj == judged)
                    .collect();
                (!among.is_empty())
                    .then(|| among.iter().filter(|&&x| x).count() as f64 / among.len() as f64)
            };
            (
                ppi::agreement(&p, &j, confidence),
                ppi::cohen_kappa(&p, &j),
                share(false, true),
                share(true, false),
            )
        };
        let (people, judge, unlabelled) = self.arrays();
        // (estimate, low, high)
        let corrected = if unlabelled.is_empty() {
            // Every judged case labelled: people's scores alone are the answer. Fewer than
            // two cases give no interval, and no figure is shown without one.
            promptgauge_stats::scores::mean_score(&people, confidence)
                .and_then(|m| m.interval.map(|(low, high)| (m.mean, low, high)))
        } else if people.len() < MIN_LABELS {
            // Below MIN_LABELS the interval spans nearly all of [0, 1]: no figure.
            None
        } else {
            ppi::corrected_mean(&people, &judge, &unlabelled, confidence)
                .map(|c| (c.estimate, c.low, c.high))
        };
        Some(Labelled {
            labels: self.labelled.len() as u64,
            labelled_cases: people.len() as u64,
            agreement: agreement.map(|a| a.0),
            agreement_low: agreement.map(|a| a.1),
            agreement_high: agreement.map(|a| a.2),
            kappa,
            judge_passes_people_fail: passes,
            judge_fails_people_pass: fails,
            // Scores live in [0, 1]: so does the interval of their mean.
            corrected: corrected.map(|c| c.0.clamp(0.0, 1.0)),
            corrected_low: corrected.map(|c| c.1.clamp(0.0, 1.0)),
            corrected_high: corrected.map(|c| c.2.clamp(0.0, 1.0)),
        })
    }
}

/// A variant and the baseline case by case, as the paired correction takes them: a case is
/// labelled when each side has a label on some repeat (not necessarily the same ones), and
/// is then (variant person, variant judge, baseline person, baseline judge) over each
/// side's labelled repeats; otherwise (variant judge, baseline judge) over all graded
/// repeats. Cases graded on one side only are left out.
pub fn judged_pairs(variant: &JudgedScores, baseline: &JudgedScores) -> JudgedPairs {
    let mut pairs = JudgedPairs::default();
    for (case, v) in &variant.cases {
        let Some(b) = baseline.cases.get(case) else {
            continue;
        };
        match (v.labels(), b.labels()) {
            (Some((vp, vj)), Some((bp, bj))) => pairs.labelled.push((vp, vj, bp, bj)),
            _ => pairs.unlabelled.push((v.judge(), b.judge())),
        }
    }
    pairs
}

/// The difference between two variants as people would score it, from the cases both have
/// labelled and the judge's scores of the rest ([`ppi::corrected_difference`]), with the
/// standard error behind its interval. `None` with fewer than [`MIN_LABELS`] labelled
/// cases, and when every case is labelled (people's scores then are plain scores: the
/// comparison takes them, with its exact test).
pub fn corrected_difference(
    variant: &JudgedPairs,
    confidence: f64,
) -> Option<(crate::compare::CorrectedDifference, f64)> {
    if variant.unlabelled.is_empty() || variant.labelled.len() < MIN_LABELS {
        return None;
    }
    let (vl, vj): (Vec<f64>, Vec<f64>) = variant.labelled.iter().map(|x| (x.0, x.1)).unzip();
    let (bl, bj): (Vec<f64>, Vec<f64>) = variant.labelled.iter().map(|x| (x.2, x.3)).unzip();
    let (vu, bu): (Vec<f64>, Vec<f64>) = variant.unlabelled.iter().copied().unzip();
    let (d, se) = ppi::corrected_difference(
        Arm {
            labels: &vl,
            judged: &vj,
            unlabelled: &vu,
        },
        Arm {
            labels: &bl,
            judged: &bj,
            unlabelled: &bu,
        },
        confidence,
    )?;
    let difference = crate::compare::CorrectedDifference {
        difference: d.estimate,
        ci_low: d.low,
        ci_high: d.high,
        labelled_cases: variant.labelled.len() as u64,
        all_labelled: false,
    };
    Some((difference, se))
}

/// A variant and the baseline case by case: (variant person, variant judge, baseline
/// person, baseline judge) where both are labelled, (variant judge, baseline judge) where
/// not.
#[derive(Debug, Default, Clone)]
pub struct JudgedPairs {
    pub labelled: Vec<(f64, f64, f64, f64)>,
    pub unlabelled: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_scores_still_give_agreement_and_few_labels_no_correction() {
        // A 0–10 judge (0.7, 0.2, …) against people's 1/0/0.5: pass is ½ or more.
        let mut s = JudgedScores::default();
        for (i, (person, judge)) in [(1.0, 0.7), (0.0, 0.2), (0.5, 0.9), (1.0, 0.3)]
            .into_iter()
            .enumerate()
        {
            s.add(&format!("l{i}"), judge, Some(person));
        }
        for i in 0..40 {
            s.add(&format!("u{i}"), 0.8, None);
        }
        let l = s.summarise(0.95).unwrap();
        // Agrees on three of four (the last: people pass, the judge fails).
        assert_eq!(l.agreement, Some(0.75));
        assert_eq!(l.judge_fails_people_pass, Some(1.0 / 3.0));
        assert!(l.kappa.is_some());
        // Four labelled cases are too few to correct 40 judged ones.
        assert_eq!((l.labelled_cases, l.corrected), (4, None));
        let mut many = JudgedScores::default();
        for i in 0..MIN_LABELS {
            let (p, j) = (
                f64::from(u8::from(i % 3 != 0)),
                f64::from(u8::from(i % 4 != 0)),
            );
            many.add(&format!("l{i}"), j, Some(p));
        }
        for i in 0..40 {
            many.add(&format!("u{i}"), f64::from(u8::from(i % 3 != 0)), None);
        }
        let c = many.summarise(0.95).unwrap();
        assert!(
            c.corrected.is_some() && c.corrected_low < c.corrected_high,
            "{c:?}"
        );
        // Ten labels on repeats of one case are one labelled case, not ten.
        let mut repeats = JudgedScores::default();
        for _ in 0..MIN_LABELS {
            repeats.add("same", 1.0, Some(1.0));
        }
        for i in 0..40 {
            repeats.add(&format!("u{i}"), 1.0, None);
        }
        let r = repeats.summarise(0.95).unwrap();
        assert_eq!((r.labels, r.labelled_cases, r.corrected), (10, 1, None));
        // One labelled answer, all answers labelled: a mean but no interval, so no figure.
        let mut one = JudgedScores::default();
        one.add("c", 1.0, Some(1.0));
        assert_eq!(one.summarise(0.95).unwrap().corrected, None);
    }
}
