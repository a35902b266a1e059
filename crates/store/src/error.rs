//! Why the history store failed: what was being done (with the fix, where one is known),
//! and the database's or the file system's own words as its cause.

use std::fmt;

/// A store operation that failed.
#[derive(Debug)]
pub struct StoreError {
    message: String,
    cause: Option<Cause>,
}

/// What the database, the driver or the file system said, as one line (sqlx's errors repeat
/// their cause in their message, so their chain is not followed).
#[derive(Debug)]
struct Cause(String);

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Cause {}

impl StoreError {
    /// A failure promptgauge found itself (a folder for a file, a newer schema).
    pub(crate) fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            cause: None,
        }
    }

    /// The same failure, caused by `cause`.
    pub(crate) fn because(mut self, cause: impl fmt::Display) -> Self {
        self.cause = Some(Cause(cause.to_string()));
        self
    }
}

impl fmt::Display for StoreError {
    /// The message alone; `{:#}` through anyhow adds the cause after a colon.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_ref().map(|c| c as _)
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError::new(e.to_string())
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> Self {
        StoreError::new(e.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> Self {
        StoreError::new(e.to_string())
    }
}

/// Says what was being done when a step failed.
pub(super) trait Doing<T> {
    /// The error becomes the cause of a [`StoreError`] saying `what`.
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError>;
}

impl<T, E: fmt::Display> Doing<T> for Result<T, E> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::new(what()).because(e))
    }
}

impl<T> Doing<T> for Option<T> {
    fn doing(self, what: impl FnOnce() -> String) -> Result<T, StoreError> {
        self.ok_or_else(|| StoreError::new(what()))
    }
}
