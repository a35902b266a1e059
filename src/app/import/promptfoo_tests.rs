//! promptfoo's tests as it reads them (docs/guide/import-promptfoo.md, "Tests"): a list,
//! a file or a glob of files (YAML, JSON, JSONL, CSV), `defaultTest` inline or from a file,
//! and a CSV row's `__expected` columns read as promptfoo's `assertionFromString` reads them
//! (`contains: x`, `not-icontains: x`, `javascript: …`, `file://check.py`, `similar(0.9): …`;
//! anything else an exact answer).

use serde_json::{Map, Value, json};

use super::reader::{Reader, is_glob, yaml};

/// One test as promptfoo holds it (`{vars, assert, description, …}`), and the case id a
/// CSV `id` column gives it.
pub(super) struct TestRead {
    pub test: Value,
    pub id: Option<String>,
}

/// The assert types promptfoo's CSV `__expected` names before a `:`.
const ASSERT_TYPES: [&str; 62] = [
    "answer-relevance",
    "bleu",
    "classifier",
    "contains",
    "contains-all",
    "contains-any",
    "contains-html",
    "contains-json",
    "contains-sql",
    "contains-xml",
    "context-faithfulness",
    "context-recall",
    "context-relevance",
    "conversation-relevance",
    "cost",
    "equals",
    "factuality",
    "finish-reason",
    "g-eval",
    "gleu",
    "guardrails",
    "human",
    "icontains",
    "icontains-all",
    "icontains-any",
    "is-html",
    "is-json",
    "is-refusal",
    "is-sql",
    "is-valid-function-call",
    "is-valid-openai-function-call",
    "is-valid-openai-tools-call",
    "is-xml",
    "javascript",
    "latency",
    "levenshtein",
    "llm-rubric",
    "meteor",
    "model-graded-closedqa",
    "model-graded-factuality",
    "moderation",
    "perplexity",
    "perplexity-score",
    "pi",
    "python",
    "regex",
    "rouge-n",
    "ruby",
    "select-best",
    "similar",
    "starts-with",
    "tool-call-f1",
    "trace-error-spans",
    "trace-span-count",
    "trace-span-duration",
    "webhook",
    "word-count",
    "max-score",
    "search-rubric",
    "sql",
    "xml",
    "html",
];

/// A CSV `__expected` cell as the assert promptfoo makes of it.
pub(super) fn assertion_from_string(expected: &str) -> Value {
    let js_file = expected.starts_with("file://")
        && [".js", ".cjs", ".mjs", ".ts", ".cts", ".mts"]
            .iter()
            .any(|e| expected.ends_with(e) || expected.contains(&format!("{e}:")));
    for prefix in ["javascript:", "fn:", "eval:"] {
        if let Some(body) = expected.strip_prefix(prefix) {
            return json!({"type": "javascript", "value": body.trim()});
        }
    }
    if js_file {
        return json!({"type": "javascript", "value": expected.trim()});
    }
    if let Some(rubric) = expected
        .strip_prefix("grade:")
        .or_else(|| expected.strip_prefix("llm-rubric:"))
    {
        return json!({"type": "llm-rubric", "value": rubric});
    }
    if let Some(body) = expected.strip_prefix("python:") {
        return json!({"type": "python", "value": body.trim()});
    }
    if expected.starts_with("file://") && (expected.ends_with(".py") || expected.contains(".py:")) {
        return json!({"type": "python", "value": expected.trim()});
    }
    let types = ASSERT_TYPES.join("|");
    let Ok(re) = regex::Regex::new(&format!(
        r"^(not-)?({types})(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$"
    )) else {
        return json!({"type": "equals", "value": expected});
    };
    let Some(c) = re.captures(expected) else {
        return json!({"type": "equals", "value": expected});
    };
    let kind = &c[2];
    let full = format!("{}{kind}", c.get(1).map_or("", |m| m.as_str()));
    let value = c.get(4).map_or("", |m| m.as_str());
    let threshold = c.get(3).and_then(|t| t.as_str().parse::<f64>().ok());
    let mut a = json!({"type": full});
    if kind.ends_with("-all") || kind.ends_with("-any") {
        a["value"] = json!(value.split(',').map(str::trim).collect::<Vec<_>>());
    } else if c.get(4).is_some() {
        a["value"] = json!(if matches!(kind, "is-json" | "contains-json") {
            value.to_string()
        } else {
            value.trim().to_string()
        });
    }
    let thresholded = [
        "answer-relevance",
        "classifier",
        "context-faithfulness",
        "context-recall",
        "context-relevance",
        "cost",
        "latency",
        "levenshtein",
        "perplexity-score",
        "perplexity",
        "rouge-n",
        "similar",
        "starts-with",
    ];
    if thresholded.contains(&kind) {
        let default = if kind == "similar" { 0.8 } else { 0.75 };
        a["threshold"] = json!(threshold.filter(|t| *t != 0.0).unwrap_or(default));
    }
    a
}

