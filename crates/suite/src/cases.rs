//! Case files: `.jsonl`, `.yaml`/`.yml` and `.csv` (docs/guide/files.md, "Cases").

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::GradeSpec;
use super::attachments::files_of;
use super::error::{FilePos, InputError, read_text};
use super::yaml::{self, Scalars, YamlShape};
use promptgauge_client::ChatMessage;
use promptgauge_client::attachment::{Attachment, Placed};
use std::sync::Arc;

/// A case's template variables, in file order. A small vector rather than a map: most
/// cases have one to three variables, and a bench may hold a hundred thousand cases.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vars(pub Vec<(String, Value)>);

impl Vars {
    /// The value of a variable.
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

impl std::ops::Index<&str> for Vars {
    type Output = Value;

    fn index(&self, name: &str) -> &Value {
        self.get(name).unwrap_or(&Value::Null)
    }
}

impl From<Map<String, Value>> for Vars {
    fn from(map: Map<String, Value>) -> Self {
        let mut v: Vec<(String, Value)> = map.into_iter().collect();
        v.shrink_to_fit();
        Vars(v)
    }
}

impl serde::Serialize for Vars {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One input with a known answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub id: String,
    pub vars: Vars,
    /// Acceptable answers; any one of them is correct. A structured answer (an object, or a
    /// list of objects) is kept whole in `expected_json` and shown here as its JSON text.
    pub expected: Vec<String>,
    /// The expected answer when it is structured: the fields of an extraction, the tool
    /// calls expected. `None` for text answers.
    pub expected_json: Option<Value>,
    /// Earlier turns of a conversation, spliced where a variant lists `- history`.
    pub messages: Vec<ChatMessage>,
    /// The files it attaches (images, documents, audio), in order; a variant places them
    /// (docs/guide/attachments.md). Files of its history's turns are in those turns.
    pub files: Vec<Arc<Attachment>>,
    /// What each tool call returns in this case's agent loop (`tool_results:`,
    /// docs/guide/tools.md).
    pub tool_script: Vec<super::tools::ScriptedCall>,
    /// Overrides the bench's grader for this case.
    pub grade: Option<GradeSpec>,
    pub tags: Vec<String>,
    /// Cases that are not independent (the same passage, template or user) share a group;
    /// tests and intervals then treat the group as the unit.
    pub group: Option<String>,
    pub location: FilePos,
}

/// One case as written: an input whose answer is known (docs/guide/files.md, "Cases").
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Case")]
pub(super) struct RawCase {
    /// Unique across all the bench's case files.
    #[schemars(schema_with = "id_schema")]
    id: Option<Value>,
    /// The template variables the variants' prompts use.
    #[serde(default)]
    vars: Option<Map<String, Value>>,
    /// The known answer: a string, a list of acceptable strings, or JSON (an object, a list
    /// of objects) for the structured scorers.
    #[schemars(schema_with = "expected_schema")]
    expected: Option<Value>,
    /// This case's scorer, over the bench's `grade:`.
    #[serde(default)]
    grade: Option<GradeSpec>,
    /// Slices the reports break accuracy down by.
    #[serde(default)]
    tags: Option<Vec<String>>,
    /// Cases that share a passage, template or user share a group, the unit of the
    /// statistics.
    #[serde(default)]
    #[schemars(schema_with = "group_schema")]
    group: Option<Value>,
    /// Earlier turns of a conversation, spliced where a variant lists `- history`.
    #[serde(default)]
    #[schemars(schema_with = "history_schema")]
    messages: Option<Vec<Map<String, Value>>>,
    /// Images, PDFs, documents or audio the case attaches: a path (relative to the case
    /// file), a URL or a data URL; a list of them; or names to them (docs/guide/attachments.md).
    #[serde(default)]
    #[schemars(with = "super::attachments::WrittenFiles")]
    files: Option<Value>,
    /// What each tool call returns in this case's agent loop (docs/guide/tools.md).
    #[serde(default)]
    tool_results: Option<Vec<super::tools::ScriptedCall>>,
}

/// What [`case_id`] takes.
fn id_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": ["string", "number"], "minLength": 1 })
}

