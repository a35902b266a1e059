//! The journal: one JSON line per finished job, appended and flushed as each finishes, so a
//! killed run loses nothing that had finished.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::Serialize;

pub use super::job_record::{JobKey, JobRecord, JobStatus};

/// The journal, open for appending.
pub struct Journal {
    file: File,
    /// `--until-decided`: decisions reached live, written with the next event kept.
    decisions: Option<super::sequential::Decisions>,
    /// Where an agent loop's steps go (`steps.jsonl` beside the journal), and the file once
    /// the first step opened it: the journal itself holds one record per job.
    steps_path: Option<std::path::PathBuf>,
    steps: Option<File>,
}

impl Journal {
    /// Opens (creating if needed) a journal for appending.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            file,
            decisions: None,
            steps_path: None,
            steps: None,
        })
    }

    /// Keeps agent loops' steps in `path` (created with the first step) rather than among
    /// the job records.
    pub(crate) fn with_steps(mut self, path: std::path::PathBuf) -> Journal {
        self.steps_path = Some(path);
        self
    }

    /// Writes one agent loop step as one line of the steps file and flushes it to the OS,
    /// before the loop's next request goes out.
    fn append_step(&mut self, step: &super::job_record::StepLine) -> std::io::Result<()> {
        if self.steps.is_none() {
            let Some(path) = &self.steps_path else {
                return Err(std::io::Error::other(
                    "this journal has no steps file to keep an agent loop's steps in",
                ));
            };
            self.steps = Some(OpenOptions::new().create(true).append(true).open(path)?);
        }
        let mut line = serde_json::to_vec(step)?;
        line.push(b'\n');
        let file = self.steps.as_mut().expect("opened above");
        file.write_all(&line)?;
        file.flush()
    }

    /// Records a change in how requests are sent (a gate resized, a replica benched). Readers
    /// of job records skip these lines.
    pub(crate) fn append_event(
        &mut self,
        event: &promptgauge_client::pool::PoolEvent,
    ) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }

    /// Writes one event line (a provider batch's step) and flushes it to the OS.
    fn append_line(&mut self, event: &impl Serialize) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }

    /// Writes one record as one line in a single write, then flushes it to the OS.
    pub fn append(&mut self, record: &JobRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()
    }
}

/// Reads every complete record of a journal, in order, calling `f` for each. A last line
/// without its newline (torn by a crash) is skipped and counted.
pub fn read(path: &Path, mut f: impl FnMut(JobRecord)) -> std::io::Result<ReadStats> {
    read_from(path, 0, |_, r| f(r))
}

/// Where a record's line lies in the journal: read it again with [`read_line_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    pub offset: u64,
    pub len: u32,
}

/// [`read`] from byte `from` (the end of an earlier read: a live journal is followed
/// without reading it again), each record with its place. `ReadStats::complete_bytes`
/// counts from `from`.
pub fn read_from(
    path: &Path,
    from: u64,
    mut f: impl FnMut(Place, JobRecord),
) -> std::io::Result<ReadStats> {
    use std::io::{Seek, SeekFrom};
    let mut file = promptgauge_base::files::open_regular(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut reader = BufReader::new(file);
    let mut stats = ReadStats::default();
    let mut line = Vec::new();
    let mut number = 0;
    let mut offset = from;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        let place = Place {
            offset,
            len: u32::try_from(line.len()).unwrap_or(u32::MAX),
        };
        offset += line.len() as u64;
        if line.last() != Some(&b'\n') {
            stats.torn += 1;
            stats.torn_bytes = line.len() as u64;
            break;
        }
        stats.complete_bytes += line.len() as u64;
        if line.starts_with(EVENT_PREFIX) {
            stats.events += 1;
            if line.starts_with(DECIDED_PREFIX)
                && let Ok(d) = serde_json::from_slice(&line)
            {
                stats.decided.push(d);
            }
            if line.starts_with(BATCH_PREFIX)
                && let Ok(b) = serde_json::from_slice(&line)
            {
                stats.batches.push(b);
            }
            continue;
        }
        match serde_json::from_slice::<JobRecord>(&line) {
            Ok(record) => {
                if let Err(e) = record.check() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "{}:{number}: not a job record promptgauge wrote: {e}; remove or repair this line",
                            path.display()
                        ),
                    ));
                }
                stats.records += 1;
                f(place, record);
            }
            Err(_) if line.iter().all(u8::is_ascii_whitespace) => {}
            Err(e) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}:{number}: not a job record: {e}", path.display()),
                ));
            }
        }
    }
    Ok(stats)
}

