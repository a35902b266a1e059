//! Input errors: every problem with a user's files names the file, the line (and column
//! where the parser knows it), what was wrong and how to fix it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A place in a user's file. The path is shared: the 100,000 cases of one file hold one
/// copy of its name, not one each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePos {
    pub file: Arc<Path>,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl FilePos {
    /// A whole file.
    pub fn file(file: &Path) -> Self {
        FilePos {
            file: Arc::from(file),
            line: None,
            column: None,
        }
    }

    /// A line of a file.
    pub fn line(file: &Path, line: usize) -> Self {
        FilePos {
            file: Arc::from(file),
            line: Some(line),
            column: None,
        }
    }

    /// A line of a file whose path is already shared.
    pub(crate) fn line_in(file: &Arc<Path>, line: usize) -> Self {
        FilePos {
            file: file.clone(),
            line: Some(line),
            column: None,
        }
    }

    /// A line and column of a file.
    pub(crate) fn at(file: &Path, line: usize, column: usize) -> Self {
        FilePos {
            file: Arc::from(file),
            line: Some(line),
            column: Some(column),
        }
    }
}

impl fmt::Display for FilePos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        Ok(())
    }
}

/// One thing wrong with the bench, its cases or its prompts. Nothing is sent while any exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub location: FilePos,
    pub message: String,
    pub fix: Option<String>,
}

impl InputError {
    /// An error at `location`.
    pub fn new(location: FilePos, message: impl Into<String>) -> Self {
        InputError {
            location,
            message: message.into(),
            fix: None,
        }
    }

    /// Adds how to fix it.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, "\n  fix: {fix}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InputError {}

/// All the input errors found, so a user can fix them in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputErrors(pub Vec<InputError>);

/// How many errors are printed before the rest are summarised.
const SHOWN: usize = 20;

impl fmt::Display for InputErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().take(SHOWN).enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        if self.0.len() > SHOWN {
            write!(f, "\n… and {} more errors like these", self.0.len() - SHOWN)?;
        }
        Ok(())
    }
}

impl std::error::Error for InputErrors {}

impl From<InputError> for InputErrors {
    fn from(e: InputError) -> Self {
        InputErrors(vec![e])
    }
}

/// The largest bench file read (cases, prompts, a judge's prompt): far above any real one,
/// and a `/dev/zero` or a runaway generator stops here instead of filling memory.
pub(crate) const MAX_INPUT_BYTES: u64 = 512 << 20;

/// Reads a user's text file, turning every failure into an error that says what to do.
pub fn read_text(path: &Path, what: &str) -> Result<String, InputError> {
    read_text_limited(path, what, MAX_INPUT_BYTES)
}

/// [`read_text`] for files no larger than `limit` bytes. Only regular files are read (after
/// symlinks): a FIFO would wait forever, a device never ends.
pub fn read_text_limited(path: &Path, what: &str, limit: u64) -> Result<String, InputError> {
    use std::io::Read;
    let here = FilePos::file(path);
    if path.is_dir() {
        return Err(
            InputError::new(here, format!("expected a {what} file, found a directory"))
                .fix("name a file inside it"),
        );
    }
    let cannot = |e: std::io::Error| {
        let fix = if e.kind() == std::io::ErrorKind::NotFound {
            "check the path; relative paths are resolved from the bench file's folder"
        } else {
            "check the file's permissions"
        };
        InputError::new(FilePos::file(path), format!("cannot read {what} file: {e}")).fix(fix)
    };
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(InputError::new(
            here,
            format!("the {what} file is not a regular file (a device, a pipe or a socket): only files are read"),
        )
        .fix("copy what it holds into a file and name that"));
    }
    let too_big = || {
        InputError::new(
            FilePos::file(path),
            format!(
                "the {what} file is larger than {}: it is not read",
                crate::error::shown_size(limit)
            ),
        )
        .fix("split it, or check that this is the file you meant")
    };
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(limit + 1).read_to_end(&mut bytes))
        .map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    match String::from_utf8(bytes) {
        Ok(mut text) => {
            if text.starts_with('\u{feff}') {
                text.remove(0);
            }
            Ok(text)
        }
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
            let column =
                valid.len() - valid.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
            Err(InputError::new(
                FilePos::at(path, line, column),
                "the file is not valid UTF-8",
            )
            .fix("save the file as UTF-8"))
        }
    }
}

