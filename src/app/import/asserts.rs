//! promptfoo asserts beyond the text scorers (docs/guide/import-promptfoo.md, "Asserts"):
//! `not-*` of every assert an expression can say, `contains-all`, `similar` (the embedding
//! scorer), `g-eval` (a judge with the criteria), and `javascript` / `python`: a one-line
//! check as an `expr` expression when it can be written faithfully, else run as promptfoo
//! runs it, by a small shim the bench carries (`scorers/promptfoo-assert.cjs` or `.py`)
//! through the `command` scorer, with promptfoo's calling convention (`output`,
//! `context.vars`; a boolean, a number or `{pass, score, reason}`).

use serde_json::{Value, json};

use super::bench::Import;

/// The shim that runs promptfoo's JavaScript asserts as a `command` scorer.
const JS_SHIM: &str = include_str!("shims/promptfoo-assert.cjs");
/// The shim that runs promptfoo's Python asserts as a `command` scorer.
const PY_SHIM: &str = include_str!("shims/promptfoo-assert.py");

/// A text as a template-expression string literal.
fn lit(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// The texts of an assert's value: a list, or one text (comma-separated for the
/// `-any`/`-all` kinds, as promptfoo splits it).
fn texts(value: Option<&Value>, text: Option<&str>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), String::from))
            .collect(),
        _ => text
            .map(|t| t.split(',').map(|p| p.trim().to_string()).collect())
            .unwrap_or_default(),
    }
}

/// promptfoo's `is-json`: `JSON.parse(output)` succeeds, the whole output and nothing
/// else (JSON in prose or in a Markdown fence is not JSON to it).
pub(super) const STRICT_JSON: &str = "(output|fromjson) is defined";

/// promptfoo's `equals` as an expression: `String(value) === output`, the whole output,
/// untrimmed (`exact` would trim and normalise); an object or a list equals the output
/// parsed as JSON, deeply (`isDeepStrictEqual(value, JSON.parse(output))`).
pub(super) fn equals_expr(value: Option<&Value>, text: Option<&str>) -> Option<String> {
    match value {
        Some(v @ (Value::Object(_) | Value::Array(_))) => {
            let want = format!("({}|fromjson)", lit(&v.to_string()));
            Some(format!(
                "(output|fromjson) is defined and (output|fromjson) == {want}"
            ))
        }
        Some(Value::Number(n)) => Some(format!("output == {}", lit(&js_number(n)))),
        _ => text.map(|t| format!("output == {}", lit(t))),
    }
}