/// The record whose line is at `place` (from [`read_from`]); `None` when the line there is
/// not one (the journal was replaced since).
pub fn read_line_at(file: &File, place: Place) -> std::io::Result<Option<JobRecord>> {
    let mut line = vec![0u8; place.len as usize];
    read_exact_at(file, &mut line, place.offset)?;
    Ok(serde_json::from_slice::<JobRecord>(&line)
        .ok()
        .filter(|r| r.check().is_ok()))
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, offset)? {
            0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

/// What reading a journal found besides records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadStats {
    pub records: usize,
    /// Lines cut short by a crash (at most the last one).
    pub torn: usize,
    pub torn_bytes: u64,
    /// Length of the journal up to the end of its last complete line.
    pub complete_bytes: u64,
    /// Event lines (gate changes, benched replicas, decisions) skipped.
    pub events: usize,
    /// `--until-decided`'s decisions as they were journaled, in the order reached.
    pub decided: Vec<super::sequential::Decided>,
    /// `--batch`: the provider batches submitted, polled to their end, in journal order.
    pub batches: Vec<super::batch::BatchRecord>,
}

/// The agent loops' steps (`{"event":"step",…}`) the files at `paths` hold (the steps
/// file, and the journal, where runs before steps.jsonl kept them), by the idempotency key
/// of the request each answered: what a resume takes rather than send again. Read only
/// for a bench with tools; a missing file holds none, a torn or unreadable line is no step.
pub fn loop_steps(
    paths: &[&Path],
) -> std::io::Result<std::collections::HashMap<String, super::job_record::StepLine>> {
    let mut steps = std::collections::HashMap::new();
    for path in paths.iter().filter(|p| p.exists()) {
        let mut reader = BufReader::new(promptgauge_base::files::open_regular(path)?);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            if line.starts_with(STEP_PREFIX)
                && line.last() == Some(&b'\n')
                && let Ok(step) = serde_json::from_slice::<super::job_record::StepLine>(&line)
            {
                steps.insert(step.key.clone(), step);
            }
        }
    }
    Ok(steps)
}

/// Cuts a torn last line (from a kill mid-write) off the file at `path`, so what is
/// appended next starts a line of its own; returns the bytes removed. A missing file has
/// none.
pub(crate) fn cut_torn_tail(path: &Path) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    if !path.exists() {
        return Ok(0);
    }
    let mut file = promptgauge_base::files::open_regular(path)?;
    let len = file.metadata()?.len();
    // Back from the end, a block at a time, to the last newline.
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    let whole = loop {
        if end == 0 {
            break 0;
        }
        let start = end.saturating_sub(block.len() as u64);
        let buf = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            break start + i as u64 + 1;
        }
        end = start;
    };
    if whole < len {
        OpenOptions::new().write(true).open(path)?.set_len(whole)?;
    }
    Ok(len - whole)
}

/// Event lines start with this; job records never do.
const EVENT_PREFIX: &[u8] = b"{\"event\":";
/// A decision's event line starts with this.
const DECIDED_PREFIX: &[u8] = b"{\"event\":\"decided\"";
/// A provider batch's event line starts with this.
const BATCH_PREFIX: &[u8] = b"{\"event\":\"batch\"";
/// An agent loop's step line starts with this.
const STEP_PREFIX: &[u8] = b"{\"event\":\"step\"";

