//! Where an import reads from: files beside the config (or anywhere, with
//! `--allow-outside-files`), within limits of size, read as promptfoo reads them (YAML by
//! js-yaml's YAML 1.2 core schema: `Yes` and `on` stay text), globs expanded.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The largest file an import reads (the config, a prompt, a CSV of tests).
pub(super) const MAX_IMPORT_BYTES: u64 = 16 << 20;

/// What one import reads in all: a config naming one large file a thousand times would
/// otherwise write gigabytes of prompts.
const MAX_IMPORT_TOTAL: u64 = 64 << 20;

/// What one import copies of attached files (images, PDFs, audio) in all.
const MAX_ATTACHED_TOTAL: u64 = 4 << 30;

/// Where files may be read from: the config's folder, or anywhere with
/// `--allow-outside-files`.
#[derive(Debug, Clone)]
pub(super) struct Reader {
    base: PathBuf,
    anywhere: bool,
    /// Bytes read so far, shared by the clones (at most [`MAX_IMPORT_TOTAL`]).
    read: std::rc::Rc<std::cell::Cell<u64>>,
    /// Bytes of attached files to copy, shared by the clones (at most
    /// [`MAX_ATTACHED_TOTAL`]).
    attached: std::rc::Rc<std::cell::Cell<u64>>,
}

impl Reader {
    /// Files beside the config at `config_path` (or anywhere, with `anywhere`).
    pub(super) fn beside(config_path: &Path, anywhere: bool) -> Self {
        let base = match config_path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Reader {
            base,
            anywhere,
            read: Default::default(),
            attached: Default::default(),
        }
    }

    /// A `file://` reference's text: a regular file inside the config's folder (after `..`
    /// and symlinks), at most [`MAX_IMPORT_BYTES`].
    pub(super) fn read(&self, reference: &str) -> Result<(PathBuf, String), String> {
        let path = self.inside(reference)?;
        let text = promptgauge_suite::error::read_text_limited(&path, "imported", MAX_IMPORT_BYTES)
            .map_err(|e| e.to_string())?;
        self.count(reference, text.len() as u64, MAX_IMPORT_TOTAL)?;
        Ok((path, text))
    }

    /// A `file://` YAML or JSON file read as a mapping (a vars file, a `defaultTest`);
    /// `None` when it holds something else, for the caller to say what it expected.
    pub(super) fn mapping(&self, reference: &str) -> Result<Option<Map<String, Value>>, String> {
        let (_, text) = self.read(reference)?;
        Ok(match yaml(&text, reference)? {
            Value::Object(o) => Some(o),
            _ => None,
        })
    }

    /// A `file://` reference to a file a case attaches (an image, a PDF, audio): its path,
    /// inside the config's folder, copied when the bench is written. Its bytes are counted
    /// against their own total ([`MAX_ATTACHED_TOTAL`]), not the prompts'.
    pub(super) fn attachment(&self, reference: &str) -> Result<PathBuf, String> {
        let path = self.inside(reference)?;
        let size = promptgauge_base::files::open_regular(&path)
            .and_then(|f| f.metadata())
            .map_err(|e| format!("{reference}: {e}"))?
            .len();
        if size > promptgauge_suite::attachments::MAX_FILE_BYTES {
            return Err(format!(
                "{reference} is larger than any file a case may attach"
            ));
        }
        self.attached.set(self.attached.get() + size);
        if self.attached.get() > MAX_ATTACHED_TOTAL {
            return Err(format!(
                "{reference} would take the files this import copies past {} GiB",
                MAX_ATTACHED_TOTAL >> 30
            ));
        }
        Ok(path)
    }

    /// Adds `bytes` to what this import read, refused past `most`.
    fn count(&self, reference: &str, bytes: u64, most: u64) -> Result<(), String> {
        let total = self.read.get() + bytes;
        if total > most {
            return Err(format!(
                "{reference} would take what this import copies past {} MiB in all (the files it names, each as often as it is named); name fewer or smaller files",
                most >> 20
            ));
        }
        self.read.set(total);
        Ok(())
    }

