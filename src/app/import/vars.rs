//! A promptfoo test's variables as promptfoo reads them (docs/guide/import-promptfoo.md,
//! "Tests and variables"): a vars file (`vars: file://vars.yaml`), a `file://` value replaced by its
//! file's text (YAML as its JSON), a glob value and a list of strings expanded into every
//! combination (one test with a list of 5 and a list of 5 is 25 cases), as promptfoo's
//! `generateVarCombinations` does. Files the case attaches (images, PDFs, audio) stay
//! references: they become the case's files later.

use serde_json::{Map, Value};

use super::reader::{Reader, is_glob, yaml};

/// The most cases one test may expand into.
const MOST_COMBINATIONS: usize = 100_000;

/// A test's `vars:` as a map: written inline, or a `file://` YAML or JSON file of them.
pub(super) fn vars_of(files: &Reader, vars: Option<&Value>) -> Result<Map<String, Value>, String> {
    match vars {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(Value::String(s)) if s.starts_with("file://") => files
            .mapping(s)?
            .ok_or_else(|| format!("{s} does not hold a mapping of variables")),
        Some(other) => Err(format!(
            "`vars` is {}, not a mapping or a file://",
            promptgauge_client::protocol::truncate(&other.to_string(), 60)
        )),
    }
}

/// Every combination of a test's variables, in promptfoo's order (the first variable's
/// values vary slowest): a list whose first item is text gives one combination per item,
/// a `file://` glob one per file it matches; any other value is one.
pub(super) fn combinations(
    files: &Reader,
    vars: &Map<String, Value>,
) -> Result<Vec<Map<String, Value>>, String> {
    let mut all = vec![Map::new()];
    for (key, value) in vars {
        let values: Vec<Value> = match value {
            Value::String(s) if s.starts_with("file://") && is_glob(s) => {
                let matched = files.glob(s)?;
                if matched.is_empty() {
                    return Err(format!("variable `{key}`: {s} matches no file"));
                }
                matched.into_iter().map(Value::String).collect()
            }
            Value::Array(items) if items.first().is_some_and(Value::is_string) => items.clone(),
            other => vec![other.clone()],
        };
        if all.len() * values.len().max(1) > MOST_COMBINATIONS {
            return Err(format!(
                "the test's list variables make more than {MOST_COMBINATIONS} combinations"
            ));
        }
        all = all
            .into_iter()
            .flat_map(|combo| {
                values.iter().map(move |v| {
                    let mut c = combo.clone();
                    c.insert(key.clone(), v.clone());
                    c
                })
            })
            .collect();
    }
    Ok(all)
}

/// What promptfoo puts in the prompt for a `file://` variable: the file's text trimmed
/// (a YAML file as its JSON); `None` for a file the case attaches (an image, a PDF,
/// audio), and an error for code (`.js`, `.py`), which promptgauge does not run.
pub(super) fn file_value(files: &Reader, reference: &str) -> Result<Option<String>, String> {
    if super::files::attachable(reference) {
        return Ok(None);
    }
    let ext = reference
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    if matches!(
        ext.as_str(),
        "js" | "cjs" | "mjs" | "ts" | "cts" | "mts" | "py"
    ) {
        return Err(format!(
            "{reference} is code promptfoo runs to make the variable; promptgauge does not run it: write its output into the case"
        ));
    }
    let (_, text) = files.read(reference)?;
    Ok(Some(match ext.as_str() {
        "yaml" | "yml" => yaml(&text, reference)?.to_string(),
        _ => text.trim().to_string(),
    }))
}

/// A case's variables with each `file://` value replaced by what promptfoo puts in the
/// prompt, and one trailing newline dropped from each text, as promptfoo drops it.
pub(super) fn read_file_values(
    files: &Reader,
    vars: &mut Map<String, Value>,
) -> Result<(), String> {
    for (name, value) in vars.iter_mut() {
        if let Value::String(s) = value {
            if s.starts_with("file://") {
                if let Some(text) =
                    file_value(files, s).map_err(|e| format!("variable `{name}`: {e}"))?
                {
                    *s = text;
                }
            } else if let Some(t) = s.strip_suffix('\n') {
                *s = t.to_string();
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_of_text_expand_into_every_combination_and_other_lists_stay_whole() {
        let dir = tempfile::tempdir().unwrap();
        let r = Reader::beside(&dir.path().join("c.yaml"), false);
        let vars = json!({
            "lang": ["en", "fr", "de", "es", "it"],
            "topic": ["a", "b", "c", "d", "e"],
            "n": 3,
            "points": [{"x": 1}, {"x": 2}]
        });
        let combos = combinations(&r, vars.as_object().unwrap()).unwrap();
        assert_eq!(combos.len(), 25);
        assert_eq!(combos[0]["lang"], "en");
        assert_eq!(combos[1]["topic"], "b");
        assert_eq!(combos[5]["lang"], "fr");
        assert_eq!(combos[24]["points"], json!([{"x": 1}, {"x": 2}]));
    }

    #[test]
    fn file_values_read_as_promptfoo_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("doc.txt"), "  the text\n\n").unwrap();
        std::fs::write(dir.path().join("d.yaml"), "a: Yes\n").unwrap();
        std::fs::write(dir.path().join("v.yaml"), "q: from a file\n").unwrap();
        let r = Reader::beside(&dir.path().join("c.yaml"), false);
        let mut vars = json!({"doc": "file://doc.txt", "d": "file://d.yaml", "img": "file://x.png", "t": "two\n"})
            .as_object()
            .unwrap()
            .clone();
        read_file_values(&r, &mut vars).unwrap();
        assert_eq!(vars["doc"], "the text");
        assert_eq!(vars["d"], r#"{"a":"Yes"}"#);
        assert_eq!(vars["img"], "file://x.png");
        assert_eq!(vars["t"], "two");
        let v = vars_of(&r, Some(&json!("file://v.yaml"))).unwrap();
        assert_eq!(v["q"], "from a file");
        let e = file_value(&r, "file://make.py").unwrap_err();
        assert!(e.contains("does not run"), "{e}");
    }
}
