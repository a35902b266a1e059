//! Prompt files, one variant each: YAML with chat messages, or `.txt`/`.md` as one user message.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{FilePos, InputError, read_text};
use super::extract::Extract;
use super::yaml::{self, Scalars, YamlShape};

/// One chat message whose content is a template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageTemplate {
    pub role: String,
    pub content: String,
    /// Line of the message in its prompt file, for errors inside the template.
    #[serde(skip, default)]
    pub line: Option<usize>,
    /// `- history`: the case's earlier turns go here (role and content are empty).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub history: bool,
}

/// One prompt variant: the thing being measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    pub messages: Vec<MessageTemplate>,
    /// Overrides of the bench's request parameters.
    pub params: Map<String, Value>,
    pub path: PathBuf,
    /// `files: none`: the cases' files are not sent with this variant (the "does the image
    /// help" comparison); otherwise its templates place them, or they follow its last user
    /// message (docs/guide/attachments.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_files: bool,
    /// `extract:`: how its answer is read before the bench's scorer sees it
    /// (docs/guide/scorers.md, "A variant reads its own answer"); `None` scores the whole
    /// answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extract: Option<super::extract::Extract>,
}

/// A prompt variant: chat messages whose contents are Jinja templates over each case's
/// `vars` (docs/guide/files.md, "Variants").
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "Variant")]
pub(super) struct RawPrompt {
    /// Shown in every table and chosen with `--variants` [default: the file's name].
    #[schemars(regex(pattern = r"^[^\s,/\\]([^,/\\]*[^\s,/\\])?$"))]
    name: Option<String>,
    /// The chat messages, a user message among them; `- history` where a case's earlier
    /// turns go.
    #[schemars(schema_with = "messages_schema")]
    messages: Vec<RawMessage>,
    /// Request parameters over the bench's `params` (`max_tokens`, …).
    #[serde(default)]
    params: Option<Map<String, Value>>,
    /// `none`: the cases' files are not sent with this variant.
    #[serde(default)]
    #[schemars(schema_with = "no_files_schema")]
    files: Option<String>,
    /// How this variant's answer is read before the bench's scorer sees it: a regex's first
    /// group, a JSON pointer, a tag, the last line, or a template.
    #[serde(default)]
    #[schemars(schema_with = "extract_schema")]
    extract: Option<Value>,
}

/// `extract:`'s forms, as [`super::extract::Extract::from_value`] reads them.
pub(super) fn extract_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let one = |key: &str, what: &str| {
        serde_json::json!({
            "type": "object",
            "additionalProperties": false,
            "required": [key],
            "properties": { key: { "type": "string", "description": what } }
        })
    };
    schemars::json_schema!({
        "anyOf": [
            { "const": "last_line", "description": "The last non-blank line." },
            one("regex", "The first match's first group (the whole match without a group)."),
            one("json", "A JSON pointer into the answer's JSON: /answer."),
            one("tag", "The text inside the last <tag>…</tag>: answer."),
            one("template", "A template over answer, json and vars: {{ json.answer | upper }}."),
            { "type": "null" }
        ]
    })
}

/// What [`read_messages`] takes: `{role, content}` messages, and `history` once.
fn messages_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "minItems": 1,
        "items": {
            "anyOf": [
                { "const": "history", "description": "The case's earlier turns (its `messages:`) go here." },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["role", "content"],
                    "properties": {
                        "role": { "enum": ROLES },
                        "content": { "type": "string", "description": "A Jinja template over the case's vars: {{ question }}." }
                    }
                }
            ]
        }
    })
}

/// `files: none`, the one value the loader takes.
fn no_files_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "enum": ["none", null] })
}

/// A message with a template, or the word `history`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawMessage {
    Word(String),
    Message(Map<String, Value>),
}

const ROLES: [&str; 4] = ["system", "developer", "user", "assistant"];

/// Reads and checks one prompt file.
pub(crate) fn load(path: &Path) -> Result<Variant, InputError> {
    let text = read_text(path, "prompt")?;
    parse(path, text)
}

/// Parses a prompt file's text; `path` names it in errors and chooses the format.
pub fn parse(path: &Path, text: String) -> Result<Variant, InputError> {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("variant")
        .to_string();
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "txt" | "md" => parse_text(path, stem, text),
        "yaml" | "yml" => parse_yaml(path, stem, &text),
        _ => Err(InputError::new(
            FilePos::file(path),
            format!("unknown prompt file type `.{ext}`"),
        )
        .fix("use .yaml (chat messages), or .txt / .md (one user message)")),
    }
}