/// `16 MiB`, `512 KiB`: a byte limit as a person reads it.
pub fn shown_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// The 1-based line of the first `key:` in a YAML text, so errors about a value can point at it.
pub(crate) fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            line.match_indices(key).any(|(at, _)| {
                let before = line[..at].trim_end().chars().last();
                let after = line[at + key.len()..].trim_start();
                matches!(before, None | Some('{' | ',' | '-')) && after.starts_with(':')
            })
        })
        .map(|i| i + 1)
}

/// Rewrites serde's "unknown field" message to name the nearest known key.
pub(crate) fn explain_unknown_field(message: &str) -> Option<(String, String)> {
    let (kind, rest) = ["field", "variant"].iter().find_map(|k| {
        message
            .split(&format!("unknown {k} `"))
            .nth(1)
            .map(|r| (*k, r))
    })?;
    let (key, rest) = rest.split_once('`')?;
    // serde writes "expected one of `a`, `b`"; some YAML crates drop the backticks.
    let rest = rest.lines().next().unwrap_or("");
    let list = rest
        .split_once("expected one of ")
        .or_else(|| rest.split_once("expected "))
        .map_or("", |(_, l)| l);
    // "`a`, `b` or `c`", "`a` or `b`", "one of a, b": each name once, without backticks.
    let known: Vec<&str> = list
        .split(", ")
        .flat_map(|k| k.split(" or "))
        .map(|k| k.trim().trim_matches('`'))
        .filter(|k| !k.is_empty())
        .collect();
    let nearest = known
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let what = if kind == "field" { "key" } else { "value" };
    let listed = known
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let fix = match nearest {
        Some((score, k)) if score > 0.7 => format!("did you mean `{k}`?"),
        _ if known.is_empty() => "remove it".to_string(),
        _ => format!("known {what}s here: {listed}"),
    };
    Some((format!("unknown {what} `{key}`"), fix))
}

/// Turns a YAML parse or shape error into an input error at the parser's line and column.
pub(crate) fn yaml_error(path: &Path, what: &str, err: &serde_saphyr::Error) -> InputError {
    let location = match err.location() {
        Some(l) if l.line() > 0 => FilePos::at(path, l.line() as usize, l.column() as usize),
        _ => FilePos::file(path),
    };
    let full = err.to_string();
    // The crate's message may carry a rendered snippet; the first line is the message proper.
    let first = full
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid YAML")
        .trim()
        .trim_start_matches("error: ")
        .to_string();
    // The location is already in front of the message.
    let first = match first.split_once(": ") {
        Some((at, rest)) if at.starts_with("line ") && at.contains(" column ") => rest.to_string(),
        _ => first,
    };
    // The YAML crate names Rust types; say what a person would write instead.
    let first = first
        .replace("invalid i64", "expected a whole number")
        .replace("invalid u64", "expected a whole number ≥ 0")
        .replace("invalid f64", "expected a number");
    if let Some((message, fix)) = explain_unknown_field(&full) {
        return InputError::new(location, format!("{message} in the {what}")).fix(fix);
    }
    // The YAML crate suggests one of its own options; a person needs to keep one key.
    if let Some(rest) = first.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        return InputError::new(location, format!("`{key}` is set twice in the {what}"))
            .fix(format!("keep one `{key}:` line"));
    }
    InputError::new(location, format!("invalid {what}: {first}"))
        .fix(format!("see the {what} format in docs/guide/files.md"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_names_nearest_key() {
        for msg in [
            "unknown field `concurency`, expected one of `concurrency`, `max_attempts`",
            "line 1 column 1: unknown field `concurency`, expected one of concurrency, max_attempts\n --> x",
        ] {
            let (m, fix) = explain_unknown_field(msg).unwrap();
            assert_eq!(m, "unknown key `concurency`");
            assert_eq!(fix, "did you mean `concurrency`?");
        }
        let (m, fix) =
            explain_unknown_field("unknown variant `choise`, expected one of exact, choice")
                .unwrap();
        assert_eq!(m, "unknown value `choise`");
        assert_eq!(fix, "did you mean `choice`?");
    }

    #[test]
    fn line_of_key_finds_nested_keys() {
        let text = "name: x\nlimits:\n  concurrency: 0\nprice: { input: 1, output: 2 }\n";
        assert_eq!(line_of_key(text, "concurrency"), Some(3));
        assert_eq!(line_of_key(text, "output"), Some(4));
        assert_eq!(line_of_key(text, "absent"), None);
    }
}
