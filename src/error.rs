//! Why a command failed. The type of the failure decides the exit code (DESIGN §6): a
//! failure before any request was sent is exit 2; once requests were sent it is exit 3, and
//! the run can be resumed.

use crate::commands::Exit;

/// A failed command.
#[derive(Debug)]
pub enum Failure {
    /// Bad input, a bad flag, a run folder in use, a folder that cannot be made: nothing
    /// was sent. Exit 2.
    Input(anyhow::Error),
    /// Requests were sent, then something failed (a full disk, an unwritable report): what
    /// finished is in the journal. Exit 3; the message says how to resume.
    AfterSend(anyhow::Error),
}

impl Failure {
    pub fn exit(&self) -> Exit {
        match self {
            Failure::Input(_) => Exit::Input,
            Failure::AfterSend(_) => Exit::Incomplete,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e) | Failure::AfterSend(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for Failure {}

/// Marks where an error happened: before anything was sent.
pub trait BeforeSend<T> {
    fn before_send(self) -> Result<T, Failure>;
}

impl<T, E: Into<anyhow::Error>> BeforeSend<T> for Result<T, E> {
    fn before_send(self) -> Result<T, Failure> {
        self.map_err(|e| Failure::Input(e.into()))
    }
}