/// What [`expected_of`] takes (`null`, or none, for scorers that need no answer).
fn expected_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "number", "boolean", "array", "object", "null"],
        "minItems": 1
    })
}

/// What [`group_of`] takes.
fn group_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": ["string", "number", "null"], "minLength": 1 })
}

/// What [`history_turn`] takes: a role, its text, and what else the turn carries.
fn history_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let files = generator.subschema_for::<super::attachments::WrittenFiles>();
    schemars::json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["role"],
            "properties": {
                "role": { "enum": HISTORY_ROLES },
                "content": { "type": ["string", "null"] },
                "tool_calls": { "type": "array" },
                "files": files
            }
        }
    })
}

const CASE_FIX: &str =
    r#"each case looks like {"id": "c-001", "vars": {"question": "…"}, "expected": "…"}"#;

/// Loads one case file, choosing the format by extension.
pub(crate) fn load(path: &Path) -> Result<Vec<Case>, InputError> {
    let text = read_text(path, "case")?;
    parse(path, &text)
}

/// Parses a case file's text; `path` names it in errors and chooses the format.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Case>, InputError> {
    let ext = extension_of(path);
    let loader = match ext.as_str() {
        "jsonl" | "ndjson" => load_jsonl,
        "yaml" | "yml" => load_yaml,
        "csv" => load_csv,
        _ => {
            return Err(InputError::new(
                FilePos::file(path),
                format!("unknown case file type `.{ext}`"),
            )
            .fix("use .jsonl (one JSON object per line), .yaml (a list) or .csv (header row with id and expected)"));
        }
    };
    refuse_control_characters(path, text)?;
    let cases = loader(path, text)?;
    if cases.is_empty() {
        return Err(
            InputError::new(FilePos::file(path), "the case file has no cases")
                .fix(CASE_FIX.to_string()),
        );
    }
    Ok(cases)
}

/// A case file's extension, lower-cased: what chooses its format.
fn extension_of(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase()
}

fn load_jsonl(path: &Path, text: &str) -> Result<Vec<Case>, InputError> {
    let mut cases = Vec::new();
    let file: std::sync::Arc<Path> = std::sync::Arc::from(path);
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value = json_line(path, n, line)?;
        if !value.is_object() {
            return Err(InputError::new(
                FilePos::line(path, n),
                format!("expected a JSON object, found {}", kind_of(&value)),
            )
            .fix(CASE_FIX));
        }
        refuse_nul(&value, &FilePos::line(path, n))?;
        let raw: RawCase =
            serde_json::from_value(value).map_err(|e| shape_error(path, n, &e.to_string()))?;
        cases.push(finish(raw, FilePos::line_in(&file, n), cases.len())?);
    }
    Ok(cases)
}

/// One line of a JSON Lines file, read strictly: a key written twice is refused.
fn json_line(path: &Path, n: usize, line: &str) -> Result<Value, InputError> {
    super::json::from_str(line).map_err(|e| {
        let here = FilePos::at(path, n, e.column());
        if e.is_data() {
            let message = super::json::message(&e);
            InputError::new(
                here,
                format!("{message}: the case would silently keep only one"),
            )
            .fix("keep one of them")
        } else {
            InputError::new(here, format!("invalid JSON: {e}"))
                .fix("each line must be one complete JSON object")
        }
    })
}

fn load_yaml(path: &Path, text: &str) -> Result<Vec<Case>, InputError> {
    let Some(root) = yaml::parse(path, text, "case file")? else {
        return Ok(Vec::new());
    };
    let YamlShape::Seq(items) = &root.kind else {
        return Err(InputError::new(
            FilePos::line(path, root.line),
            format!(
                "invalid case file: it is {}, not a list of cases",
                root.kind_name()
            ),
        )
        .fix("write each case as an item of a list: `- id: c-001`"));
    };
    let file: std::sync::Arc<Path> = std::sync::Arc::from(path);
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let here = FilePos::line_in(&file, item.line);
            let value = yaml_case(item);
            if !value.is_object() {
                return Err(InputError::new(
                    here,
                    format!("case #{} is {}, not a mapping", i + 1, item.kind_name()),
                )
                .fix(CASE_FIX));
            }
            refuse_nul(&value, &here)?;
            let raw: RawCase = serde_json::from_value(value)
                .map_err(|e| shape_error(path, item.line, &e.to_string()))?;
            finish(raw, here, i)
        })
        .collect()
}

