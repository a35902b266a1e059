//! The journal: one JSON line per finished job, appended and flushed as each finishes, so a
//! killed run loses nothing that had finished.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    Graded,
    Failed,
}

pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Opens (creating if needed) a journal for appending.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Journal {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
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
            break;
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
    pub torn: usize,
}