/// The jobs a run planned, by key: what a journal is checked against. A journal is trusted
/// by key, never by count: a duplicated line or a record from another plan must not stand
/// in for a job that never ran.
#[derive(Debug, Clone)]
pub struct PlanKeys {
    /// The case ids, and each one's position in the bench (after `--limit`) by its number
    /// (a repeated id: its last position). Compact: a 100,000-case plan is read by each
    /// page `view` makes of a run.
    cases: promptgauge_base::ids::Ids,
    positions: Vec<u32>,
    variants: Vec<String>,
    repeats: u32,
    shard: Option<promptgauge_suite::Shard>,
    planned: usize,
}

impl PlanKeys {
    /// The jobs of a plan: its cases (in bench order), arms (its variants, or each
    /// (variant, endpoint) by `ENDPOINT/VARIANT`), repeats and shard.
    pub fn new(
        case_ids: &[String],
        variants: &[String],
        repeats: u32,
        shard: Option<promptgauge_suite::Shard>,
    ) -> PlanKeys {
        let holds = |i: usize| {
            shard.is_none_or(|s| i as u64 % u64::from(s.count) == u64::from(s.index - 1))
        };
        let planned_cases = (0..case_ids.len()).filter(|&i| holds(i)).count();
        let mut cases = promptgauge_base::ids::Ids::with_capacity(case_ids.len());
        let mut positions = Vec::with_capacity(case_ids.len());
        for (i, id) in case_ids.iter().enumerate() {
            let n = cases.intern(id) as usize;
            if n == positions.len() {
                positions.push(i as u32);
            } else {
                positions[n] = i as u32;
            }
        }
        PlanKeys {
            cases,
            positions,
            variants: variants.to_vec(),
            repeats,
            shard,
            planned: planned_cases * variants.len() * repeats as usize,
        }
    }

    /// How many jobs the plan holds.
    pub fn planned(&self) -> usize {
        self.planned
    }

    /// A job's slot in the plan, `None` when the plan does not hold it.
    pub fn slot(&self, case_id: &str, arm: &str, repeat: u32) -> Option<usize> {
        let case = self.positions[self.cases.get(case_id)? as usize] as usize;
        if let Some(s) = self.shard
            && case as u64 % u64::from(s.count) != u64::from(s.index - 1)
        {
            return None;
        }
        let v = self.variants.iter().position(|n| n == arm)?;
        (repeat < self.repeats)
            .then(|| (case * self.repeats as usize + repeat as usize) * self.variants.len() + v)
    }

    /// How many positions the whole plan has (every shard's): a job number a run wrote is
    /// below it.
    pub fn slots(&self) -> usize {
        self.cases.len() * self.repeats as usize * self.variants.len()
    }
}

/// What a journal held against its plan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Audit {
    pub stats: ReadStats,
    /// Planned jobs with a record (the first one, if there were several).
    pub finished: usize,
    /// Further records of a job already recorded: ignored, the first is kept.
    pub duplicates: usize,
    /// Records of jobs the plan does not hold (another case, variant or repeat): ignored.
    pub outside_plan: usize,
    /// Records promptgauge never writes (a score outside [0, 1]): ignored, their jobs left
    /// for a resume.
    pub foreign: usize,
    /// Up to three of each, for the message.
    pub duplicate_examples: Vec<JobKey>,
    pub outside_examples: Vec<JobKey>,
    pub foreign_examples: Vec<JobKey>,
    /// Which slots have a record, for a resume.
    pub done: Vec<bool>,
    /// Failed records a later resend took the place of (they stay in the journal).
    pub resent: usize,
    /// Failed jobs this resume sends again (`--retry-failed`): slot and the round.
    pub to_resend: Vec<(usize, u32)>,
}

impl Audit {
    #[cfg(test)]
    /// Planned jobs without a record.
    pub(crate) fn missing(&self, keys: &PlanKeys) -> usize {
        keys.planned().saturating_sub(self.finished)
    }

