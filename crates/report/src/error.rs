//! Why a report could not be made.

/// Why a report could not be made.
#[derive(Debug)]
pub enum ReportError {
    /// A file could not be written.
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A file to append to could not be opened.
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A summary could not be encoded (JSON or CSV).
    Encode(String),
}

impl ReportError {
    /// `path` could not be written.
    pub fn write(path: &std::path::Path, source: impl Into<std::io::Error>) -> Self {
        ReportError::Write {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }

    /// `path` could not be opened to append to.
    pub(crate) fn open(path: &std::path::Path, source: std::io::Error) -> Self {
        ReportError::Open {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            ReportError::Open { path, source } => {
                write!(f, "cannot open {}: {source}", path.display())
            }
            ReportError::Encode(e) => write!(f, "cannot encode the summary: {e}"),
        }
    }
}

impl std::error::Error for ReportError {}

impl From<serde_json::Error> for ReportError {
    fn from(e: serde_json::Error) -> Self {
        ReportError::Encode(e.to_string())
    }
}

impl From<::csv::Error> for ReportError {
    fn from(e: ::csv::Error) -> Self {
        ReportError::Encode(e.to_string())
    }
}