    /// The path of `reference`, if it is inside the config's folder (or anywhere, with
    /// `--allow-outside-files`).
    pub(super) fn inside(&self, reference: &str) -> Result<PathBuf, String> {
        let path = self.base.join(reference.trim_start_matches("file://"));
        if !self.anywhere {
            // One message for a file that is missing and one that is outside: two would
            // tell whoever wrote the config which paths exist on this machine.
            let inside = match (path.canonicalize(), self.base.canonicalize()) {
                (Ok(p), Ok(b)) => p.starts_with(&b),
                _ => false,
            };
            if !inside {
                return Err(format!(
                    "{reference} is not a file inside the config's folder ({}) once `..` and links are followed, or does not exist: import reads only files beside the config; check the path, or pass --allow-outside-files if you trust this config to copy any file of this machine into the bench",
                    self.base.display()
                ));
            }
        }
        Ok(path)
    }
}

/// Most paths a glob may visit: a config globbing `**/*` over a large tree stops here.
const MOST_VISITED: usize = 100_000;

impl Reader {
    /// The files a glob (`file://prompts/*.txt`, `tests/**/*.yaml`, `{a,b}.txt`) names,
    /// sorted, as `file://` references relative to the config's folder; an empty list when
    /// none matches.
    pub(super) fn glob(&self, pattern: &str) -> Result<Vec<String>, String> {
        let pattern = pattern.trim_start_matches("file://");
        let matcher = regex::Regex::new(&glob_regex(pattern))
            .map_err(|e| format!("the glob `{pattern}` cannot be read: {e}"))?;
        // The folders before the first wildcard are walked from, not matched.
        let fixed: Vec<&str> = pattern
            .split('/')
            .take_while(|part| !part.contains(['*', '?', '{', '[']))
            .collect();
        let root_rel = fixed.join("/");
        let mut found = Vec::new();
        let mut visited = 0;
        let mut stack = vec![self.base.join(&root_rel)];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                visited += 1;
                if visited > MOST_VISITED {
                    return Err(format!(
                        "the glob `{pattern}` visits more than {MOST_VISITED} paths: name a narrower one"
                    ));
                }
                let path = entry.path();
                let Ok(rel) = path.strip_prefix(&self.base) else {
                    continue;
                };
                let rel = rel.to_string_lossy().replace('\\', "/");
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    stack.push(path);
                } else if matcher.is_match(&rel) {
                    found.push(format!("file://{rel}"));
                }
            }
        }
        found.sort();
        Ok(found)
    }
}

/// Whether a reference is a glob (promptfoo expands `*`, `?`, `{a,b}` and `[…]`).
pub(super) fn is_glob(reference: &str) -> bool {
    reference.contains(['*', '?']) || (reference.contains('{') && reference.contains(','))
}

/// A glob as an anchored regex over paths relative to the config's folder: `**/` any
/// folders (or none), `*` any name part, `?` one character, `{a,b}` either.
fn glob_regex(pattern: &str) -> String {
    let pattern = pattern.trim_start_matches("./");
    let mut re = String::from("^");
    let mut chars = pattern.chars().peekable();
    let mut braces = 0;
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                chars.next();
                if chars.peek() == Some(&'/') {
                    chars.next();
                    re.push_str("(?:.*/)?");
                } else {
                    re.push_str(".*");
                }
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' => {
                braces += 1;
                re.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                re.push(')');
            }
            ',' if braces > 0 => re.push('|'),
            '[' => re.push('['),
            ']' => re.push(']'),
            other => re.push_str(&regex::escape(&other.to_string())),
        }
    }
    re.push('$');
    re
}

