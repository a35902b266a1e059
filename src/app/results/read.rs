//! Reading other tools' files: each within a size limit, JSON with the bare `NaN` and
//! `Infinity` Python's writers leave in it (inspect_ai's scores) read as `null`, and zip
//! archives (inspect_ai's `.eval`, DEFLATE or zstd) member by member, each within a limit.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::error::UsageError;

/// The largest file read.
pub(super) const MAX_FILE_BYTES: u64 = 1 << 30;

/// The largest member of an archive read (unpacked).
pub(super) const MAX_MEMBER_BYTES: u64 = 256 << 20;

/// A file's bytes, refused past [`MAX_FILE_BYTES`] or when it is not a regular file.
pub(super) fn bytes(path: &Path) -> Result<Vec<u8>, UsageError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(UsageError(format!("{} is not a file", path.display())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(UsageError(format!(
            "{} is {} bytes, more than the {} a result file may have",
            path.display(),
            meta.len(),
            MAX_FILE_BYTES
        )));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES).read_to_end(&mut out))
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    Ok(out)
}

/// A file's first `n` bytes (fewer when it is shorter).
pub(super) fn bytes_prefix(path: &Path, n: u64) -> Result<Vec<u8>, UsageError> {
    let mut out = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(n).read_to_end(&mut out))
        .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?;
    Ok(out)
}

/// JSON text as a value, Python's bare `NaN`, `Infinity` and `-Infinity` read as `null`.
pub(super) fn json(text: &[u8], what: &dyn Fn() -> String) -> Result<Value, UsageError> {
    let cleaned = without_nan(text);
    serde_json::from_slice(&cleaned).map_err(|e| UsageError(format!("{} is not JSON: {e}", what())))
}

/// `text` with the bare tokens `NaN`, `Infinity` and `-Infinity` outside strings replaced by
/// `null` (the bytes in strings are left as they are).
pub(super) fn without_nan(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !text.windows(3).any(|w| w == b"NaN" || w == b"Inf") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
            i += 1;
            continue;
        }
        let rest = &text[i..];
        if c == b'"' {
            in_string = true;
        } else if let Some(n) = [&b"-Infinity"[..], b"Infinity", b"NaN"]
            .iter()
            .find(|t| rest.starts_with(t))
            .map(|t| t.len())
        {
            out.extend_from_slice(b"null");
            i += n;
            continue;
        }
        out.push(c);
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

/// A zip archive's members by name (the last of a name wins, as the central directory
/// says), read lazily.
pub(super) struct Archive {
    zip: zip::ZipArchive<std::io::Cursor<Vec<u8>>>,
    path: std::path::PathBuf,
}

impl Archive {
    pub(super) fn open(path: &Path) -> Result<Archive, UsageError> {
        let zip = zip::ZipArchive::new(std::io::Cursor::new(bytes(path)?))
            .map_err(|e| UsageError(format!("{} is not a zip archive: {e}", path.display())))?;
        Ok(Archive {
            zip,
            path: path.to_path_buf(),
        })
    }

    /// Member names, in the archive's order.
    pub(super) fn names(&self) -> Vec<String> {
        self.zip.file_names().map(String::from).collect()
    }

    /// A member's JSON, `None` when the archive has no such member.
    pub(super) fn json(&mut self, name: &str) -> Result<Option<Value>, UsageError> {
        let path = self.path.display().to_string();
        let mut member = match self.zip.by_name(name) {
            Ok(m) => m,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(e) => return Err(UsageError(format!("cannot read {name} in {path}: {e}"))),
        };
        if member.size() > MAX_MEMBER_BYTES {
            return Err(UsageError(format!(
                "{name} in {path} unpacks to {} bytes, more than {MAX_MEMBER_BYTES}",
                member.size()
            )));
        }
        let mut out = Vec::new();
        (&mut member)
            .take(MAX_MEMBER_BYTES + 1)
            .read_to_end(&mut out)
            .map_err(|e| UsageError(format!("cannot read {name} in {path}: {e}")))?;
        if out.len() as u64 > MAX_MEMBER_BYTES {
            return Err(UsageError(format!(
                "{name} in {path} unpacks to more than {MAX_MEMBER_BYTES} bytes"
            )));
        }
        json(&out, &|| format!("{name} in {path}")).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_nan_and_infinity_read_as_null_but_not_in_strings() {
        let text =
            br#"{"a": NaN, "b": [Infinity, -Infinity], "c": "NaN and \"Infinity\"", "d": 1}"#;
        let v = json(text, &|| "t".into()).unwrap();
        assert_eq!(v["a"], Value::Null);
        assert_eq!(v["b"], serde_json::json!([null, null]));
        assert_eq!(v["c"], "NaN and \"Infinity\"");
        assert_eq!(v["d"], 1);
        assert!(matches!(
            without_nan(b"{\"x\": 1}"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