/// A `.txt` or `.md` prompt: the whole text is the user message, the file name the
/// variant's name.
fn parse_text(path: &Path, stem: String, text: String) -> Result<Variant, InputError> {
    if text.trim().is_empty() {
        return Err(
            InputError::new(FilePos::file(path), "the prompt file is empty")
                .fix("write the user message, with {{ variables }} from the cases"),
        );
    }
    check_name(path, &stem, "the file name")?;
    Ok(Variant {
        name: stem,
        messages: vec![MessageTemplate {
            role: "user".into(),
            content: text,
            line: Some(1),
            history: false,
        }],
        params: Map::new(),
        path: path.to_path_buf(),
        no_files: false,
        extract: None,
    })
}

/// A YAML prompt: `name:` (else the file name), `messages:` with a user message among
/// them, and `params:`.
fn parse_yaml(path: &Path, stem: String, text: &str) -> Result<Variant, InputError> {
    if text.trim().is_empty() {
        return Err(
            InputError::new(FilePos::file(path), "the prompt file is empty")
                .fix("write `name:` and `messages:` (a list of {role, content})"),
        );
    }
    let (raw, lines, extract_line) = read_yaml(path, text)?;
    let extract = match &raw.extract {
        None | Some(Value::Null) => None,
        Some(v) => Some(Extract::from_value(v).map_err(|e| {
            let here = extract_line.map_or_else(|| FilePos::file(path), |l| FilePos::line(path, l));
            InputError::new(here, e.message).fix(e.fix)
        })?),
    };
    let messages = read_messages(path, raw.messages, &lines)?;
    if !messages.iter().any(|m| m.role == "user" || m.history) {
        return Err(
            InputError::new(FilePos::file(path), "the prompt has no user message")
                .fix("add `- { role: user, content: \"{{ question }}\" }` to messages"),
        );
    }
    let from = if raw.name.is_some() {
        "`name:`"
    } else {
        "the file name"
    };
    let name = raw.name.unwrap_or(stem);
    check_name(path, &name, from)?;
    let no_files = match raw.files.as_deref() {
        None => false,
        Some("none") => true,
        Some(other) => {
            return Err(InputError::new(
                FilePos::file(path),
                format!("`files: {other}` is not known"),
            )
            .fix("write `files: none` to send this variant without the cases' files; place them with {{ file(\"name\") }} or {{ files() }} in a message"));
        }
    };
    Ok(Variant {
        name,
        messages,
        params: raw.params.unwrap_or_default(),
        path: path.to_path_buf(),
        no_files,
        extract,
    })
}

/// A YAML prompt file as written, each message with its line. A message's text is what
/// its author wrote (`content: NO` is "NO", `1e3` is "1e3"); `params` are read by YAML
/// 1.2's core schema, where only `true` and `false` are booleans (docs/guide/files.md).
fn read_yaml(
    path: &Path,
    text: &str,
) -> Result<(RawPrompt, Vec<usize>, Option<usize>), InputError> {
    let root = yaml::parse(path, text, "prompt file")?;
    let Some(
        root @ yaml::Node {
            kind: YamlShape::Map(entries),
            ..
        },
    ) = &root
    else {
        let found = root.as_ref().map_or("empty", yaml::Node::kind_name);
        return Err(InputError::new(
            FilePos::file(path),
            format!("invalid prompt file: it is {found}, not a mapping"),
        )
        .fix("write `name:` and `messages:` (a list of {role, content})"));
    };
    let value: Map<String, Value> = entries
        .iter()
        .map(|e| {
            let how = if e.key == "params" {
                Scalars::Typed
            } else {
                Scalars::Text
            };
            (e.key.clone(), e.node.to_value(how))
        })
        .collect();
    let raw: RawPrompt = serde_json::from_value(Value::Object(value))
        .map_err(|e| not_for_a_prompt(yaml::shape_error(path, root, "prompt file", &e)))?;
    let lines = match root.entry("messages").map(|e| &e.node.kind) {
        Some(YamlShape::Seq(items)) => items.iter().map(|n| n.line).collect(),
        _ => Vec::new(),
    };
    Ok((raw, lines, root.entry("extract").map(|e| e.line)))
}