/// A YAML case as JSON. What reaches a prompt or is compared as an answer keeps the text
/// its author wrote (`NO`, `010`, `1e3`); settings (`grade:`), the arguments a scripted
/// call matches, and structured answers and results (JSON compared or sent as JSON) are
/// read by YAML 1.2's core schema.
fn yaml_case(item: &yaml::Node) -> Value {
    let YamlShape::Map(entries) = &item.kind else {
        return item.to_value(Scalars::AsWritten);
    };
    let typed_unless = |node: &yaml::Node, text_keys: &[&str]| match &node.kind {
        YamlShape::Seq(turns) => Value::Array(
            turns
                .iter()
                .map(|turn| match &turn.kind {
                    YamlShape::Map(fields) => Value::Object(
                        fields
                            .iter()
                            .map(|f| {
                                let scalar = matches!(f.node.kind, YamlShape::Scalar { .. });
                                let how = if scalar && text_keys.contains(&f.key.as_str()) {
                                    Scalars::Text
                                } else {
                                    Scalars::Typed
                                };
                                (f.key.clone(), f.node.to_value(how))
                            })
                            .collect(),
                    ),
                    _ => turn.to_value(Scalars::Typed),
                })
                .collect(),
        ),
        _ => node.to_value(Scalars::Typed),
    };
    let structured = |node: &yaml::Node| match &node.kind {
        YamlShape::Map(_) => true,
        YamlShape::Seq(items) => items
            .iter()
            .any(|i| matches!(i.kind, YamlShape::Map(_) | YamlShape::Seq(_))),
        YamlShape::Scalar { .. } => false,
    };
    let fields = entries.iter().map(|yaml::Entry { key, node, .. }| {
        let value = match key.as_str() {
            "grade" => node.to_value(Scalars::Typed),
            "expected" if structured(node) => node.to_value(Scalars::Typed),
            // A turn's text as written; its tool calls are JSON.
            "messages" => typed_unless(node, &["content", "role"]),
            // What a call returns reaches the model as written; what it matches is JSON.
            "tool_results" => typed_unless(node, &["result", "tool"]),
            // Text whatever it looks like: `id: 010`, `tags: [NO]`.
            "id" | "group" | "tags" | "files" => node.to_value(Scalars::Text),
            _ => node.to_value(Scalars::AsWritten),
        };
        (key.clone(), value)
    });
    Value::Object(fields.collect())
}

fn load_csv(path: &Path, text: &str) -> Result<Vec<Case>, InputError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| csv_error(path, &e))?.clone();
    let names: Vec<String> = headers.iter().map(|h| h.trim().to_string()).collect();
    check_header(path, &names)?;
    let mut cases = Vec::new();
    let file: std::sync::Arc<Path> = std::sync::Arc::from(path);
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(path, &e))?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        let mut raw = RawCase {
            id: None,
            vars: Some(Map::new()),
            expected: None,
            grade: None,
            tags: None,
            group: None,
            messages: None,
            files: None,
            tool_results: None,
        };
        for (name, field) in names.iter().zip(record.iter()) {
            match name.as_str() {
                "id" => raw.id = Some(Value::String(field.to_string())),
                "expected" => raw.expected = Some(Value::String(field.to_string())),
                "group" if !field.trim().is_empty() => {
                    raw.group = Some(Value::String(field.to_string()))
                }
                "group" => {}
                // Paths separated by `;`, as tags are.
                "files" => {
                    let paths: Vec<Value> = field
                        .split(';')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| Value::String(p.to_string()))
                        .collect();
                    raw.files = (!paths.is_empty()).then_some(Value::Array(paths));
                }
                // Tags are `;`-separated so a CSV can still carry slices.
                "tags" => {
                    raw.tags = Some(
                        field
                            .split(';')
                            .map(str::trim)
                            .filter(|t| !t.is_empty())
                            .map(String::from)
                            .collect(),
                    )
                }
                var => {
                    if let Some(vars) = raw.vars.as_mut() {
                        vars.insert(var.to_string(), Value::String(field.to_string()));
                    }
                }
            }
        }
        cases.push(finish(raw, FilePos::line_in(&file, line), cases.len())?);
    }
    Ok(cases)
}

