//! Scorers for structured answers: a JSON document checked against a schema
//! (`json_schema`), the share of expected fields an extraction got right (`fields`), and the
//! tool calls a model made (`tool_call`).

use std::path::Path;

use serde_json::{Map, Value};

use super::scorer::{CaseError, Score, ScoreContext, ScoreFuture, ScoreInput, Scorer, ready};
use super::spec_error::SpecError;
use super::text::{parse_number, strip_code_fence};
use promptgauge_client::ToolCall;
use promptgauge_suite::Case;

/// The JSON document in an answer: the whole answer, or inside a Markdown fence, or the first
/// object or array that parses.
pub(super) fn extract_json(text: &str) -> Option<Value> {
    let body = strip_code_fence(text.trim());
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return Some(v);
    }
    for (i, c) in body.char_indices() {
        if c == '{' || c == '[' {
            let mut stream = serde_json::Deserializer::from_str(&body[i..]).into_iter::<Value>();
            if let Some(Ok(v)) = stream.next() {
                return Some(v);
            }
        }
    }
    None
}

/// The case's structured expected answer: its JSON, or its text parsed as JSON (a CSV cell).
fn expected_json(case: &Case) -> Option<Value> {
    case.expected_json.clone().or_else(|| {
        case.expected
            .first()
            .and_then(|t| serde_json::from_str(t.trim()).ok())
    })
}

/// Compact JSON, cut for the journal's `extracted`.
fn shown(v: &Value) -> String {
    promptgauge_client::protocol::truncate(&v.to_string(), 2000)
}

// ---- json_schema ----

/// The answer is JSON that validates against a schema: 1, else 0 with the first violation.
pub(crate) struct JsonSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for JsonSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonSchema")
    }
}

impl JsonSchema {
    /// A scorer for the spec's `schema`: the schema itself, or the name of its file under
    /// `dir`.
    pub(crate) fn read(schema: &Value, dir: &Path) -> Result<JsonSchema, SpecError> {
        let schema = match schema {
            Value::String(file) => {
                let path = dir.join(file);
                let text = promptgauge_suite::error::read_text(&path, "schema")
                    .map_err(SpecError::ReadSchema)?;
                serde_json::from_str(&text)
                    .map_err(|error| SpecError::SchemaNotJson { path, error })?
            }
            inline => inline.clone(),
        };
        JsonSchema::new(&schema)
    }

    /// A scorer for `schema` (already read from its file, if it came from one).
    pub(crate) fn new(schema: &Value) -> Result<JsonSchema, SpecError> {
        let validator = jsonschema::validator_for(schema)
            .map_err(|e| SpecError::InvalidSchema(e.to_string()))?;
        Ok(JsonSchema { validator })
    }
}

impl Scorer for JsonSchema {
    fn looks_for(&self, _: &Case) -> Option<&'static str> {
        Some("JSON")
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let Some(doc) = extract_json(&input.answer.text) else {
            return ready(Score {
                detail: Some(serde_json::json!({"violation": "the answer is not JSON"})),
                ..Score::binary(false, None)
            });
        };
        let violation = self.validator.iter_errors(&doc).next().map(|e| {
            serde_json::json!({
                "path": e.instance_path().to_string(),
                "message": e.to_string(),
            })
        });
        ready(Score {
            detail: violation
                .clone()
                .map(|v| serde_json::json!({ "violation": v })),
            ..Score::binary(violation.is_none(), Some(shown(&doc)))
        })
    }
}

// ---- fields ----

/// The share of the expected object's leaf fields the answer's JSON gets right.
#[derive(Debug)]
pub(crate) struct Fields {
    /// Leaf paths that zero the score when wrong.
    pub(crate) required: Vec<String>,
    pub(crate) case_sensitive: bool,
    /// Numbers within this of the expected value match.
    pub(crate) tolerance: f64,
}

/// Every leaf of a JSON value with its path: `name`, `address.city`, `items[0].sku`.
fn leaves(value: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, p, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, format!("{path}[{i}]"), out);
            }
        }
        leaf => out.push((path, leaf.clone())),
    }
}

