//! What every reader of `import-results` makes of another tool's files: [`Imported`], its
//! variants ([`ImportedArm`]) and their samples, and the checks and names the readers
//! share. Below the readers and `mod.rs`, which both use it.

use std::path::{Path, PathBuf};

use crate::error::UsageError;
use promptgauge_client::Usage;

/// Another tool's results, read.
#[derive(Debug, Default)]
pub(super) struct Imported {
    /// The task (the bench's name).
    pub(super) name: String,
    /// The tool and version that wrote them, as said: `inspect_ai 0.3.285`.
    pub(super) tool: String,
    /// When the earliest of them was made (RFC 3339), if they say.
    pub(super) started_at: Option<String>,
    pub(super) arms: Vec<ImportedArm>,
    /// What could not be carried over.
    pub(super) notes: Vec<String>,
}

/// One variant: a file, or a promptfoo column.
#[derive(Debug, Default)]
pub(super) struct ImportedArm {
    /// What tells it apart, as found (the model, a task argument, a prompt's label).
    pub(super) name: String,
    pub(super) model: String,
    /// Where it came from.
    pub(super) file: PathBuf,
    /// Its prompt as the tool recorded it (a system prompt, a template), shown as the
    /// variant's message.
    pub(super) prompt: String,
    pub(super) samples: Vec<Sample>,
}

/// One answer and its score.
#[derive(Debug, Clone)]
pub(super) struct Sample {
    pub(super) case: String,
    /// 0-based (an inspect epoch, a promptfoo repeat).
    pub(super) repeat: u32,
    /// The input as the tool recorded it.
    pub(super) input: String,
    pub(super) expected: Vec<String>,
    pub(super) output: String,
    /// The score in [0, 1]; `Err`: the tool did not score it (an error, an unscored
    /// sample), why.
    pub(super) score: Result<f64, String>,
    pub(super) usage: Option<Usage>,
    pub(super) latency_ms: Option<f64>,
    pub(super) tags: Vec<String>,
    /// The files its input carried (inspect's image, audio and document content).
    pub(super) files: Vec<promptgauge_runner::job_record::FileNote>,
}

/// A variant name as the reports and the command line take it: letters, digits, `-`, `_`,
/// `.`, `/` (others become `-`), at most 48.
pub(super) fn clean_name(name: &str) -> String {
    let cleaned: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/') {
                c
            } else {
                '-'
            }
        })
        .take(48)
        .collect();
    let mut collapsed = String::with_capacity(cleaned.len());
    for c in cleaned.chars() {
        if !(c == '-' && collapsed.ends_with('-')) {
            collapsed.push(c);
        }
    }
    let cleaned = collapsed.trim_matches('-').to_string();
    if cleaned.is_empty() {
        "variant".into()
    } else {
        cleaned
    }
}

/// The first file's path, for messages about the files as a whole.
pub(super) fn shown(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A score read from a number or a boolean; `None` when it is neither or outside [0, 1].
pub(super) fn unit_score(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
        serde_json::Value::Number(n) => n.as_f64().filter(|x| (0.0..=1.0).contains(x)),
        _ => None,
    }
}

/// Refuses files whose variants are of different tasks.
pub(super) fn one_task(tasks: &[(String, &Path)]) -> Result<String, UsageError> {
    let first = tasks.first().map(|t| t.0.clone()).unwrap_or_default();
    if let Some((other, file)) = tasks.iter().find(|t| t.0 != first) {
        return Err(UsageError::with_fix(
            format!(
                "{} is of task `{other}`, and {} of task `{first}`: a run compares variants of one task",
                file.display(),
                tasks[0].1.display()
            ),
            "import each task's files apart",
        ));
    }
    Ok(first)
}