/// A CSV header names `id` and `expected`, and no column twice (each case would keep
/// only one of two).
fn check_header(path: &Path, names: &[String]) -> Result<(), InputError> {
    for (i, name) in names.iter().enumerate() {
        if let Some(first) = names[..i].iter().position(|n| n == name) {
            return Err(InputError::new(
                FilePos::line(path, 1),
                format!(
                    "the header row names `{name}` twice (columns {} and {}): each case would silently keep only one",
                    first + 1,
                    i + 1
                ),
            )
            .fix("rename or remove one of the two columns"));
        }
    }
    for required in ["id", "expected"] {
        if !names.iter().any(|h| h == required) {
            return Err(InputError::new(
                FilePos::line(path, 1),
                format!("the header row has no `{required}` column (found: {})", names.join(", ")),
            )
            .fix("the first row names the columns: id, expected, then one column per template variable"));
        }
    }
    Ok(())
}

fn csv_error(path: &Path, e: &csv::Error) -> InputError {
    let line = e.position().map(|p| p.line() as usize);
    let here = match line {
        Some(l) => FilePos::line(path, l),
        None => FilePos::file(path),
    };
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => InputError::new(
            here,
            format!("this row has {len} fields but the header has {expected_len}"),
        )
        .fix("quote fields that contain commas, and give every row one value per column"),
        _ => {
            InputError::new(here, format!("invalid CSV: {e}")).fix("check the quoting on this row")
        }
    }
}

/// The same rule for every format: a case file holds no control character but tab and
/// line breaks. JSON refuses them inside strings anyway; a CSV or YAML file would carry a
/// NUL into a prompt, a command scorer's input or a report.
fn refuse_control_characters(path: &Path, text: &str) -> Result<(), InputError> {
    let Some(at) = text
        .find(|c: char| c.is_ascii_control() && !matches!(c, '\t' | '\n' | '\r') && c != '\u{7f}')
    else {
        return Ok(());
    };
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1;
    let c = text[at..].chars().next().unwrap_or('\0');
    Err(InputError::new(
        FilePos::at(path, line, column),
        format!(
            "the case file holds the control character U+{:04X}",
            u32::from(c)
        ),
    )
    .fix("remove it; a case file is text (tabs and line breaks are fine)"))
}

/// A NUL written as an escape (`\u0000` in JSON, `"\0"` in YAML) is refused as a written
/// one is, in a key or a value at any depth.
fn refuse_nul(value: &Value, here: &FilePos) -> Result<(), InputError> {
    let nul = |s: &str| s.contains('\0');
    let found = match value {
        Value::String(s) => nul(s),
        Value::Array(items) => return items.iter().try_for_each(|v| refuse_nul(v, here)),
        Value::Object(map) => {
            if let Some(key) = map.keys().find(|k| nul(k)) {
                return Err(nul_error(here, &key.escape_debug().to_string()));
            }
            return map.values().try_for_each(|v| refuse_nul(v, here));
        }
        _ => false,
    };
    if found {
        let Value::String(s) = value else {
            return Ok(());
        };
        return Err(nul_error(here, &s.escape_debug().to_string()));
    }
    Ok(())
}

fn nul_error(here: &FilePos, text: &str) -> InputError {
    InputError::new(
        here.clone(),
        format!("a value holds a NUL character (U+0000): \"{text}\""),
    )
    .fix("remove the \\u0000 (or \\0) escape; a case file is text")
}