/// The value at a leaf path in `doc`.
fn at<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    let mut value = doc;
    for part in path.split('.') {
        let (key, indices) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            value = value.as_object()?.get(key)?;
        }
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            value = value.as_array()?.get(index.parse::<usize>().ok()?)?;
        }
    }
    Some(value)
}

/// A `fields` score's parts: each expected field's share right, a list's items counted
/// together (`items[].sku` for `items[0].sku`, `items[1].sku`), in the order of their paths.
#[derive(Default)]
struct FieldParts(Vec<(String, usize, usize)>);

impl FieldParts {
    fn add(&mut self, path: &str, ok: bool) {
        let name = part_name(path);
        match self.0.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, right, of)) => {
                *right += usize::from(ok);
                *of += 1;
            }
            None => self.0.push((name, usize::from(ok), 1)),
        }
    }

    fn shares(self) -> Vec<(String, f64)> {
        self.0
            .into_iter()
            .map(|(name, right, of)| (name, right as f64 / of as f64))
            .collect()
    }
}

/// The parts a `fields` score gives on `case`: its expected answer's fields, list positions
/// folded, in order (what a gate may name before the run).
pub(crate) fn field_part_names(case: &Case) -> Vec<String> {
    let mut expected = Vec::new();
    if let Some(v) = expected_json(case) {
        leaves(&v, String::new(), &mut expected);
    }
    let mut parts = FieldParts::default();
    for (path, _) in &expected {
        parts.add(path, true);
    }
    parts.0.into_iter().map(|(name, ..)| name).collect()
}

/// A leaf path with its list positions taken out: `items[0].sku` → `items[].sku`.
fn part_name(path: &str) -> String {
    let mut name = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                name.push('[');
            }
            ']' => {
                in_index = false;
                name.push(']');
            }
            _ if in_index => {}
            c => name.push(c),
        }
    }
    name
}

impl Fields {
    /// A `fields` scorer; numbers compare within `tolerance` (≥ 0).
    pub(crate) fn new(
        required: Vec<String>,
        case_sensitive: bool,
        tolerance: f64,
    ) -> Result<Fields, SpecError> {
        if !tolerance.is_finite() || tolerance < 0.0 {
            return Err(SpecError::Tolerance(tolerance));
        }
        Ok(Fields {
            required,
            case_sensitive,
            tolerance,
        })
    }

    fn same(&self, want: &Value, got: &Value) -> bool {
        let number = |v: &Value| match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => parse_number(s),
            _ => None,
        };
        match (want, got) {
            (Value::Number(_), _) | (_, Value::Number(_)) => {
                matches!((number(want), number(got)), (Some(a), Some(b)) if (a - b).abs() <= self.tolerance)
            }
            (Value::String(a), Value::String(b)) => {
                let (a, b) = (a.trim(), b.trim());
                if self.case_sensitive {
                    a == b
                } else {
                    a.to_lowercase() == b.to_lowercase()
                }
            }
            (a, b) => a == b,
        }
    }
}