/// A promptfoo YAML (or JSON) text as promptfoo reads it: js-yaml's YAML 1.2 core schema,
/// where only `true` and `false` are booleans (`Yes`, `No`, `on`, `off` stay text).
pub(super) fn yaml(text: &str, what: &str) -> Result<Value, String> {
    let root = promptgauge_suite::yaml::parse(Path::new(what), text, "promptfoo file")
        .map_err(|e| format!("{what} is not valid YAML: {e}"))?;
    Ok(root.map_or(Value::Null, |r| {
        r.to_value(promptgauge_suite::yaml::Scalars::Typed)
    }))
}

/// The config with each `$ref: '#/…'` replaced by what the config holds at that JSON
/// pointer, as promptfoo dereferences its config before reading it (`assertionTemplates`
/// reused by `$ref`); a reference elsewhere (another file) stays, and is named where it is
/// read. At most 32 references deep, so a reference to itself ends.
pub(super) fn dereference(config: &Value) -> Value {
    fn walk(v: &Value, root: &Value, depth: usize) -> Value {
        match v {
            Value::Object(o) => {
                let target = o
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix('#'))
                    .and_then(|pointer| root.pointer(pointer));
                match target {
                    Some(t) if depth < 32 => walk(t, root, depth + 1),
                    _ => Value::Object(
                        o.iter()
                            .map(|(k, v)| (k.clone(), walk(v, root, depth)))
                            .collect(),
                    ),
                }
            }
            Value::Array(a) => Value::Array(a.iter().map(|v| walk(v, root, depth)).collect()),
            other => other.clone(),
        }
    }
    walk(config, config, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_into_the_config_are_what_they_point_at() {
        let c = yaml(
            "assertionTemplates:\n  pirate: {type: icontains, value: arrr}\ntests:\n  - assert:\n      - $ref: '#/assertionTemplates/pirate'\n      - $ref: 'other.yaml#/x'\nloop: {$ref: '#/loop'}\n",
            "c.yaml",
        )
        .unwrap();
        let d = dereference(&c);
        assert_eq!(
            d["tests"][0]["assert"][0],
            serde_json::json!({"type": "icontains", "value": "arrr"})
        );
        assert_eq!(d["tests"][0]["assert"][1]["$ref"], "other.yaml#/x");
        assert!(d["loop"].is_object());
    }

    #[test]
    fn yaml_is_read_by_the_core_schema_as_js_yaml_reads_it() {
        let v = yaml("a: Yes\nb: on\nc: true\nd: 010\ne: 1.50\nf: No\n", "t.yaml").unwrap();
        assert_eq!(v["a"], "Yes");
        assert_eq!(v["b"], "on");
        assert_eq!(v["c"], true);
        assert_eq!(v["d"], 10);
        assert_eq!(v["e"], 1.5);
        assert_eq!(v["f"], "No");
    }

    #[test]
    fn globs_match_as_promptfoo_s_do() {
        let m = |p: &str, path: &str| regex::Regex::new(&glob_regex(p)).unwrap().is_match(path);
        assert!(m("prompts/*.txt", "prompts/a.txt"));
        assert!(!m("prompts/*.txt", "prompts/x/a.txt"));
        assert!(m("tests/**/*.yaml", "tests/a.yaml"));
        assert!(m("tests/**/*.yaml", "tests/x/y/a.yaml"));
        assert!(m("p/{a,b}.txt", "p/b.txt"));
        assert!(!m("p/{a,b}.txt", "p/c.txt"));
        assert!(m("p?.txt", "p1.txt") && !m("p?.txt", "p.txt"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("p/q")).unwrap();
        for f in ["p/b.txt", "p/a.txt", "p/q/c.txt", "p/d.md"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        let r = Reader::beside(&dir.path().join("c.yaml"), false);
        assert_eq!(
            r.glob("file://p/*.txt").unwrap(),
            ["file://p/a.txt", "file://p/b.txt"]
        );
        assert_eq!(r.glob("p/**/*.txt").unwrap().len(), 3);
        assert!(r.glob("nothing/*.txt").unwrap().is_empty());
    }
}