    /// What was found beyond the plain records, in a sentence; `None` when nothing was odd.
    pub fn findings(&self) -> Option<String> {
        let list = |keys: &[JobKey]| {
            keys.iter()
                .map(|(c, v, r)| format!("({c}, {v}, repeat {r})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if self.duplicates > 0 {
            parts.push(format!(
                "{} duplicate record(s) of jobs already recorded were ignored, the first kept: {}",
                self.duplicates,
                list(&self.duplicate_examples)
            ));
        }
        if self.outside_plan > 0 {
            parts.push(format!(
                "{} record(s) of jobs this run did not plan were ignored: {}",
                self.outside_plan,
                list(&self.outside_examples)
            ));
        }
        if self.foreign > 0 {
            parts.push(format!(
                "{} record(s) with a score outside [0, 1], which promptgauge never writes, were ignored (their jobs run again on --resume): {}",
                self.foreign,
                list(&self.foreign_examples)
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// Reads a journal against its plan: `f` sees each planned job's first record once, in
/// journal order; duplicates and records outside the plan are counted and skipped.
pub fn read_planned(
    path: &Path,
    keys: &PlanKeys,
    f: impl FnMut(JobRecord),
) -> std::io::Result<Audit> {
    read_planned_resending(path, keys, &|_| false, f)
}

/// [`read_planned`] for a resume that sends failed jobs again: a failed record for which
/// `resend` holds is not passed on, and its slot is left open (in [`Audit::to_resend`], with
/// the round its new record will carry).
///
/// A job's failed record may be followed by a resend's record (`resent` > 0), which takes
/// its place: failed records are therefore passed on at the end, once no later record can
/// replace them (in journal order among themselves).
pub(crate) fn read_planned_resending(
    path: &Path,
    keys: &PlanKeys,
    resend: &dyn Fn(&JobRecord) -> bool,
    mut f: impl FnMut(JobRecord),
) -> std::io::Result<Audit> {
    read_planned_placed(path, keys, resend, |_, r| f(r))
}

/// [`read_planned_resending`], each record with its place in the journal (for an index
/// that reads a record again without reading the journal again).
pub fn read_planned_placed(
    path: &Path,
    keys: &PlanKeys,
    resend: &dyn Fn(&JobRecord) -> bool,
    mut f: impl FnMut(Place, JobRecord),
) -> std::io::Result<Audit> {
    let mut audit = Audit {
        done: vec![false; keys.slots()],
        ..Audit::default()
    };
    if !path.exists() {
        return Ok(audit);
    }
    let mut done = std::mem::take(&mut audit.done);
    // Failed records, by slot, until the end of the journal (a resend may replace them).
    let mut held: std::collections::BTreeMap<usize, (usize, Place, JobRecord)> =
        std::collections::BTreeMap::new();
    let mut seq = 0usize;
    let stats = read_from(path, 0, |place, r| {
        // promptgauge never writes a score outside [0, 1]: such a record was made or
        // changed by something else, and would move every figure. It counts as a record
        // this run did not write; its job is left for a resume.
        if r.score.is_some_and(|s| !(0.0..=1.0).contains(&s)) {
            audit.foreign += 1;
            first_three(&mut audit.foreign_examples, &r);
            return;
        }
        seq += 1;
        match keys.slot(&r.case_id, &r.arm(), r.repeat) {
            None => {
                audit.outside_plan += 1;
                first_three(&mut audit.outside_examples, &r);
            }
            // A resend of a job whose record so far is a failure: it takes its place.
            Some(slot) if r.resent > 0 && held.contains_key(&slot) => {
                audit.resent += 1;
                if r.status == JobStatus::Failed {
                    held.insert(slot, (seq, place, r));
                } else {
                    held.remove(&slot);
                    f(place, r);
                }
            }
            Some(slot) if done[slot] => {
                audit.duplicates += 1;
                first_three(&mut audit.duplicate_examples, &r);
            }
            Some(slot) => {
                done[slot] = true;
                audit.finished += 1;
                if r.status == JobStatus::Failed {
                    held.insert(slot, (seq, place, r));
                } else {
                    f(place, r);
                }
            }
        }
    })?;
    let mut failed: Vec<(usize, usize, Place, JobRecord)> = held
        .into_iter()
        .map(|(slot, (seq, place, r))| (seq, slot, place, r))
        .collect();
    failed.sort_by_key(|(seq, ..)| *seq);
    for (_, slot, place, r) in failed {
        if resend(&r) {
            done[slot] = false;
            audit.finished -= 1;
            audit.to_resend.push((slot, r.resent + 1));
        } else {
            f(place, r);
        }
    }
    audit.done = done;
    audit.stats = stats;
    Ok(audit)
}

/// Keeps a record's key among the first three examples of its kind.
fn first_three(examples: &mut Vec<JobKey>, r: &JobRecord) {
    if examples.len() < 3 {
        examples.push(r.key());
    }
}

impl Journal {
    /// Also keeps the sequential tests' decisions as they are reached (an event line each,
    /// `{"event":"decided",…}`), so a later `report` can say when each variant stopped.
    pub fn keep_decisions(&mut self, decisions: super::sequential::Decisions) {
        self.decisions = Some(decisions);
    }

    /// The decisions it writes, to be seen as they are reached (each is in the queue from
    /// the event that reached it until the journal's next event writes it).
    pub fn decisions(&self) -> Option<super::sequential::Decisions> {
        self.decisions.clone()
    }

    /// Writes the decisions reached since the last event.
    fn append_decisions(&mut self) -> std::io::Result<()> {
        let pending = match &self.decisions {
            Some(d) => std::mem::take(&mut *d.lock().unwrap_or_else(|p| p.into_inner())),
            None => return Ok(()),
        };
        if pending.is_empty() {
            return Ok(());
        }
        for decided in pending {
            let mut line = serde_json::to_vec(&decided)?;
            line.push(b'\n');
            self.file.write_all(&line)?;
        }
        self.file.flush()
    }
}

impl super::events::Listener for Journal {
    /// Keeps every finished job, every pool change and every decision of the sequential
    /// tests (written after the record that follows it); a write that fails stops the run.
    fn on(&mut self, event: &super::events::RunEvent<'_>) -> std::io::Result<()> {
        match event {
            super::events::RunEvent::JobFinished { record, .. } => self.append(record)?,
            super::events::RunEvent::PoolChanged(change) => self.append_event(change)?,
            super::events::RunEvent::Batch(b) if b.journaled() => self.append_line(b)?,
            super::events::RunEvent::Step(step) => self.append_step(step)?,
            _ => {}
        }
        self.append_decisions()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) use crate::testing::record;

    #[test]
    fn a_torn_last_line_is_skipped_then_cut_off_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut j = Journal::open(&path).unwrap();
        j.append(&record("a")).unwrap();
        j.append(&record("b")).unwrap();
        drop(j);
        let mut text = std::fs::read_to_string(&path).unwrap();
        let whole = text.len();
        text.push_str(r#"{"job":2,"case_id":"c","var"#);
        std::fs::write(&path, &text).unwrap();

        let mut seen = Vec::new();
        let stats = read(&path, |r| seen.push(r.case_id)).unwrap();
        assert_eq!(seen, ["a", "b"]);
        assert_eq!((stats.torn, stats.complete_bytes), (1, whole as u64));

        let keys = PlanKeys::new(
            &["a".into(), "b".into(), "c".into()],
            &["v".into()],
            1,
            None,
        );
        let (audit, mut journal) = crate::RunDir::at(dir.path()).resume(&keys, |_| {}).unwrap();
        assert_eq!(audit.finished, 2);
        assert!(audit.stats.torn_bytes > 0);
        journal.append(&record("c")).unwrap();
        let mut seen = Vec::new();
        let stats = read(&path, |r| seen.push(r.case_id)).unwrap();
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(stats.torn, 0);
    }

    fn step(key: &str) -> super::super::job_record::StepLine {
        super::super::job_record::StepLine {
            event: "step".into(),
            key: key.into(),
            turn: 1,
            text: String::new(),
            reasoning: String::new(),
            tool_calls: vec![],
            finish_reason: None,
            usage: None,
            model: None,
            answer_ms: None,
            attempts: vec![],
            results: vec![],
        }
    }

    /// The journal holds one record per job: a loop's steps go to their own file, which a
    /// resume reads with the journal (where runs before it kept them), a torn last step cut.
    #[test]
    fn steps_go_to_their_own_file_and_a_resume_reads_both_kinds_of_run() {
        use crate::events::{Listener, RunEvent};
        let dir = tempfile::tempdir().unwrap();
        let run = crate::RunDir::at(dir.path());
        let mut j = run.append_journal().unwrap();
        j.on(&RunEvent::Step(&step("pg-r-0-step1"))).unwrap();
        j.append(&record("a")).unwrap();
        drop(j);
        let journal = std::fs::read_to_string(run.journal_path()).unwrap();
        assert_eq!(journal.lines().count(), 1, "{journal}");
        assert!(journal.starts_with(r#"{"job":0,"#), "{journal}");
        // An older run's step in its journal, and a step torn by a kill.
        let mut old = std::fs::OpenOptions::new()
            .append(true)
            .open(run.journal_path())
            .unwrap();
        old.write_all(&serde_json::to_vec(&step("pg-r-1-step1")).unwrap())
            .unwrap();
        old.write_all(b"\n").unwrap();
        let mut torn = std::fs::OpenOptions::new()
            .append(true)
            .open(run.steps_path())
            .unwrap();
        torn.write_all(br#"{"event":"step","key":"pg-r-2-st"#)
            .unwrap();
        let keys = PlanKeys::new(&["a".into(), "b".into()], &["v".into()], 1, None);
        let (audit, mut j) = run.resume(&keys, |_| {}).unwrap();
        assert_eq!((audit.finished, audit.stats.events), (1, 1));
        j.on(&RunEvent::Step(&step("pg-r-2-step1"))).unwrap();
        let steps = loop_steps(&[&run.steps_path(), &run.journal_path()]).unwrap();
        let mut found: Vec<&str> = steps.keys().map(String::as_str).collect();
        found.sort_unstable();
        assert_eq!(found, ["pg-r-0-step1", "pg-r-1-step1", "pg-r-2-step1"]);
        assert!(
            std::fs::read_to_string(run.steps_path())
                .unwrap()
                .lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        );
    }

    #[test]
    fn a_corrupt_complete_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "not json\n").unwrap();
        let e = read(&path, |_| {}).unwrap_err().to_string();
        assert!(e.contains("results.jsonl:1"), "{e}");
    }

    /// A corrupted field every reader relies on is an error naming its line and field, not a
    /// panic in a report (issue 50, item 23).
    #[test]
    fn a_record_with_a_field_no_reader_can_use_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let note = |sha256: &str| super::super::job_record::FileNote {
            name: "receipt".into(),
            origin: "r.png".into(),
            kind: promptgauge_client::attachment::Kind::Png,
            bytes: 10,
            sha256: Some(sha256.into()),
            path: None,
        };
        let good = JobRecord {
            files: vec![note(&"ab".repeat(32))],
            ..record("a")
        };
        for (bad, field) in [
            (
                JobRecord {
                    files: vec![note("ééééééééé-not-hex")],
                    ..record("b")
                },
                "files[0].sha256",
            ),
            (
                JobRecord {
                    latency_ms: Some(-5.0),
                    ..record("b")
                },
                "latency_ms",
            ),
            (
                JobRecord {
                    job: usize::MAX,
                    ..record("b")
                },
                "`job`",
            ),
        ] {
            let _ = std::fs::remove_file(&path);
            let mut j = Journal::open(&path).unwrap();
            j.append(&good).unwrap();
            j.append(&bad).unwrap();
            let e = read(&path, |_| {}).unwrap_err().to_string();
            assert!(e.contains("results.jsonl:2"), "{e}");
            assert!(e.contains(field), "{e}");
        }
    }

    #[test]
    fn records_are_trusted_by_key_not_by_count() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut j = Journal::open(&path).unwrap();
        // Plan: cases a, b × variant v. Journal: a twice, a stranger, no b.
        for case in ["a", "a", "zz"] {
            j.append(&record(case)).unwrap();
        }
        let mut other = record("a");
        other.variant = "w".into();
        j.append(&other).unwrap();
        let keys = PlanKeys::new(&["a".into(), "b".into()], &["v".into()], 1, None);
        let mut seen = Vec::new();
        let audit = read_planned(&path, &keys, |r| seen.push(r.case_id)).unwrap();
        assert_eq!(seen, ["a"]);
        assert_eq!(
            (audit.finished, audit.duplicates, audit.outside_plan),
            (1, 1, 2)
        );
        assert_eq!(
            audit.missing(&keys),
            1,
            "4 lines for 2 jobs is still one missing"
        );
        let said = audit.findings().unwrap();
        assert!(
            said.contains("1 duplicate") && said.contains("(zz, v, repeat 0)"),
            "{said}"
        );
    }

    #[test]
    fn a_resend_takes_the_place_of_a_failure_which_stays_in_the_journal() {
        use promptgauge_client::{Attempt, Outcome};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let mut j = Journal::open(&path).unwrap();
        let failed = |case: &str, status: u16| {
            let mut r = record(case);
            r.status = JobStatus::Failed;
            r.score = None;
            r.correct = None;
            r.error = Some(format!("HTTP {status}"));
            r.attempts = vec![
                serde_json::from_value::<Attempt>(serde_json::json!({
                    "outcome": Outcome::HttpError.as_str(), "status": status,
                    "latency_ms": 1.0, "stream_options": true
                }))
                .unwrap(),
            ];
            r
        };
        // a: failed (503), then a resend answered. b: failed (503), a plain duplicate (not a
        // resend) is ignored. c: failed with 400. d: answered.
        j.append(&failed("a", 503)).unwrap();
        j.append(&failed("b", 503)).unwrap();
        j.append(&failed("c", 400)).unwrap();
        j.append(&record("d")).unwrap();
        let mut again = record("a");
        again.resent = 1;
        j.append(&again).unwrap();
        j.append(&record("b")).unwrap();
        assert!(failed("b", 503).failed_transiently());
        assert!(failed("x", 429).failed_transiently());
        assert!(!failed("c", 400).failed_transiently());
        assert!(!record("d").failed_transiently());
        let ids: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let keys = PlanKeys::new(&ids, &["v".into()], 1, None);
        let mut seen = Vec::new();
        let audit = read_planned(&path, &keys, |r| seen.push((r.case_id, r.status))).unwrap();
        // Failures last (a later resend could have replaced them), in journal order.
        assert_eq!(
            seen,
            [
                ("d".to_string(), JobStatus::Graded),
                ("a".to_string(), JobStatus::Graded),
                ("b".to_string(), JobStatus::Failed),
                ("c".to_string(), JobStatus::Failed),
            ]
        );
        assert_eq!((audit.finished, audit.resent, audit.duplicates), (4, 1, 1));
        // A resume that resends transient failures leaves b open (round 1), not c.
        let mut seen = Vec::new();
        let audit = read_planned_resending(&path, &keys, &|r| r.failed_transiently(), |r| {
            seen.push(r.case_id)
        })
        .unwrap();
        assert_eq!(seen, ["d", "a", "c"]);
        assert_eq!(audit.to_resend, [(keys.slot("b", "v", 0).unwrap(), 1)]);
        assert_eq!(audit.finished, 3);
    }

    #[test]
    fn a_shard_plans_only_its_cases() {
        let ids: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
        let shard = Some(promptgauge_suite::Shard { index: 2, count: 2 });
        let keys = PlanKeys::new(&ids, &["v".into(), "w".into()], 2, shard);
        assert_eq!(keys.planned(), 2 * 2 * 2);
        assert!(keys.slot("c1", "w", 1).is_some());
        assert!(keys.slot("c0", "v", 0).is_none(), "shard 1's case");
        assert!(keys.slot("c1", "v", 2).is_none(), "repeat out of range");
    }
}