/// `tests:` (or one of its entries) as the tests it holds: a list, a test, or a
/// `file://` file or glob of them.
pub(super) fn read_tests(files: &Reader, tests: &Value) -> Result<Vec<TestRead>, String> {
    let mut all = Vec::new();
    match tests {
        Value::Array(items) => {
            for t in items {
                all.extend(read_tests(files, t)?);
            }
        }
        Value::Object(_) => all.push(TestRead {
            test: tests.clone(),
            id: None,
        }),
        Value::String(s) => {
            let reference = if s.starts_with("file://") {
                s.clone()
            } else {
                format!("file://{s}")
            };
            let matched = if is_glob(&reference) {
                files.glob(&reference)?
            } else {
                vec![reference.clone()]
            };
            if matched.is_empty() {
                return Err(format!("tests `{s}` matches no file"));
            }
            for m in matched {
                all.extend(tests_file(files, &m)?);
            }
        }
        other => {
            return Err(format!(
                "a test is {}, not a mapping or a file://",
                promptgauge_client::protocol::truncate(&other.to_string(), 60)
            ));
        }
    }
    Ok(all)
}

/// The tests in one file, by its extension.
fn tests_file(files: &Reader, reference: &str) -> Result<Vec<TestRead>, String> {
    let lower = reference.to_ascii_lowercase();
    if [".js", ".cjs", ".mjs", ".ts", ".py"]
        .iter()
        .any(|e| lower.ends_with(e) || lower.contains(&format!("{e}:")))
    {
        return Err(format!(
            "tests `{reference}` are generated by code promptgauge does not run: write them to a YAML or CSV file and import that"
        ));
    }
    if lower.contains("docs.google.com") || lower.starts_with("huggingface://") {
        return Err(format!(
            "tests `{reference}` live online; download them to a CSV beside the config"
        ));
    }
    let (_, text) = files.read(reference)?;
    if lower.ends_with(".csv") {
        return csv_tests(&text).map_err(|e| format!("{reference}: {e}"));
    }
    let values: Vec<Value> = if lower.ends_with(".jsonl") {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| {
                serde_json::from_str(l).map_err(|e| format!("{reference} line {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?
    } else {
        match yaml(&text, reference)? {
            Value::Array(items) => items,
            one @ Value::Object(_) => vec![one],
            _ => return Err(format!("{reference} is not a list of tests")),
        }
    };
    Ok(values
        .into_iter()
        .map(|test| TestRead { test, id: None })
        .collect())
}

/// A promptfoo tests CSV: a column per variable, `__expected…` columns of asserts, and
/// `__description`, `__prefix`, `__suffix`, `__metric`, `__threshold`, `__providerOutput`;
/// an `id` column names the case (and stays a variable, as in promptfoo).
fn csv_tests(text: &str) -> Result<Vec<TestRead>, String> {
    let mut reader = csv::Reader::from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let mut tests = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| e.to_string())?;
        let mut vars = Map::new();
        // Each `__expected…` column's assert, by its column.
        let mut asserts: Vec<(String, Value)> = Vec::new();
        let mut test = Map::new();
        let mut options = Map::new();
        let mut metadata = Map::new();
        let mut config = Vec::new();
        let mut id = None;
        for (h, v) in headers.iter().zip(record.iter()) {
            if (h == "id" || h == "__id") && !v.trim().is_empty() {
                id = Some(v.trim().to_string());
            }
            match h {
                _ if h.starts_with("__expected") => {
                    if !v.trim().is_empty() {
                        asserts.push((h.to_string(), assertion_from_string(v)));
                    }
                }
                // promptfoo's test metadata (`__metadata:tags[]` a list): not variables.
                _ if h.starts_with("__metadata:") => {
                    if !v.is_empty() {
                        metadata.insert(h["__metadata:".len()..].to_string(), json!(v));
                    }
                }
                // `__config:__expected2:threshold`: a setting of that column's assert.
                _ if h.starts_with("__config:") => {
                    if !v.is_empty() {
                        config.push((h["__config:".len()..].to_string(), v.to_string()));
                    }
                }
                "__description" => {
                    test.insert("description".into(), json!(v));
                }
                "__prefix" | "__suffix" if !v.is_empty() => {
                    options.insert(h.trim_start_matches('_').into(), json!(v));
                }
                "__metric" | "__threshold" | "__providerOutput" if !v.is_empty() => {
                    test.insert(h.trim_start_matches('_').into(), json!(v));
                }
                "__id" | "__prefix" | "__suffix" | "__metric" | "__threshold"
                | "__providerOutput" => {}
                _ => {
                    vars.insert(h.to_string(), json!(v));
                }
            }
        }
        apply_settings(config, &mut asserts, &mut test);
        if !metadata.is_empty() {
            test.insert("metadata".into(), Value::Object(metadata));
        }
        test.insert("vars".into(), Value::Object(vars));
        test.insert(
            "assert".into(),
            Value::Array(asserts.into_iter().map(|(_, a)| a).collect()),
        );
        if !options.is_empty() {
            test.insert("options".into(), Value::Object(options));
        }
        tests.push(TestRead {
            test: Value::Object(test),
            id,
        });
    }
    Ok(tests)
}

/// A CSV row's `__config:COLUMN:KEY` cells: each sets KEY (`threshold`) of the assert of
/// that `__expected…` column; one naming no such assert stays on the test, where the import
/// names it.
fn apply_settings(
    config: Vec<(String, String)>,
    asserts: &mut [(String, Value)],
    test: &mut Map<String, Value>,
) {
    for (setting, value) in config {
        let target = setting.rsplit_once(':').and_then(|(column, key)| {
            let a = asserts.iter_mut().find(|(c, _)| *c == column)?;
            Some((a, key))
        });
        match target {
            Some(((_, a), key)) => {
                a[key] = value
                    .trim()
                    .parse::<f64>()
                    .map_or(json!(value), |n| json!(n));
            }
            None => {
                test.insert(format!("__config:{setting}"), json!(value));
            }
        }
    }
}

/// `defaultTest`, inline or from a `file://` file.
pub(super) fn default_test(files: &Reader, config: &Value) -> Result<Map<String, Value>, String> {
    match config.get("defaultTest") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(o)) => Ok(o.clone()),
        Some(Value::String(s)) if s.starts_with("file://") => files
            .mapping(s)?
            .ok_or_else(|| format!("defaultTest {s} does not hold a mapping")),
        Some(_) => Err("`defaultTest` is neither a mapping nor a file://".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_expected_cells_are_the_asserts_promptfoo_makes_of_them() {
        let t = |s: &str| assertion_from_string(s);
        assert_eq!(t("Paris"), json!({"type": "equals", "value": "Paris"}));
        assert_eq!(
            t("javascript:file://check.js"),
            json!({"type": "javascript", "value": "file://check.js"})
        );
        assert_eq!(
            t("file://check.js"),
            json!({"type": "javascript", "value": "file://check.js"})
        );
        assert_eq!(
            t("python: len(output) < 9"),
            json!({"type": "python", "value": "len(output) < 9"})
        );
        assert_eq!(t("file://g.py")["type"], "python");
        assert_eq!(
            t("contains-any: a, b"),
            json!({"type": "contains-any", "value": ["a", "b"]})
        );
        assert_eq!(
            t("not-icontains: sorry"),
            json!({"type": "not-icontains", "value": "sorry"})
        );
        assert_eq!(
            t("similar(0.9): hi"),
            json!({"type": "similar", "value": "hi", "threshold": 0.9})
        );
        assert_eq!(t("similar: hi")["threshold"], 0.8);
        assert_eq!(t("is-json"), json!({"type": "is-json"}));
        assert_eq!(t("grade: polite")["type"], "llm-rubric");
        // Not a type: an exact answer, colon and all.
        assert_eq!(t("Note: x")["type"], "equals");
    }

    #[test]
    fn metadata_and_config_columns_are_no_variables() {
        let tests = csv_tests(
            "q,__expected1,__expected2,__metadata:kind,__config:__expected2:threshold\nhi,contains: x,similar: y,greeting,0.6\n",
        )
        .unwrap();
        let t = &tests[0].test;
        assert_eq!(t["vars"], json!({"q": "hi"}));
        assert_eq!(t["metadata"], json!({"kind": "greeting"}));
        assert_eq!(t["assert"][1]["threshold"], 0.6);
        assert!(t["assert"][0].get("threshold").is_none());
    }

    #[test]
    fn an_empty_expected_cell_is_no_assert_and_ids_name_cases() {
        let tests = csv_tests("id,q,__expected,__expected2\nc1,hi,,contains: x\n").unwrap();
        assert_eq!(tests[0].id.as_deref(), Some("c1"));
        assert_eq!(
            tests[0].test["assert"],
            json!([{"type": "contains", "value": "x"}])
        );
        assert_eq!(tests[0].test["vars"], json!({"id": "c1", "q": "hi"}));
    }
}