/// A key a user brings from the bench file or from promptfoo (`grade`, `assert`,
/// `transform`): a prompt file does not score, but it may say how its answer is read.
fn not_for_a_prompt(e: InputError) -> InputError {
    if !e.message.starts_with("unknown key") {
        return e;
    }
    let key = e.message.split('`').nth(1).unwrap_or("");
    let fix = match key {
        "grade" | "assert" | "scorer" => {
            "a prompt file does not score: the bench's `grade:` scores every variant. To read this variant's answer before it is scored, write `extract:` (a regex, a JSON pointer, a tag, `last_line`, a template; docs/guide/scorers.md, \"A variant reads its own answer\")"
        }
        "transform" | "extractor" | "parse" => {
            "promptgauge calls this `extract:`: `{regex: \"Answer: (.+)\"}`, `{json: /answer}`, `{tag: answer}`, `last_line` or `{template: \"{{ json.answer }}\"}` (docs/guide/scorers.md, \"A variant reads its own answer\")"
        }
        _ => return e,
    };
    InputError {
        fix: Some(fix.to_string()),
        ..e
    }
}

/// A YAML prompt's messages, each with its line: `{role, content}`, or `history` once.
fn read_messages(
    path: &Path,
    raw: Vec<RawMessage>,
    lines: &[usize],
) -> Result<Vec<MessageTemplate>, InputError> {
    let mut messages = Vec::new();
    for (i, m) in raw.into_iter().enumerate() {
        let line = lines.get(i).copied();
        let here = line.map_or_else(|| FilePos::file(path), |l| FilePos::line(path, l));
        let message = match m {
            RawMessage::Word(w) if w.trim() == "history" => {
                if messages.iter().any(|m: &MessageTemplate| m.history) {
                    return Err(InputError::new(here, "`history` is listed twice")
                        .fix("splice the case's earlier turns in one place"));
                }
                MessageTemplate {
                    role: String::new(),
                    content: String::new(),
                    line,
                    history: true,
                }
            }
            RawMessage::Word(w) => {
                return Err(InputError::new(
                    here,
                    format!("`{w}` is not a message"),
                )
                .fix("write a message as { role: user, content: \"…\" }, or `- history` where the case's earlier turns go"));
            }
            RawMessage::Message(map) => message(map, here)?,
        };
        messages.push(MessageTemplate { line, ..message });
    }
    Ok(messages)
}

/// One `{role, content}` message of a prompt file.
fn message(mut map: Map<String, Value>, here: FilePos) -> Result<MessageTemplate, InputError> {
    if let Some(unknown) = map
        .keys()
        .find(|k| !["role", "content"].contains(&k.as_str()))
    {
        let nearest = ["role", "content"]
            .into_iter()
            .max_by(|a, b| {
                strsim::jaro_winkler(unknown, a).total_cmp(&strsim::jaro_winkler(unknown, b))
            })
            .unwrap_or("role");
        return Err(
            InputError::new(here, format!("unknown key `{unknown}` in a message")).fix(format!(
                "did you mean `{nearest}`? A message has `role` and `content`"
            )),
        );
    }
    let text = |v: Option<Value>, key: &str| match v {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Ok(other.to_string()).and_then(|s| {
            Err(
                InputError::new(here.clone(), format!("`{key}` must be text, found {s}"))
                    .fix("quote it: content: \"…\""),
            )
        }),
        None => Err(
            InputError::new(here.clone(), format!("a message has no `{key}`"))
                .fix("write { role: user, content: \"…\" }"),
        ),
    };
    let role = text(map.remove("role"), "role")?;
    let content = text(map.remove("content"), "content")?;
    if !ROLES.contains(&role.as_str()) {
        return Err(InputError::new(here, format!("unknown role `{role}`"))
            .fix(format!("use one of: {}", ROLES.join(", "))));
    }
    Ok(MessageTemplate {
        role,
        content,
        line: None,
        history: false,
    })
}