fn shape_error(path: &Path, line: usize, message: &str) -> InputError {
    if let Some((m, fix)) = super::error::explain_unknown_field(message) {
        return InputError::new(FilePos::line(path, line), format!("{m} in case")).fix(fix);
    }
    // serde names Rust types; say what a person writes instead.
    let message = message
        .replace("expected u32", "expected a whole number ≥ 0")
        .replace("expected u64", "expected a whole number ≥ 0")
        .replace("expected i64", "expected a whole number")
        .replace("expected f64", "expected a number");
    InputError::new(
        FilePos::line(path, line),
        format!("invalid case: {message}"),
    )
    .fix(CASE_FIX)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Validates a raw case; `index` names cases that have no id yet.
fn finish(raw: RawCase, here: FilePos, index: usize) -> Result<Case, InputError> {
    let id = case_id(raw.id.as_ref(), &here, index)?;
    let (expected, expected_json) = expected_of(raw.expected, &id, &here)?;
    let group = group_of(raw.group.as_ref(), &id, &here)?;
    let messages = match raw.messages {
        None => Vec::new(),
        Some(turns) => turns
            .into_iter()
            .enumerate()
            .map(|(n, turn)| history_turn(&id, n, turn, &here))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let files = match &raw.files {
        Some(v) => files_of(v, &id, &here)?,
        None => Vec::new(),
    };
    Ok(Case {
        id,
        vars: raw.vars.unwrap_or_default().into(),
        expected,
        expected_json,
        messages,
        files,
        tool_script: raw.tool_results.unwrap_or_default(),
        grade: raw.grade,
        tags: raw.tags.unwrap_or_default(),
        group,
        location: here,
    })
}

/// A case's `id`: required, a non-empty string (or a number).
fn case_id(id: Option<&Value>, here: &FilePos, index: usize) -> Result<String, InputError> {
    match id {
        None => Err(
            InputError::new(here.clone(), format!("case #{} has no `id`", index + 1))
                .fix("give every case a unique \"id\", e.g. \"c-001\""),
        ),
        Some(v) => scalar_text(v)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                InputError::new(
                    here.clone(),
                    format!("`id` must be a non-empty string, found {}", kind_of(v)),
                )
                .fix("use a string like \"c-001\"")
            }),
    }
}

