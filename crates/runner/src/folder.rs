//! The run folder, `reports/<name>-<UTC timestamp>/`: the one owner of its layout. Nothing
//! else spells a file name of a run folder.
//!
//! ```text
//! run.json        RunRecord: what was run, against what (typed)
//! results.jsonl   the journal: one line per finished job, appended as each finishes
//! steps.jsonl     an agent bench's loop steps, each appended as it finishes (for --resume)
//! summary.json    summary.csv  summary.md  report.html   the reports
//! baseline.json   with --baseline: the comparison with the earlier run
//! .lock           held by the process writing the folder
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};

use super::journal::{self, Audit, JobRecord, Journal, PlanKeys};
use super::lock::{self, LockError, RunLock};
use super::record::RunRecord;
use promptgauge_base::files::{read_regular, write_atomically};

const RECORD: &str = "run.json";
const JOURNAL: &str = "results.jsonl";
const STEPS: &str = "steps.jsonl";
const REPORT_HTML: &str = "report.html";
const BASELINE: &str = "baseline.json";
const LABELS: &str = "labels.jsonl";
/// Where `--junit` collects its test cases during a run, before the file is assembled.
const JUNIT_SPOOL: &str = ".junit.spool";
const STORE_SPOOL: &str = ".store.spool";

/// How often each journal was opened, by path: read from start to end, or for appending.
/// The one-pass design promises a live run never reads its journal and `report` reads it
/// once; this is how the tests check it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct JournalOpens {
    pub reads: usize,
    pub appends: usize,
}

static OPENS: LazyLock<Mutex<HashMap<PathBuf, JournalOpens>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn count(path: &Path, f: impl FnOnce(&mut JournalOpens)) {
    if let Ok(mut opens) = OPENS.lock() {
        f(opens.entry(path.to_path_buf()).or_default());
    }
}

/// How often this process opened the journal at `path` (for tests).
pub fn journal_opens(path: &Path) -> JournalOpens {
    OPENS
        .lock()
        .ok()
        .and_then(|o| o.get(path).copied())
        .unwrap_or_default()
}

