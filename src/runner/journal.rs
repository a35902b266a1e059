//! The journal: one JSON line per finished job, appended and flushed as each finishes, so a
//! killed run loses nothing that had finished.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::client::{Attempt, Outcome, Usage};

/// One finished job, as written to `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// Position in the plan.
    pub job: usize,
    pub case_id: String,
    pub variant: String,
    pub repeat: u32,
    /// `graded` (an answer was scored) or `failed` (no answer; never counted as wrong).
    pub status: JobStatus,
    /// The final attempt's outcome.
    pub outcome: Option<Outcome>,
    /// The answer that was graded; empty when the job failed.
    pub output: String,
    /// Text received before a failure, for diagnosis only; never graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_output: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    pub finish_reason: Option<String>,
    pub expected: Vec<String>,
    pub extracted: Option<String>,
    /// `None` when the job failed.
    pub correct: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub attempts: Vec<Attempt>,
    pub ttft_ms: Option<f64>,
    pub latency_ms: Option<f64>,
    pub usage: Usage,
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The answer came from the response cache (`--cache`): nothing was sent, and its
    /// latency is not measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Graded,
    Failed,
}

pub struct Journal {
    file: File,
}

impl Journal {
    /// Opens (creating if needed) a journal for appending.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal { file })
    }

    /// Records a change in how requests are sent (a gate resized, a replica benched). Readers
    /// of job records skip these lines.
    pub fn append_event(&mut self, event: &crate::client::pool::PoolEvent) -> std::io::Result<()> {
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
    let mut reader = BufReader::new(File::open(path)?);
    let mut stats = ReadStats::default();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        if line.last() != Some(&b'\n') {
            stats.torn += 1;
            stats.torn_bytes = line.len() as u64;
            break;
        }
        stats.complete_bytes += line.len() as u64;
        if line.starts_with(EVENT_PREFIX) {
            stats.events += 1;
            continue;
        }
        match serde_json::from_slice::<JobRecord>(&line) {
            Ok(record) => {
                stats.records += 1;
                f(record);
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

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadStats {
    pub records: usize,
    /// Lines cut short by a crash (at most the last one).
    pub torn: usize,
    pub torn_bytes: u64,
    /// Length of the journal up to the end of its last complete line.
    pub complete_bytes: u64,
    /// Event lines (gate changes, benched replicas) skipped.
    pub events: usize,
}

/// Event lines start with this; job records never do.
const EVENT_PREFIX: &[u8] = b"{\"event\":";

/// Identifies a job within a plan, across the runs that resume it.
pub type JobKey = (String, String, u32);

impl JobRecord {
    pub fn key(&self) -> JobKey {
        (self.case_id.clone(), self.variant.clone(), self.repeat)
    }
}

/// A journal reopened to continue a run.
pub struct Resumed {
    pub journal: Journal,
    /// Jobs already finished (graded or failed); they are not sent again.
    pub done: HashSet<JobKey>,
    /// Bytes of a torn last line that were cut off before appending.
    pub torn_bytes: u64,
}

impl Journal {
    /// Reopens a journal after a crash or interruption: reads what finished, cuts off a torn
    /// last line so new records start on a line of their own, and opens it for appending.
    pub fn resume(path: &Path) -> std::io::Result<Resumed> {
        let mut done = HashSet::new();
        let stats = if path.exists() {
            read(path, |r| {
                done.insert(r.key());
            })?
        } else {
            ReadStats::default()
        };
        if stats.torn > 0 {
            OpenOptions::new()
                .write(true)
                .open(path)?
                .set_len(stats.complete_bytes)?;
        }
        Ok(Resumed {
            journal: Journal::open(path)?,
            done,
            torn_bytes: stats.torn_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(case: &str) -> JobRecord {
        JobRecord {
            job: 0,
            case_id: case.into(),
            variant: "v".into(),
            repeat: 0,
            status: JobStatus::Graded,
            outcome: Some(Outcome::Complete),
            output: "x".into(),
            partial_output: None,
            reasoning: String::new(),
            finish_reason: Some("stop".into()),
            expected: vec!["x".into()],
            extracted: Some("x".into()),
            correct: Some(true),
            error: None,
            attempts: vec![],
            ttft_ms: None,
            latency_ms: None,
            usage: Usage::default(),
            model: None,
            tags: vec![],
            cached: false,
        }
    }

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

        let mut resumed = Journal::resume(&path).unwrap();
        assert_eq!(resumed.done.len(), 2);
        assert!(resumed.torn_bytes > 0);
        resumed.journal.append(&record("c")).unwrap();
        let mut seen = Vec::new();
        let stats = read(&path, |r| seen.push(r.case_id)).unwrap();
        assert_eq!(seen, ["a", "b", "c"]);
        assert_eq!(stats.torn, 0);
    }

    #[test]
    fn a_corrupt_complete_line_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "not json\n").unwrap();
        let e = read(&path, |_| {}).unwrap_err().to_string();
        assert!(e.contains("results.jsonl:1"), "{e}");
    }
}