/// A number as JavaScript's `String()` writes it: `42` for 42.0 (js-yaml reads `42.0` as
/// the number 42), `0.5`, `1e+21`.
fn js_number(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

/// The expression that passes exactly when promptfoo's assert `kind` passes, for the
/// kinds an expression can say; `None` for the others.
pub(super) fn expr_of(kind: &str, value: Option<&Value>, text: Option<&str>) -> Option<String> {
    let one = || text.map(lit);
    let join = |op: &str, lower: bool| {
        let items = texts(value, text);
        (!items.is_empty()).then(|| {
            items
                .iter()
                .map(|t| {
                    if lower {
                        format!("{} in output|lower", lit(&t.to_lowercase()))
                    } else {
                        format!("{} in output", lit(t))
                    }
                })
                .collect::<Vec<_>>()
                .join(op)
        })
    };
    Some(match kind {
        "contains" => format!("{} in output", one()?),
        "icontains" => format!("{} in output|lower", lit(&text?.to_lowercase())),
        "equals" => equals_expr(value, text)?,
        "starts-with" => format!("output is startingwith({})", one()?),
        "regex" => format!("output is matches({})", one()?),
        "contains-any" => join(" or ", false)?,
        "icontains-any" => join(" or ", true)?,
        "contains-all" => join(" and ", false)?,
        "icontains-all" => join(" and ", true)?,
        "javascript" => promptgauge_grade::javascript::to_expr(text?)?,
        "is-json" if value.is_none_or(Value::is_null) => STRICT_JSON.to_string(),
        _ => return None,
    })
}

/// Whether request parameters ask for an answer by a JSON schema, which promptfoo's OpenAI
/// provider parses before the asserts see it.
pub(super) fn asks_json_schema(params: &serde_json::Map<String, Value>) -> bool {
    params
        .get("response_format")
        .and_then(|f| f.get("type"))
        .and_then(Value::as_str)
        == Some("json_schema")
}

impl Import {
    /// Whether promptfoo hands code asserts the answer parsed: every variant, or every
    /// endpoint, asks for a JSON schema's answer. Only some: the notes say so, once.
    fn answers_parsed(&mut self) -> bool {
        let endpoints = if self.endpoints.is_empty() {
            asks_json_schema(&self.params)
        } else {
            self.endpoints.iter().all(|e| {
                e.get("params")
                    .and_then(Value::as_object)
                    .is_some_and(asks_json_schema)
            })
        };
        let variants = !self.variants.is_empty() && self.schema_variants == self.variants.len();
        if !(endpoints || variants) && self.schema_variants > 0 && !self.said_mixed_schema {
            self.said_mixed_schema = true;
            self.notes.push(format!(
                "{} of {} prompts ask for a JSON schema's answer: promptfoo hands their `javascript`/`python` asserts the parsed answer, the bench hands every variant's the text",
                self.schema_variants,
                self.variants.len()
            ));
        }
        endpoints || variants
    }

    /// An assert the text scorers do not cover, as (scorer, the answers it compares with);
    /// `None` for a kind with no faithful promptgauge counterpart.
    pub(super) fn more_assertion(
        &mut self,
        kind: &str,
        a: &Value,
        text: Option<&str>,
        test: usize,
    ) -> Option<(Value, Option<Vec<String>>)> {
        let value = a.get("value");
        let threshold = a.get("threshold").and_then(Value::as_f64);
        if let Some(positive) = kind.strip_prefix("not-") {
            let Some(e) = expr_of(positive, value, text) else {
                self.notes.push(format!(
                    "test {test}: assert `{kind}` has no promptgauge counterpart (its positive form is no expression): left out"
                ));
                return None;
            };
            return Some((json!({"kind": "expr", "expr": format!("not ({e})")}), None));
        }
        match kind {
            "contains-all" | "icontains-all" => Some((
                json!({"kind": "expr", "expr": expr_of(kind, value, text)?}),
                None,
            )),
            "similar" => Some((
                json!({"kind": "embedding", "threshold": threshold.unwrap_or(0.8)}),
                Some(match value {
                    Some(Value::Array(_)) => texts(value, text),
                    _ => vec![text?.to_string()],
                }),
            )),
            "g-eval" => {
                // Each criterion a part of its own, one name for one rubric over the bench.
                let texts = texts(value, text);
                let criteria: Vec<Value> = texts
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let like = texts[..i].iter().filter(|t| *t == c).count();
                        let name = self.part_names.name("g-eval", &format!("{c}#{like}"));
                        json!({"name": name, "rubric": c})
                    })
                    .collect();
                if criteria.is_empty() {
                    return None;
                }
                // G-Eval scores each criterion 0–10 (promptfoo: 0–1 and a pass at its
                // threshold, 0.7 unless told): the bench reports the mean score instead.
                self.notes.push(format!(
                    "test {test}: assert `g-eval` became a 0–10 judge of its criteria; its pass threshold ({}) is not applied: the reports give the mean score",
                    threshold.unwrap_or(0.7)
                ));
                Some((
                    json!({"kind": "judge", "scale": "0-10", "criteria": criteria}),
                    None,
                ))
            }
            "javascript" => match expr_of(kind, value, text).filter(|_| threshold.is_none()) {
                Some(e) => Some((json!({"kind": "expr", "expr": e}), None)),
                None => self.code_assert("javascript", text?, threshold),
            },
            "python" => self.code_assert("python", text?, threshold),
            "is-json" | "contains-json" => self.json_assert(kind, value, text, test),
            _ => None,
        }
    }

    /// `is-json`: the whole output parses as JSON (and, with a schema, is valid against
    /// it); `contains-json`: JSON somewhere in the output (the whole, a Markdown fence, or
    /// the first object or list in the text: the `json_schema` scorer's search), valid
    /// against the schema when there is one.
    fn json_assert(
        &mut self,
        kind: &str,
        value: Option<&Value>,
        text: Option<&str>,
        test: usize,
    ) -> Option<(Value, Option<Vec<String>>)> {
        let schema = match value {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(Value::String(_)) => Some(self.schema_of(text?, kind, test)?),
            Some(other) => {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s schema is {}, not a schema: left out",
                    promptgauge_client::protocol::truncate(&other.to_string(), 60)
                ));
                return None;
            }
        };
        let strict = json!({"kind": "expr", "expr": STRICT_JSON});
        let scorer = match (kind, schema) {
            ("is-json", None) => strict,
            ("is-json", Some(s)) => {
                json!({"kind": "all", "of": [strict, {"kind": "json_schema", "schema": s}]})
            }
            (_, s) => json!({"kind": "json_schema", "schema": s.unwrap_or_else(|| json!({}))}),
        };
        Some((scorer, None))
    }

    /// A schema written as text: a `file://` JSON or YAML file beside the config, or YAML
    /// inline (promptfoo reads both); `None`, with a note, when it is neither.
    fn schema_of(&mut self, text: &str, kind: &str, test: usize) -> Option<Value> {
        let read = match (text.trim().strip_prefix("file://"), &self.reader) {
            (Some(_), Some(reader)) => reader
                .read(text.trim())
                .and_then(|(_, t)| super::reader::yaml(&t, text.trim())),
            (Some(_), None) => Err("no config folder to read it from".into()),
            (None, _) => super::reader::yaml(text, "the schema"),
        };
        match read {
            Ok(schema @ Value::Object(_)) => Some(schema),
            Ok(_) => {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s schema `{}` is not a mapping: left out",
                    promptgauge_client::protocol::truncate(text, 60)
                ));
                None
            }
            Err(e) => {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s schema cannot be read ({e}): left out"
                ));
                None
            }
        }
    }

    /// A `javascript` or `python` assert run as promptfoo runs it: its code (or the file it
    /// names, copied into the bench) through the shim, as a `command` scorer.
    fn code_assert(
        &mut self,
        lang: &str,
        code: &str,
        threshold: Option<f64>,
    ) -> Option<(Value, Option<Vec<String>>)> {
        let (shim, program, ext) = match lang {
            "python" => ("scorers/promptfoo-assert.py", "python3", "py"),
            _ => ("scorers/promptfoo-assert.cjs", "node", "js"),
        };
        if !self.files.iter().any(|(f, _)| f == shim) {
            let text = if lang == "python" { PY_SHIM } else { JS_SHIM };
            self.files.push((shim.to_string(), text.to_string()));
        }
        let code = code.trim();
        let target = match code.strip_prefix("file://") {
            // A file of the config's: copied beside the shim once every test is read.
            Some(reference) => {
                let (path, function) = match reference.rsplit_once(':') {
                    Some((p, f)) if !f.contains('/') && !f.contains('.') => (p, Some(f)),
                    _ => (reference, None),
                };
                let name = std::path::Path::new(path)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_else(|| format!("assert.{ext}"));
                let rel = format!("scorers/{name}");
                if !self.code_files.iter().any(|(_, r)| *r == rel) {
                    self.code_files
                        .push((format!("file://{path}"), rel.clone()));
                }
                match function {
                    Some(f) => format!("file:{rel}:{f}"),
                    None => format!("file:{rel}"),
                }
            }
            None => format!("inline:{code}"),
        };
        let mut run = vec![program.to_string(), shim.to_string(), target];
        if let Some(t) = threshold {
            run.push(format!("--threshold={t}"));
        }
        if self.answers_parsed() {
            run.push("--parse-json".into());
        }
        Some((json!({"kind": "command", "run": run, "binary": true}), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asserts_say_as_expressions_what_promptfoo_checks() {
        assert_eq!(
            expr_of("contains", None, Some("Paris")).unwrap(),
            r#""Paris" in output"#
        );
        assert_eq!(
            expr_of("icontains-all", Some(&json!(["A", "b"])), None).unwrap(),
            r#""a" in output|lower and "b" in output|lower"#
        );
        assert!(expr_of("similar", None, Some("x")).is_none());
        let mut im = Import::default();
        let (s, e) = im
            .more_assertion(
                "not-icontains",
                &json!({"value": "Sorry"}),
                Some("Sorry"),
                1,
            )
            .unwrap();
        assert_eq!(s["expr"], r#"not ("sorry" in output|lower)"#);
        assert!(e.is_none());
        let (s, _) = im
            .more_assertion(
                "javascript",
                &json!({}),
                Some("output.length < 10 && output.includes('a')"),
                1,
            )
            .unwrap();
        assert_eq!(s["kind"], "expr");
        let (s, _) = im
            .more_assertion(
                "javascript",
                &json!({}),
                Some("file://checks/long.js:isLong"),
                1,
            )
            .unwrap();
        assert_eq!(
            s["run"],
            json!([
                "node",
                "scorers/promptfoo-assert.cjs",
                "file:scorers/long.js:isLong"
            ])
        );
        assert_eq!(im.code_files[0].0, "file://checks/long.js");
        let (s, _) = im
            .more_assertion("g-eval", &json!({"threshold": 0.5}), Some("Is it kind?"), 1)
            .unwrap();
        assert_eq!(s["scale"], "0-10");
        assert_eq!(s["criteria"][0]["rubric"], "Is it kind?");
        assert!(im.notes[0].contains("(0.5)"), "{:?}", im.notes);
    }
}