impl Scorer for Fields {
    fn looks_for(&self, _: &Case) -> Option<&'static str> {
        Some("JSON")
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        let Some(Value::Object(expected)) = expected_json(case) else {
            return Err(CaseError::FieldsNotObject);
        };
        let mut all = Vec::new();
        leaves(&Value::Object(expected), String::new(), &mut all);
        for r in &self.required {
            if !all.iter().any(|(p, _)| {
                p == r || p.starts_with(&format!("{r}.")) || p.starts_with(&format!("{r}["))
            }) {
                return Err(CaseError::RequiredField {
                    field: r.clone(),
                    expected: all
                        .iter()
                        .map(|(p, _)| p.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(())
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let mut expected = Vec::new();
        if let Some(v) = expected_json(input.case) {
            leaves(&v, String::new(), &mut expected);
        }
        let doc = extract_json(&input.answer.text);
        let mut report = Vec::with_capacity(expected.len());
        let (mut right, mut required_wrong) = (0usize, Vec::new());
        let mut parts = FieldParts::default();
        for (path, want) in &expected {
            let got = doc.as_ref().and_then(|d| at(d, path));
            let ok = got.is_some_and(|g| self.same(want, g));
            right += usize::from(ok);
            parts.add(path, ok);
            let required = self.required.iter().any(|r| {
                path == r
                    || path.starts_with(&format!("{r}."))
                    || path.starts_with(&format!("{r}["))
            });
            if required && !ok {
                required_wrong.push(path.clone());
            }
            report.push(serde_json::json!({
                "field": path, "expected": want, "got": got, "ok": ok,
            }));
        }
        let share = if expected.is_empty() {
            0.0
        } else {
            right as f64 / expected.len() as f64
        };
        let value = if required_wrong.is_empty() {
            share
        } else {
            0.0
        };
        let mut detail = Map::new();
        detail.insert("fields".into(), Value::Array(report));
        if !required_wrong.is_empty() {
            detail.insert("required_wrong".into(), serde_json::json!(required_wrong));
        }
        if doc.is_none() {
            detail.insert("error".into(), "the answer is not JSON".into());
        }
        ready(Score {
            value,
            extracted: doc.as_ref().map(shown),
            usage: None,
            detail: Some(Value::Object(detail)),
            judge: Vec::new(),
            parts: parts.shares(),
        })
    }
}

// ---- tool_call ----

pub(crate) use promptgauge_suite::CallOrder;

/// The tool calls the model made against the expected `{name, arguments}` (or a list).
#[derive(Debug)]
pub(super) struct ToolCalls {
    /// Arguments must equal the expected ones exactly (else: the expected ones are a subset).
    pub(crate) exact: bool,
    pub(crate) order: CallOrder,
}

/// `want` is contained in `got`: every key of an expected object is there with a matching
/// value; arrays and scalars are equal.
fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => w
            .iter()
            .all(|(k, v)| g.get(k).is_some_and(|gv| subset(v, gv))),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (a, b) => a == b,
    }
}

/// The expected calls: `{name, arguments}` or a list of them.
fn expected_calls(case: &Case) -> Result<Vec<(String, Value)>, CaseError> {
    let calls = match expected_json(case).ok_or(CaseError::ToolCallShape)? {
        Value::Array(items) => items,
        one => vec![one],
    };
    calls
        .into_iter()
        .map(|c| {
            let name = c
                .get("name")
                .and_then(Value::as_str)
                .ok_or(CaseError::ToolCallShape)?;
            let arguments = match c.get("arguments") {
                None => Value::Object(Map::new()),
                // As the API sends them: a JSON object encoded as a string.
                Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => return Err(CaseError::ArgumentsText(name.to_string())),
                },
                Some(v @ Value::Object(_)) => v.clone(),
                Some(other) => {
                    return Err(CaseError::ArgumentsNotObject {
                        name: name.to_string(),
                        found: other.clone(),
                    });
                }
            };
            Ok((name.to_string(), arguments))
        })
        .collect()
}

impl ToolCalls {
    fn matches(&self, want: &(String, Value), got: &ToolCall) -> bool {
        let Ok(args) = serde_json::from_str::<Value>(if got.arguments.trim().is_empty() {
            "{}"
        } else {
            &got.arguments
        }) else {
            return false;
        };
        want.0 == got.name
            && if self.exact {
                want.1 == args
            } else {
                subset(&want.1, &args)
            }
    }

