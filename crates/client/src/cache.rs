//! The response cache (`--cache`): complete answers keyed on what determines them (base
//! URL, model, rendered messages, parameters and repeat index), so an unchanged job is never
//! paid for twice. One JSON line per answer, appended as answers arrive.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ChatMessage;
use crate::Usage;
use promptgauge_base::hash::StableHasher;

/// A complete answer, as cached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedAnswer {
    pub key: String,
    pub text: String,
    #[serde(default)]
    pub reasoning: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

/// The response cache: answers by key, appended to a JSON-lines file.
pub struct Cache {
    file: File,
    answers: HashMap<String, CachedAnswer>,
}

/// The cache key: two independent 64-bit digests of everything that shapes the answer.
pub fn key(
    endpoint: &str,
    model: &str,
    messages: &[ChatMessage],
    params: &Map<String, Value>,
    repeat: u32,
) -> String {
    key_at(endpoint, model, messages, params, Value::from(repeat))
}

/// [`key`] with its index given whole: a judge's call is `vote`, or `[vote, repeat]` past
/// the first repeat (so every repeat has its own verdicts, and caches made before keep
/// their first repeat's).
pub fn key_at(
    endpoint: &str,
    model: &str,
    messages: &[ChatMessage],
    params: &Map<String, Value>,
    index: Value,
) -> String {
    let text = serde_json::json!([endpoint, model, messages, params, index]).to_string();
    let digest = |salt: &[u8]| {
        let mut h = StableHasher::default();
        h.write(salt);
        h.write(text.as_bytes());
        h.finish()
    };
    format!("{:016x}{:016x}", digest(b"a"), digest(b"b"))
}

impl Cache {
    /// Where `--cache` keeps answers: shared by every run under `reports_root`.
    pub fn path_under(reports_root: &Path) -> std::path::PathBuf {
        reports_root.join(".cache").join("responses.jsonl")
    }

    /// Opens (creating) the cache file; lines that do not parse (a torn write) are skipped.
    pub fn open(path: &Path) -> std::io::Result<Cache> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut answers = HashMap::new();
        if path.exists() {
            let mut reader = BufReader::new(promptgauge_base::files::open_regular(path)?);
            let mut line = String::new();
            while reader.read_line(&mut line)? > 0 {
                if line.ends_with('\n')
                    && let Ok(a) = serde_json::from_str::<CachedAnswer>(&line)
                {
                    answers.insert(a.key.clone(), a);
                }
                line.clear();
            }
        }
        let mut file = OpenOptions::new().create(true).append(true).open(path)?;
        // A torn last line must not swallow the next answer.
        if std::fs::metadata(path)?.len() > 0 {
            let text = std::fs::read(path)?;
            if text.last() != Some(&b'\n') {
                file.write_all(b"\n")?;
            }
        }
        Ok(Cache { file, answers })
    }

    /// How many answers it holds.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether it holds no answer.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// The answer cached under `key`.
    pub fn get(&self, key: &str) -> Option<&CachedAnswer> {
        self.answers.get(key)
    }

    pub fn put(&mut self, answer: CachedAnswer) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&answer)?;
        line.push(b'\n');
        self.file.write_all(&line)?;
        self.file.flush()?;
        self.answers.insert(answer.key.clone(), answer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(text: &str) -> Vec<ChatMessage> {
        vec![ChatMessage::new("user", text)]
    }

    #[test]
    fn keys_depend_on_everything_that_shapes_the_answer() {
        let p = Map::new();
        let k = key("u", "m", &msg("x"), &p, 0);
        assert_eq!(k, key("u", "m", &msg("x"), &p, 0));
        assert_ne!(k, key("u2", "m", &msg("x"), &p, 0));
        assert_ne!(k, key("u", "m2", &msg("x"), &p, 0));
        assert_ne!(k, key("u", "m", &msg("y"), &p, 0));
        assert_ne!(k, key("u", "m", &msg("x"), &p, 1));
        let mut p2 = Map::new();
        p2.insert("temperature".into(), Value::from(1));
        assert_ne!(k, key("u", "m", &msg("x"), &p2, 0));
    }

    #[test]
    fn survives_reopening_and_a_torn_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c/responses.jsonl");
        let answer = |k: &str| CachedAnswer {
            key: k.into(),
            text: "B".into(),
            reasoning: String::new(),
            tool_calls: vec![],
            finish_reason: Some("stop".into()),
            usage: None,
            model: None,
        };
        let mut c = Cache::open(&path).unwrap();
        c.put(answer("a")).unwrap();
        drop(c);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"key\":\"torn")
            .unwrap();
        let mut c = Cache::open(&path).unwrap();
        assert_eq!(c.len(), 1);
        c.put(answer("b")).unwrap();
        let c = Cache::open(&path).unwrap();
        assert!(c.get("a").is_some() && c.get("b").is_some());
    }
}
