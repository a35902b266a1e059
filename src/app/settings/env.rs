//! The environment, captured once (`Env::capture`, the only reader of the process's
//! variables); every setting that reads a variable reads it here.

use std::collections::HashMap;

/// The environment variables promptgauge reads, captured once.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, String>,
}

impl Env {
    /// Reads the process environment (the only place that does).
    pub fn capture() -> Self {
        Env {
            vars: std::env::vars().collect(),
        }
    }

    #[cfg(test)]
    pub(crate) fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// A set, non-empty variable.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// `$BROWSER`: the command `view --open` starts the browser with (as `xdg-open` and
    /// Python's `webbrowser` read it: the first of a `:`-separated list, `%s` where the
    /// page goes, else after its words); `None` for the system's opener.
    pub(crate) fn browser(&self) -> Option<&str> {
        self.get("BROWSER")
            .and_then(|b| b.split(':').map(str::trim).find(|c| !c.is_empty()))
    }

    /// Where temporary files go: `$TMPDIR`, else the system's.
    pub(crate) fn temp_dir(&self) -> std::path::PathBuf {
        self.get("TMPDIR")
            .map_or_else(std::env::temp_dir, std::path::PathBuf::from)
    }

    /// Whether output should stay plain: not a terminal, or running in CI.
    pub(crate) fn is_ci(&self) -> bool {
        self.get("CI").is_some_and(|v| v != "false" && v != "0")
    }
}
