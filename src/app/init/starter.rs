//! What a starter bench is made of: its files, and a task's cases and prompts.

/// One file of a new bench.
pub(super) struct StarterFile {
    pub(super) path: String,
    pub(super) bytes: Vec<u8>,
}

impl StarterFile {
    pub(super) fn new(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> StarterFile {
        StarterFile {
            path: path.into(),
            bytes: bytes.into(),
        }
    }
}

/// (system, user) messages of a variant.
pub(super) type Messages = (&'static str, &'static str);

/// What a task's starter bench is made of.
pub(super) struct Starter {
    /// The bench's `grade:` (with its comment).
    pub(super) grade: &'static str,
    /// Lines the bench holds before `endpoint:` (a judge's, commented).
    pub(super) extra: &'static str,
    /// cases.jsonl's lines.
    pub(super) cases: Vec<String>,
    pub(super) plain: Messages,
    pub(super) careful: Messages,
    /// Variants past the two (their lines in the bench's list), and other files.
    pub(super) more_variants: &'static str,
    pub(super) more_files: Vec<StarterFile>,
}