    /// For `any` order: a matching of expected to actual calls, one each (backtracking; the
    /// lists are short).
    fn assign(&self, want: &[(String, Value)], got: &[ToolCall], used: &mut Vec<bool>) -> bool {
        let Some((first, rest)) = want.split_first() else {
            return true;
        };
        for (i, g) in got.iter().enumerate() {
            if !used[i] && self.matches(first, g) {
                used[i] = true;
                if self.assign(rest, got, used) {
                    return true;
                }
                used[i] = false;
            }
        }
        false
    }
}

impl Scorer for ToolCalls {
    fn looks_for(&self, case: &Case) -> Option<&'static str> {
        // A case that expects no call is answered right by making none.
        expected_calls(case)
            .is_ok_and(|calls| !calls.is_empty())
            .then_some("a tool call")
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        expected_calls(case).map(drop)
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let want = expected_calls(input.case).unwrap_or_default();
        let got = &input.answer.tool_calls;
        let pass = want.len() == got.len()
            && match self.order {
                CallOrder::Strict => want.iter().zip(got).all(|(w, g)| self.matches(w, g)),
                CallOrder::Any => self.assign(&want, got, &mut vec![false; got.len()]),
            };
        let made: Vec<String> = got
            .iter()
            .map(|c| format!("{}({})", c.name, c.arguments))
            .collect();
        let detail = serde_json::json!({
            "expected": want.iter().map(|(n, a)| serde_json::json!({"name": n, "arguments": a})).collect::<Vec<_>>(),
            "made": got.iter().map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
        });
        ready(Score {
            detail: Some(detail),
            ..Score::binary(pass, (!made.is_empty()).then(|| made.join("; ")))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Answer;
    use serde_json::json;

    fn case(expected: Value) -> Case {
        Case {
            expected: vec![expected.to_string()],
            expected_json: Some(expected),
            ..promptgauge_suite::testing::case()
        }
    }

    fn score(s: &dyn Scorer, case: &Case, answer: Answer) -> Score {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(s.score(
            ScoreInput {
                key: "k",
                repeat: 0,
                case,
                messages: &[],
                answer: &answer,
            },
            &ScoreContext::default(),
        ))
        .unwrap()
    }

    fn text(t: &str) -> Answer {
        Answer {
            text: t.into(),
            ..Answer::default()
        }
    }

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(
            extract_json("```json\n{\"a\": 1}\n```"),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            extract_json("Here: {\"a\": [1]} done"),
            Some(json!({"a": [1]}))
        );
        assert_eq!(extract_json("no json"), None);
    }

    #[test]
    fn fields_score_the_share_right_and_required_fields_zero_it() {
        let c = case(json!({"name": "Ada", "age": 36, "address": {"city": "London"}}));
        let f = Fields {
            required: vec![],
            case_sensitive: false,
            tolerance: 0.0,
        };
        f.check(&c).unwrap();
        let s = score(
            &f,
            &c,
            text(r#"{"name": "ada ", "age": "36", "address": {"city": "Paris"}}"#),
        );
        assert!((s.value - 2.0 / 3.0).abs() < 1e-12, "{s:?}");
        let fields = s.detail.unwrap()["fields"].clone();
        let city = fields
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == "address.city")
            .unwrap();
        assert_eq!(
            (&city["got"], &city["ok"]),
            (&json!("Paris"), &json!(false))
        );
        let strict = Fields {
            required: vec!["address".into()],
            ..f
        };
        strict.check(&c).unwrap();
        let s = score(
            &strict,
            &c,
            text(r#"{"name": "Ada", "age": 36, "address": {"city": "Paris"}}"#),
        );
        assert_eq!(s.value, 0.0);
        assert!(
            Fields {
                required: vec!["zip".into()],
                case_sensitive: false,
                tolerance: 0.0
            }
            .check(&c)
            .unwrap_err()
            .to_string()
            .contains("`zip`")
        );
        assert_eq!(score(&strict, &c, text("not json")).value, 0.0);
    }

    #[test]
    fn a_schema_passes_or_names_the_first_violation() {
        let s = JsonSchema::new(&json!({
            "type": "object", "required": ["total"],
            "properties": {"total": {"type": "number"}}
        }))
        .unwrap();
        let c = case(json!({}));
        assert_eq!(score(&s, &c, text(r#"{"total": 12.5}"#)).value, 1.0);
        let bad = score(&s, &c, text(r#"{"total": "12"}"#));
        assert_eq!(bad.value, 0.0);
        assert!(bad.detail.unwrap()["violation"]["path"] == "/total");
        assert!(JsonSchema::new(&json!({"type": 12})).is_err());
    }

    #[test]
    fn tool_calls_match_by_name_and_arguments_in_order_or_not() {
        let call = |n: &str, a: &str| ToolCall {
            id: String::new(),
            name: n.into(),
            arguments: a.into(),
        };
        let c = case(json!([
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
            {"name": "get_time", "arguments": {}}
        ]));
        let answer = |calls: Vec<ToolCall>| Answer {
            tool_calls: calls,
            ..Answer::default()
        };
        let strict = ToolCalls {
            exact: false,
            order: CallOrder::Strict,
        };
        strict.check(&c).unwrap();
        let right = vec![
            call("get_weather", r#"{"city": "Oslo", "unit": "C"}"#),
            call("get_time", ""),
        ];
        assert_eq!(score(&strict, &c, answer(right.clone())).value, 1.0);
        let swapped: Vec<ToolCall> = right.iter().rev().cloned().collect();
        assert_eq!(score(&strict, &c, answer(swapped.clone())).value, 0.0);
        let any = ToolCalls {
            exact: false,
            order: CallOrder::Any,
        };
        assert_eq!(score(&any, &c, answer(swapped)).value, 1.0);
        let exact = ToolCalls {
            exact: true,
            order: CallOrder::Strict,
        };
        assert_eq!(
            score(&exact, &c, answer(right)).value,
            0.0,
            "an extra argument"
        );
        assert_eq!(score(&strict, &c, answer(vec![])).value, 0.0);
        assert!(strict.check(&case(json!({"arguments": {}}))).is_err());
        // Arguments written as the API sends them (an encoded string) mean the same.
        let encoded = case(json!({"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}));
        assert!(strict.check(&encoded).is_ok());
        assert!(
            strict
                .check(&case(json!({"name": "get_weather", "arguments": "Oslo"})))
                .is_err()
        );
        assert!(
            strict
                .check(&case(json!({"name": "get_weather", "arguments": [1]})))
                .is_err()
        );
    }

    #[test]
    fn each_field_is_a_part_nested_ones_by_path_and_a_list_s_items_together() {
        let c = case(json!({
            "id": "A-1",
            "customer": {"name": "Ada", "address": {"city": "London"}},
            "items": [{"sku": "x1", "qty": 2}, {"sku": "x2", "qty": 1}, {"sku": "x3", "qty": 5}]
        }));
        let f = Fields {
            required: vec!["id".into()],
            case_sensitive: false,
            tolerance: 0.0,
        };
        f.check(&c).unwrap();
        let answer = r#"{"id": "A-1", "customer": {"name": "Ada", "address": {"city": "Paris"}},
            "items": [{"sku": "x1", "qty": 2}, {"sku": "x9", "qty": 1}, {"sku": "x3", "qty": 4}]}"#;
        let s = score(&f, &c, text(answer));
        let names: Vec<&str> = s.parts.iter().map(|(n, _)| n.as_str()).collect();
        // In the order of their paths; a list's positions folded into one part.
        assert_eq!(
            names,
            [
                "customer.address.city",
                "customer.name",
                "id",
                "items[].qty",
                "items[].sku"
            ]
        );
        let part = |name: &str| s.parts.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(part("id"), 1.0);
        assert_eq!(part("customer.name"), 1.0);
        assert_eq!(part("customer.address.city"), 0.0);
        assert!((part("items[].sku") - 2.0 / 3.0).abs() < 1e-12);
        assert!((part("items[].qty") - 2.0 / 3.0).abs() < 1e-12);
        // The whole is the share of leaves right: 6 of 9.
        assert!((s.value - 6.0 / 9.0).abs() < 1e-12, "{s:?}");
    }

    #[test]
    fn a_wrong_required_field_zeroes_the_whole_but_each_part_keeps_its_own_result() {
        let c = case(json!({"category": "billing", "priority": "high", "lang": "en"}));
        let f = Fields {
            required: vec!["category".into()],
            case_sensitive: false,
            tolerance: 0.0,
        };
        let s = score(
            &f,
            &c,
            text(r#"{"category": "shipping", "priority": "HIGH", "lang": "en"}"#),
        );
        assert_eq!(s.value, 0.0);
        assert_eq!(
            s.parts,
            [
                ("category".to_string(), 0.0),
                ("lang".to_string(), 1.0),
                ("priority".to_string(), 1.0)
            ]
        );
        // An answer that is not JSON gets every field wrong, each still a part.
        let none = score(&f, &c, text("billing, high"));
        assert_eq!(none.parts.len(), 3);
        assert!(none.parts.iter().all(|(_, v)| *v == 0.0));
        // A field expected in a list and missing from the answer counts against its part.
        let listed = case(json!({"tags": ["a", "b"]}));
        let s = score(&f, &listed, text(r#"{"tags": ["a"]}"#));
        assert_eq!(s.parts, [("tags[]".to_string(), 0.5)]);
    }
}
