//! Why a command failed. The type of the failure decides the exit code (docs/guide/resume.md, "Exit codes"): a
//! failure before any request was sent is exit 2; once requests were sent it is exit 3, and
//! the run can be resumed.

/// The process exit codes (docs/guide/resume.md, "Exit codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    /// A CI gate failed.
    GateFailed = 1,
    /// No gate failed, but one could not tell at this size (and `--on-inconclusive fail`,
    /// the default, counts that against the run).
    GateInconclusive = 5,
    /// Bad input or flags: nothing was sent.
    Input = 2,
    /// Requests were sent and the run is incomplete.
    Incomplete = 3,
    /// Stopped by the provider (401/403 refused key, 402 out of credit).
    Aborted = 4,
    Interrupted = 130,
}

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Bad input, a bad flag, a run folder in use, a folder that cannot be made: nothing
    /// was sent. Exit 2.
    Input(anyhow::Error),
    /// Requests were sent, then something failed (a full disk, an unwritable report): what
    /// finished is in the journal. Exit 3; the message says how to resume.
    AfterSend(anyhow::Error),
    /// The provider cannot serve the run (unreachable, a refused key) and nothing was
    /// sent, or it failed every first job the same way. Exit 4.
    Provider(anyhow::Error),
    /// Ctrl-C (or SIGTERM) before anything was sent (while `--fetch-urls` downloads):
    /// nothing was sent, and the command stops at once. Exit 130.
    Interrupted(anyhow::Error),
}

impl Failure {
    /// The exit code this failure means.
    pub fn exit(&self) -> Exit {
        match self {
            Failure::Input(_) => Exit::Input,
            Failure::AfterSend(_) => Exit::Incomplete,
            Failure::Provider(_) => Exit::Aborted,
            Failure::Interrupted(_) => Exit::Interrupted,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e)
            | Failure::AfterSend(e)
            | Failure::Provider(e)
            | Failure::Interrupted(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for Failure {}

/// Marks where an error happened: before anything was sent.
pub(crate) trait BeforeSend<T> {
    /// Marks an error as one that happened before anything was sent (exit 2).
    fn before_send(self) -> Result<T, Failure>;
}

impl<T, E: Into<anyhow::Error>> BeforeSend<T> for Result<T, E> {
    fn before_send(self) -> Result<T, Failure> {
        self.map_err(|e| Failure::Input(e.into()))
    }
}

/// A flag or its value is wrong (exit 2, nothing sent). The message says how to fix it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    pub(crate) fn with_fix(message: impl std::fmt::Display, fix: impl std::fmt::Display) -> Self {
        UsageError(format!("{message}\n  fix: {fix}"))
    }
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Input(e.into())
    }
}

impl From<promptgauge_suite::InputErrors> for Failure {
    fn from(e: promptgauge_suite::InputErrors) -> Self {
        Failure::Input(e.into())
    }
}