/// A variant name is selected with `--variants a,b` and shown in every table: no commas,
/// slashes, control characters, or space at either end.
fn check_name(path: &Path, name: &str, from: &str) -> Result<(), InputError> {
    let bad = name.trim().is_empty()
        || name.trim() != name
        || name.contains([',', '/', '\\'])
        || name.chars().any(char::is_control);
    if bad {
        return Err(InputError::new(
            FilePos::file(path),
            format!(
                "variant name `{}` (from {from}) is empty, has spaces at an end, or contains `,`, `/`, `\\` or a control character",
                name.escape_debug()
            ),
        )
        .fix(if from == "the file name" {
            "rename the file, e.g. step-by-step.txt, or use a .yaml prompt with `name:`"
        } else {
            "use a short name like `step-by-step`"
        }));
    }
    Ok(())
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
    fn yaml_prompt_loads_with_lines_and_params() {
        let f = file(
            ".yaml",
            "name: careful\nmessages:\n  - { role: system, content: \"Be careful.\" }\n  - role: user\n    content: \"{{ q }}\"\nparams: { max_tokens: 9 }\n",
        );
        let v = load(f.path()).unwrap();
        assert_eq!(v.name, "careful");
        assert_eq!(v.messages[1].line, Some(4));
        assert_eq!(v.params["max_tokens"], 9);
    }

    #[test]
    fn text_prompt_is_one_user_message_named_by_stem() {
        let f = file(".md", "Answer: {{ q }}");
        let v = load(f.path()).unwrap();
        assert_eq!(v.messages.len(), 1);
        assert_eq!(v.messages[0].role, "user");
        assert!(
            f.path()
                .to_string_lossy()
                .ends_with(&format!("{}.md", v.name))
        );
    }

    #[test]
    fn prompt_without_user_message_or_with_bad_role_is_an_error() {
        let f = file(".yaml", "messages:\n  - { role: system, content: hi }\n");
        assert!(
            load(f.path())
                .unwrap_err()
                .message
                .contains("no user message")
        );
        let f = file(".yaml", "messages:\n  - { role: robot, content: hi }\n");
        let e = load(f.path()).unwrap_err();
        assert_eq!(e.location.line, Some(2));
        assert!(e.message.contains("unknown role"));
        let f = file(".yaml", "mesages: []\n");
        let e = load(f.path()).unwrap_err();
        assert!(e.to_string().contains("did you mean `messages`"), "{e}");
    }

    #[test]
    fn a_variant_s_reading_loads_and_a_bad_one_is_named_at_its_line() {
        let f = file(
            ".yaml",
            "name: tagged\nmessages:\n  - { role: user, content: \"{{ q }}\" }\nextract: { tag: answer }\n",
        );
        let v = load(f.path()).unwrap();
        assert_eq!(v.extract, Some(Extract::tag("answer").unwrap()));
        let f = file(
            ".yaml",
            "messages:\n  - { role: user, content: \"{{ q }}\" }\nextract: last_line\n",
        );
        assert_eq!(load(f.path()).unwrap().extract, Some(Extract::LastLine));
        let f = file(
            ".yaml",
            "messages:\n  - { role: user, content: \"{{ q }}\" }\n\nextract: { regex: \"Answer: ([A-D]\" }\n",
        );
        let e = load(f.path()).unwrap_err();
        assert_eq!(e.location.line, Some(4), "{e}");
        assert!(e.message.contains("does not compile"), "{e}");
        let f = file(
            ".yaml",
            "messages:\n  - { role: user, content: \"{{ q }}\" }\nextract: { jsn: /answer }\n",
        );
        let e = load(f.path()).unwrap_err().to_string();
        assert!(
            e.contains(":3: unknown reading `jsn`") && e.contains("did you mean `json`?"),
            "{e}"
        );
    }

    #[test]
    fn grade_or_transform_in_a_prompt_file_points_to_extract() {
        for key in ["grade: { kind: exact }", "transform: output.trim()"] {
            let f = file(
                ".yaml",
                &format!("messages:\n  - {{ role: user, content: hi }}\n{key}\n"),
            );
            let e = load(f.path()).unwrap_err();
            assert_eq!(e.location.line, Some(3), "{e}");
            assert!(e.fix.as_deref().unwrap_or("").contains("`extract:`"), "{e}");
        }
    }

    #[test]
    fn names_from_file_names_follow_the_same_rules() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["x,y.txt", " lead.md"] {
            let path = dir.path().join(bad);
            std::fs::write(&path, "{{ q }}").unwrap();
            let e = load(&path).unwrap_err().to_string();
            assert!(
                e.contains("from the file name") && e.contains("rename"),
                "{e}"
            );
        }
        let path = dir.path().join("ok-name.txt");
        std::fs::write(&path, "{{ q }}").unwrap();
        assert_eq!(load(&path).unwrap().name, "ok-name");
    }
}