/// Why a run folder could not be made, or its record read or written.
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error("cannot create the report folder {}: {error}", root.display())]
    Root {
        root: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot create {}: {error}", path.display())]
    Create {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{} is not a run folder: cannot read {}: {error}", dir.display(), path.display())]
    NotARun {
        dir: PathBuf,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: not a run record this version understands: {error}", path.display())]
    UnknownRecord {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// The record could not be put into JSON (it holds a number JSON cannot write).
    #[error("{0}")]
    Encode(serde_json::Error),
    #[error("cannot write {}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl FolderError {
    /// Whether the file system refused for want of permission (the usual cause: a
    /// container's user in a folder mounted from the host).
    pub fn permission_denied(&self) -> bool {
        match self {
            FolderError::Root { error, .. }
            | FolderError::Create { error, .. }
            | FolderError::NotARun { error, .. }
            | FolderError::Write { error, .. } => {
                error.kind() == std::io::ErrorKind::PermissionDenied
            }
            FolderError::UnknownRecord { .. } | FolderError::Encode(_) => false,
        }
    }
}

/// A run folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// A new run id for the run this folder holds: its name and four random hex digits
    /// (`fallback` for the name when it is not UTF-8).
    pub fn new_run_id(&self, fallback: &str) -> String {
        format!(
            "{}-{:04x}",
            self.path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or(fallback),
            rand::random::<u16>()
        )
    }

    /// An existing folder (nothing is checked until something is read).
    pub fn at(path: impl Into<PathBuf>) -> RunDir {
        RunDir { path: path.into() }
    }

    /// Makes `root/<name>-<stamp>` for a run started at `started` (RFC 3339), unique if
    /// two runs start in the same second.
    pub fn create(root: &Path, name: &str, started: &str) -> Result<RunDir, FolderError> {
        let stamp: String = started
            .chars()
            .filter(|c| !matches!(c, '-' | ':'))
            .collect();
        std::fs::create_dir_all(root).map_err(|error| FolderError::Root {
            root: root.to_path_buf(),
            error,
        })?;
        for n in 1.. {
            let path = if n == 1 {
                root.join(format!("{name}-{stamp}"))
            } else {
                root.join(format!("{name}-{stamp}-{n}"))
            };
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(RunDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(FolderError::Create { path, error }),
            }
        }
        unreachable!("the loop returns")
    }

    /// Where the folder is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A file of the folder, for reports that name their own (`summary.json`, …).
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// `run.json`, the record: a folder with one is a run folder.
    pub fn record_path(&self) -> PathBuf {
        self.path.join(RECORD)
    }

    /// `results.jsonl`, the journal.
    pub fn journal_path(&self) -> PathBuf {
        self.path.join(JOURNAL)
    }

    /// `steps.jsonl`: an agent loop's steps, journaled as each finishes, for a resume to
    /// take (older runs kept them in the journal).
    pub fn steps_path(&self) -> PathBuf {
        self.path.join(STEPS)
    }

    pub fn report_html(&self) -> PathBuf {
        self.path.join(REPORT_HTML)
    }

    pub fn baseline_json(&self) -> PathBuf {
        self.path.join(BASELINE)
    }

    /// `labels.jsonl`: people's scores of judged answers.
    pub fn labels(&self) -> PathBuf {
        self.path.join(LABELS)
    }

    /// `.store.spool`: the history store's rows of a live run, until it is recorded.
    pub fn store_spool(&self) -> PathBuf {
        self.path.join(STORE_SPOOL)
    }

    /// Where `--junit` spools its test cases during a run.
    pub fn junit_spool(&self) -> PathBuf {
        self.path.join(JUNIT_SPOOL)
    }

    /// Takes the folder for this process (see [`lock`]).
    pub fn lock(&self) -> Result<RunLock, LockError> {
        lock::acquire(&self.path)
    }

    /// Fails when another process is writing the folder; otherwise keeps writers out
    /// while the guard lives.
    pub fn read_lock(&self) -> Result<lock::ReadLock, LockError> {
        lock::read(&self.path)
    }

    pub fn read_record(&self) -> Result<RunRecord, FolderError> {
        let path = self.path.join(RECORD);
        let text = match read_regular(&path) {
            Ok(text) => text,
            Err(error) => {
                return Err(FolderError::NotARun {
                    dir: self.path.clone(),
                    path,
                    error,
                });
            }
        };
        serde_json::from_str(&text).map_err(|error| FolderError::UnknownRecord { path, error })
    }

    /// Writes `run.json` aside and renames it, so a crash never leaves half a record.
    pub fn write_record(&self, record: &RunRecord) -> Result<(), FolderError> {
        let path = self.path.join(RECORD);
        let text = serde_json::to_string_pretty(record).map_err(FolderError::Encode)? + "\n";
        write_atomically(&path, text).map_err(|error| FolderError::Write { path, error })
    }

    /// Reads the journal once, against the plan: `f` sees each planned job's record (its
    /// first, or the resend that took the place of a failure), in journal order, failed
    /// ones last. With `resume`, a torn last line is cut off and the journal is opened for
    /// appending.
    pub fn replay(
        &self,
        keys: &PlanKeys,
        f: impl FnMut(JobRecord),
    ) -> std::io::Result<(Audit, Option<Journal>)> {
        self.replay_with(keys, false, &|_| false, f)
    }

    #[cfg(test)]
    /// Like [`RunDir::replay`], then reopens the journal to continue the run.
    pub(crate) fn resume(
        &self,
        keys: &PlanKeys,
        f: impl FnMut(JobRecord),
    ) -> std::io::Result<(Audit, Journal)> {
        self.resume_resending(keys, &|_| false, f)
    }

    /// [`RunDir::resume`], leaving open the failed jobs `resend` picks, to be sent again
    /// ([`Audit::to_resend`]).
    pub fn resume_resending(
        &self,
        keys: &PlanKeys,
        resend: &dyn Fn(&JobRecord) -> bool,
        f: impl FnMut(JobRecord),
    ) -> std::io::Result<(Audit, Journal)> {
        let (audit, journal) = self.replay_with(keys, true, resend, f)?;
        match journal {
            Some(j) => Ok((audit, j)),
            None => Err(std::io::Error::other("the journal was not reopened")),
        }
    }

    fn replay_with(
        &self,
        keys: &PlanKeys,
        resume: bool,
        resend: &dyn Fn(&JobRecord) -> bool,
        f: impl FnMut(JobRecord),
    ) -> std::io::Result<(Audit, Option<Journal>)> {
        let path = self.journal_path();
        if path.exists() {
            count(&path, |o| o.reads += 1);
        }
        let mut audit = journal::read_planned_resending(&path, keys, resend, f)?;
        if !resume {
            return Ok((audit, None));
        }
        if audit.stats.torn > 0 {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)?
                .set_len(audit.stats.complete_bytes)?;
            // Cut off: the journal holds no torn line any more (`torn_bytes` says how much
            // was removed).
            audit.stats.torn = 0;
        }
        // A step torn by the kill was never finished: its request is sent again.
        journal::cut_torn_tail(&self.steps_path())?;
        Ok((audit, Some(self.append_journal()?)))
    }

    /// Opens (creating) the journal for appending.
    pub fn append_journal(&self) -> std::io::Result<Journal> {
        let path = self.journal_path();
        count(&path, |o| o.appends += 1);
        Ok(Journal::open(&path)?.with_steps(self.steps_path()))
    }
}