/// A case's accepted answers as text, and the structured `expected` whole (fields to
/// extract, tool calls to make) when it is one.
fn expected_of(
    expected: Option<Value>,
    id: &str,
    here: &FilePos,
) -> Result<(Vec<String>, Option<Value>), InputError> {
    let mut expected_json = None;
    let mut expected = match expected {
        // Some scorers need none (a schema to validate against); the bench checks that
        // the case's scorer is one of them.
        None => Vec::new(),
        // Structured: fields to extract, tool calls to make. Kept whole for the scorers.
        Some(v)
            if v.is_object()
                || v.as_array()
                    .is_some_and(|items| items.iter().any(|i| i.is_object() || i.is_array())) =>
        {
            let text = v.to_string();
            expected_json = Some(v);
            vec![text]
        }
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|v| {
                scalar_text(v).ok_or_else(|| {
                    InputError::new(
                        here.clone(),
                        format!("case `{id}`: `expected` list holds {}", kind_of(v)),
                    )
                    .fix("list only strings (or numbers)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(v) => vec![scalar_text(&v).ok_or_else(|| {
            InputError::new(
                here.clone(),
                format!(
                    "case `{id}`: `expected` must be a string or a non-empty list of strings, found {}",
                    kind_of(&v)
                ),
            )
            .fix("write \"expected\": \"42\" or \"expected\": [\"42\", \"forty-two\"]")
        })?],
    };
    expected.shrink_to_fit();
    Ok((expected, expected_json))
}

/// A case's `group` (cases that share a passage, template or user), when it has one.
fn group_of(group: Option<&Value>, id: &str, here: &FilePos) -> Result<Option<String>, InputError> {
    match group {
        None | Some(Value::Null) => Ok(None),
        Some(v) => scalar_text(v)
            .filter(|g| !g.trim().is_empty())
            .map(Some)
            .ok_or_else(|| {
                InputError::new(
                    here.clone(),
                    format!(
                        "case `{id}`: `group` must be a non-empty string or a number, found {}",
                        kind_of(v)
                    ),
                )
                .fix("give cases that share a passage, template or user the same \"group\": \"p-17\"")
            }),
    }
}

/// Roles a turn of a case's history may have.
const HISTORY_ROLES: [&str; 5] = ["system", "developer", "user", "assistant", "tool"];

/// One earlier turn: a role, its content, and whatever else it carries (tool calls).
fn history_turn(
    id: &str,
    n: usize,
    mut turn: Map<String, Value>,
    here: &FilePos,
) -> Result<ChatMessage, InputError> {
    let bad = |what: String| {
        InputError::new(here.clone(), format!("case `{id}`: message {} {what}", n + 1)).fix(
            "write each earlier turn as {\"role\": \"user\" | \"assistant\" | \"tool\" | \"system\", \"content\": \"…\"}",
        )
    };
    let role = match turn.remove("role") {
        Some(Value::String(r)) if HISTORY_ROLES.contains(&r.as_str()) => r,
        Some(Value::String(r)) => return Err(bad(format!("has the unknown role `{r}`"))),
        _ => return Err(bad("has no `role`".into())),
    };
    let files = match turn.remove("files") {
        // A turn's files follow its text.
        Some(v) => files_of(&v, id, here)?,
        None => Vec::new(),
    };
    let content = match turn.remove("content") {
        Some(Value::String(c)) => c,
        // An assistant turn that only calls tools, or a turn that is only files, has no text.
        None | Some(Value::Null) if turn.contains_key("tool_calls") || !files.is_empty() => {
            String::new()
        }
        _ => return Err(bad("has no text `content`".into())),
    };
    let at = content.len();
    Ok(ChatMessage {
        role,
        content,
        files: files.into_iter().map(|file| Placed { at, file }).collect(),
        extra: turn,
    })
}

/// The cases of a bench's files whose id `keep` takes (`view`'s page of one job renders
/// one case's prompt). A JSON Lines file is filtered line by line, so a large one is never
/// held whole as cases; other formats are read, then filtered. Unchecked for duplicates:
/// the bench was checked when it ran.
pub(crate) fn load_some(
    paths: &[std::path::PathBuf],
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<Case>, InputError> {
    let mut kept = Vec::new();
    for path in paths {
        if !matches!(extension_of(path).as_str(), "jsonl" | "ndjson") {
            kept.extend(load(path)?.into_iter().filter(|c| keep(&c.id)));
            continue;
        }
        let text = read_text(path, "case")?;
        let file: std::sync::Arc<Path> = std::sync::Arc::from(path.as_path());
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let Ok(value) = super::json::from_str(line) else {
                continue;
            };
            if !value
                .get("id")
                .and_then(scalar_text)
                .is_some_and(|id| keep(&id))
            {
                continue;
            }
            let raw: RawCase = serde_json::from_value(value)
                .map_err(|e| shape_error(path, i + 1, &e.to_string()))?;
            kept.push(finish(raw, FilePos::line_in(&file, i + 1), i)?);
        }
    }
    Ok(kept)
}

/// Loads every case file of a bench; ids must be unique across all of them.
pub(crate) fn load_all(paths: &[std::path::PathBuf]) -> Result<Vec<Case>, InputError> {
    let mut all: Vec<Case> = Vec::new();
    let mut seen: HashMap<String, FilePos> = HashMap::new();
    for path in paths {
        for case in load(path)? {
            if let Some(first) = seen.get(&case.id) {
                return Err(InputError::new(
                    case.location.clone(),
                    format!("duplicate case id `{}`, first defined at {first}", case.id),
                )
                .fix("case ids must be unique across all case files of a bench"));
            }
            seen.insert(case.id.clone(), case.location.clone());
            all.push(case);
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file(ext: &str, body: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(ext).tempfile().unwrap();
        f.write_all(body.as_bytes()).unwrap();
        f
    }

    #[test]
    fn jsonl_cases_load_with_lines() {
        let f = file(
            ".jsonl",
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\"}, \"expected\": \"1\"}\n\n{\"id\": 2, \"expected\": [\"b\", 3], \"tags\": [\"t\"]}\n",
        );
        let cases = load(f.path()).unwrap();
        assert_eq!(cases.len(), 2);
        assert_eq!(cases[1].id, "2");
        assert_eq!(cases[1].expected, vec!["b", "3"]);
        assert_eq!(cases[1].location.line, Some(3));
    }

    #[test]
    fn jsonl_errors_name_line_and_column() {
        let f = file(
            ".jsonl",
            "{\"id\": \"a\", \"expected\": \"1\"}\n{\"id\": \"b\",, }\n",
        );
        let e = load(f.path()).unwrap_err();
        assert_eq!(e.location.line, Some(2));
        assert!(e.location.column.is_some());
        let f = file(".jsonl", "[1, 2]\n");
        assert!(
            load(f.path())
                .unwrap_err()
                .message
                .contains("expected a JSON object")
        );
        // No `expected` loads (a json_schema case needs none); the bench checks the rest.
        let f = file(".jsonl", "{\"id\": \"a\"}\n");
        assert!(load(f.path()).unwrap()[0].expected.is_empty());
        // A structured answer is kept whole for the scorers that read it.
        let f = file(".jsonl", "{\"id\": \"a\", \"expected\": {\"x\": 1}}\n");
        let c = load(f.path()).unwrap().remove(0);
        assert_eq!(c.expected_json, Some(serde_json::json!({"x": 1})));
        let f = file(".jsonl", "{\"id\": \"a\", \"expected\": []}\n");
        assert!(
            load(f.path())
                .unwrap_err()
                .message
                .contains("must be a string")
        );
        let f = file(".jsonl", "{\"id\": \"a\", \"expect\": \"1\"}\n");
        let e = load(f.path()).unwrap_err();
        assert!(e.message.contains("unknown key `expect`"), "{e}");
        assert_eq!(e.fix.as_deref(), Some("did you mean `expected`?"));
    }

    #[test]
    fn yaml_cases_carry_lines() {
        let f = file(
            ".yaml",
            "- id: a\n  vars: {q: x}\n  expected: \"1\"\n- id: b\n  vars: {q: y}\n  expected: [2, two]\n",
        );
        let cases = load(f.path()).unwrap();
        assert_eq!(cases[1].expected, vec!["2", "two"]);
        assert_eq!(cases[1].location.line, Some(4));
    }

    #[test]
    fn yaml_syntax_errors_have_positions() {
        let f = file(".yaml", "- id: a\n  vars: {q: x\n  expected: 1\n");
        let e = load(f.path()).unwrap_err();
        assert!(e.location.line.is_some(), "{e}");
    }

    #[test]
    fn csv_cases_and_ragged_rows() {
        let f = file(
            ".csv",
            "id,question,expected,tags\nc1,\"What, now?\",4,easy;math\n",
        );
        let cases = load(f.path()).unwrap();
        assert_eq!(cases[0].vars["question"], "What, now?");
        assert_eq!(cases[0].tags, vec!["easy", "math"]);
        assert_eq!(cases[0].location.line, Some(2));
        let f = file(".csv", "id,question,expected\nc1,a,1\nc2,b\n");
        let e = load(f.path()).unwrap_err();
        assert_eq!(e.location.line, Some(3));
        assert!(e.message.contains("2 fields"), "{e}");
        let f = file(".csv", "id,question\nc1,a\n");
        assert!(load(f.path()).unwrap_err().message.contains("`expected`"));
    }

    #[test]
    fn empty_and_duplicate_cases_are_errors() {
        let f = file(".jsonl", "\n\n");
        assert!(load(f.path()).unwrap_err().message.contains("no cases"));
        let a = file(".jsonl", "{\"id\": \"x\", \"expected\": \"1\"}\n");
        let b = file(".csv", "id,expected\ny,1\nx,2\n");
        let e = load_all(&[a.path().into(), b.path().into()]).unwrap_err();
        assert!(e.message.contains("duplicate case id `x`"), "{e}");
        assert_eq!(e.location.line, Some(3));
        assert!(e.message.contains(&format!("{}:1", a.path().display())));
    }

    /// A key written twice is refused in every format, with the file and line, never
    /// silently the last (issue 50, item 21).
    #[test]
    fn keys_written_twice_are_refused_in_every_format() {
        let cases = [
            (
                ".jsonl",
                "{\"id\": \"a\", \"expected\": \"A\"}\n{\"id\": \"b\", \"expected\": \"A\", \"expected\": \"B\"}\n",
                2,
                "`expected`",
            ),
            (
                ".jsonl",
                "{\"id\": \"a\", \"vars\": {\"q\": \"x\", \"q\": \"y\"}, \"expected\": \"A\"}\n",
                1,
                "`q`",
            ),
            (
                ".jsonl",
                "{\"id\": \"a\", \"expected\": {\"f\": {\"g\": 1, \"g\": 2}}}\n",
                1,
                "`g`",
            ),
            (
                ".yaml",
                "- id: a\n  expected: A\n  expected: B\n",
                3,
                "`expected`",
            ),
            (
                ".yaml",
                "- id: a\n  vars: { q: x, q: y }\n  expected: A\n",
                2,
                "`q`",
            ),
            (".csv", "id,q,expected,q\na,x,A,y\n", 1, "`q`"),
        ];
        for (ext, body, line, key) in cases {
            let f = file(ext, body);
            let e = load(f.path()).unwrap_err();
            assert_eq!(e.location.line, Some(line), "{ext}: {e}");
            assert!(
                e.to_string().contains(&f.path().display().to_string()),
                "{e}"
            );
            assert!(
                e.message.contains(key) && e.message.contains("twice"),
                "{ext}: {e}"
            );
            assert!(e.fix.is_some());
        }
    }

    /// A NUL, written or escaped, and any other control character but tab and line breaks,
    /// are refused by the same rule in every format (issue 50, item 22).
    #[test]
    fn nul_and_control_characters_follow_one_rule_in_every_format() {
        let written = [
            (".csv", "id,q,expected\na,x\0y,A\n", 2),
            (
                ".jsonl",
                "{\"id\": \"a\", \"vars\": {\"q\": \"x\0y\"}, \"expected\": \"A\"}\n",
                1,
            ),
            (
                ".yaml",
                "- id: a\n  vars: { q: \"x\0y\" }\n  expected: A\n",
                2,
            ),
            (".csv", "id,q,expected\na,x\u{1}y,A\n", 2),
        ];
        for (ext, body, line) in written {
            let e = load(file(ext, body).path()).unwrap_err();
            assert!(e.message.contains("control character U+00"), "{ext}: {e}");
            assert_eq!(e.location.line, Some(line), "{ext}: {e}");
            assert!(e.location.column.is_some(), "{e}");
        }
        let escaped = [
            (
                ".jsonl",
                "{\"id\": \"a\", \"expected\": \"A\"}\n{\"id\": \"b\", \"vars\": {\"q\": \"x\\u0000y\"}, \"expected\": \"A\"}\n",
                2,
            ),
            (
                ".yaml",
                "- id: a\n  expected: A\n- id: b\n  vars: { q: \"x\\0y\" }\n  expected: A\n",
                3,
            ),
        ];
        for (ext, body, line) in escaped {
            let e = load(file(ext, body).path()).unwrap_err();
            assert!(e.message.contains("NUL"), "{ext}: {e}");
            assert_eq!(e.location.line, Some(line), "{ext}: {e}");
        }
        // Tabs, CR LF line ends and escaped controls other than NUL stay.
        let f = file(".csv", "id,q,expected\r\na,x\ty,A\r\n");
        assert_eq!(load(f.path()).unwrap()[0].vars["q"], "x\ty");
        let f = file(
            ".jsonl",
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\\u0001\"}, \"expected\": \"A\"}\n",
        );
        assert_eq!(load(f.path()).unwrap()[0].vars["q"], "x\u{1}");
    }
}
