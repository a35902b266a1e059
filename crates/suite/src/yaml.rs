//! YAML as its author wrote it (docs/guide/files.md, "YAML values"): read under YAML 1.2's
//! core schema, where only `true` and `false` are booleans, and each scalar keeps the text
//! it was written with, so a value rendered into a prompt or compared as an answer is never
//! rewritten (`NO`, `on`, `010`, `1e3` stay as written).

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Parser, ScalarStyle, Span, Tag};
use std::collections::HashMap;
use std::path::Path;

use super::error::{FilePos, InputError};

/// Nodes an alias may copy in one file, beyond the file's own: an alias bomb (each level
/// naming the one below ten times) stops here instead of filling memory.
const MOST_COPIED: usize = 1_000_000;

/// One node of a YAML document and the line it starts on.
#[derive(Debug, Clone)]
pub struct Node {
    pub line: usize,
    pub kind: YamlShape,
    /// Nodes in this subtree, itself included: what copying it through an alias costs.
    size: usize,
}

#[derive(Debug, Clone)]
pub enum YamlShape {
    /// A scalar's text after escapes, whether it was plain (unquoted, so its type is
    /// inferred) and its core-schema tag (`str` for `!!str`), if any.
    Scalar {
        text: String,
        plain: bool,
        tag: Option<String>,
    },
    Seq(Vec<Node>),
    /// Keys in file order, each written once (merge keys `<<` already applied).
    Map(Vec<Entry>),
}

/// A mapping's key, the line it is on, and its value.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: String,
    pub line: usize,
    pub node: Node,
}

/// How scalars become values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalars {
    /// By the core schema: `010` is 10, `1e3` is 1000.0 (settings, JSON compared as JSON).
    Typed,
    /// As written: a number is kept as its text unless it reads back the same (`10` is 10,
    /// `010` and `1e3` stay text), so what reaches a prompt or an answer is what was written.
    AsWritten,
    /// Every scalar but null as its text (`12`, `true` and `1e3` are text): fields that only
    /// hold text.
    Text,
}

impl Node {
    /// The node as JSON, its scalars read as `how` says.
    pub fn to_value(&self, how: Scalars) -> Value {
        match &self.kind {
            YamlShape::Scalar { text, plain, tag } => scalar(text, *plain, tag.as_deref(), how),
            YamlShape::Seq(items) => Value::Array(items.iter().map(|n| n.to_value(how)).collect()),
            YamlShape::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.node.to_value(how)))
                    .collect::<Map<_, _>>(),
            ),
        }
    }

    /// The entry of `key`, when this is a mapping that has it.
    pub(crate) fn entry(&self, key: &str) -> Option<&Entry> {
        match &self.kind {
            YamlShape::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    /// What the node is, in a person's words.
    pub(crate) fn kind_name(&self) -> &'static str {
        match &self.kind {
            YamlShape::Scalar { .. } => "a single value",
            YamlShape::Seq(_) => "a list",
            YamlShape::Map(_) => "a mapping",
        }
    }
}

/// Options for the files read by their types (the bench file): YAML 1.2's core schema where
/// a value has no type of its own, so only `true` and `false` are booleans and `1_000` is
/// text (docs/guide/files.md, "YAML values").
pub(crate) fn core_schema() -> serde_saphyr::Options {
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.underscored_numbers_as_strings = true;
    options
}

/// A tool's `default:` result reaches the model as its author wrote it: a scalar keeps its
/// text (`default: NO`, `default: 1e3`).
pub(crate) fn tool_defaults_as_written(
    path: &Path,
    text: &str,
    tools: &mut [super::tools::ToolSpec],
) -> Result<(), InputError> {
    if tools.iter().all(|t| t.default.is_none()) {
        return Ok(());
    }
    let root = parse(path, text, "bench file")?;
    let Some(YamlShape::Seq(written)) = root
        .as_ref()
        .and_then(|r| r.entry("tools"))
        .map(|e| &e.node.kind)
    else {
        return Ok(());
    };
    for (tool, node) in tools.iter_mut().zip(written) {
        if let Some(default) = node.entry("default").map(|e| &e.node)
            && tool.default.is_some()
            && matches!(default.kind, YamlShape::Scalar { .. })
        {
            tool.default = Some(default.to_value(Scalars::Text));
        }
    }
    Ok(())
}

/// An error in the shape of a document read by [`parse`] (an unknown key, a value of the
/// wrong type), at the line of the key it names when it names one.
pub(crate) fn shape_error(
    path: &Path,
    root: &Node,
    what: &str,
    e: &serde_json::Error,
) -> InputError {
    let message = e.to_string();
    let line_of = |key: &str| root.entry(key).map(|e| e.line);
    if let Some((m, fix)) = super::error::explain_unknown_field(&message) {
        let key = m.split('`').nth(1).unwrap_or("");
        let here = line_of(key).map_or_else(|| FilePos::file(path), |l| FilePos::line(path, l));
        return InputError::new(here, format!("{m} in the {what}")).fix(fix);
    }
    InputError::new(FilePos::file(path), format!("invalid {what}: {message}"))
        .fix(format!("see the {what} format in docs/guide/files.md"))
}

/// A scalar under the core schema (YAML 1.2.2, 10.3.2), kept as text where `how` says.
fn scalar(text: &str, plain: bool, tag: Option<&str>, how: Scalars) -> Value {
    let as_text = || Value::String(text.to_string());
    if tag == Some("str") || (!plain && tag.is_none()) {
        return as_text();
    }
    let null = matches!(text, "" | "~" | "null" | "Null" | "NULL");
    if how == Scalars::Text && !null {
        return as_text();
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    match core_number(text) {
        Some(n) if how == Scalars::Typed || n.to_string() == text => Value::Number(n),
        _ => as_text(),
    }
}

/// A core-schema number: decimal, `0o` octal or `0x` hexadecimal integers, and decimal
/// floats (with an exponent). Non-finite ones, which JSON cannot hold, are not numbers here.
fn core_number(text: &str) -> Option<Number> {
    let digits = |s: &str, radix: u32| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    if let Some(hex) = text.strip_prefix("0x").filter(|h| digits(h, 16)) {
        return u64::from_str_radix(hex, 16).ok().map(Number::from);
    }
    if let Some(oct) = text.strip_prefix("0o").filter(|o| digits(o, 8)) {
        return u64::from_str_radix(oct, 8).ok().map(Number::from);
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits(unsigned, 10) {
        let integer = if text.starts_with('-') {
            text.parse::<i64>().ok().map(Number::from)
        } else {
            unsigned.parse::<u64>().ok().map(Number::from)
        };
        return integer.or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64));
    }
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e.strip_prefix(['-', '+']).unwrap_or(e))),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mantissa_ok = (digits(whole, 10) || whole.is_empty())
        && (fraction.is_empty() || digits(fraction, 10))
        && !(whole.is_empty() && fraction.is_empty())
        && (mantissa.contains('.') || exponent.is_some());
    if !mantissa_ok || exponent.is_some_and(|e| !digits(e, 10)) {
        return None;
    }
    text.parse::<f64>().ok().and_then(Number::from_f64)
}

/// A collection being read, until its end event.
enum Open {
    Seq(Vec<Node>),
    Map {
        entries: Vec<Entry>,
        lines: HashMap<String, usize>,
        key: Option<(String, usize)>,
        merged: Vec<Node>,
    },
}

struct Frame {
    open: Open,
    line: usize,
    anchor: usize,
    size: usize,
}

/// Reads a YAML text into its document's root node (`None` for an empty document).
/// `what` names the file in errors ("case file").
pub fn parse(path: &Path, text: &str, what: &str) -> Result<Option<Node>, InputError> {
    let mut reader = Reader {
        path,
        what,
        stack: Vec::new(),
        anchors: HashMap::new(),
        copied: 0,
        root: None,
        documents: 0,
    };
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            let at = e.marker();
            InputError::new(
                FilePos::at(path, at.line(), at.col() + 1),
                format!("invalid YAML in the {what}: {}", e.info()),
            )
            .fix("check the indentation and quoting on this line")
        })?;
        reader.event(event, span)?;
    }
    Ok(reader.root)
}

struct Reader<'a> {
    path: &'a Path,
    what: &'a str,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    copied: usize,
    root: Option<Node>,
    documents: usize,
}

impl Reader<'_> {
    fn error(&self, line: usize, message: String, fix: &str) -> InputError {
        InputError::new(FilePos::line(self.path, line), message).fix(fix)
    }

    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), InputError> {
        let line = span.start.line();
        match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(self.error(
                        line,
                        format!("the {} holds more than one YAML document", self.what),
                        "keep one document: remove the `---` line and what follows, or move it to a file of its own",
                    ));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let kind = YamlShape::Scalar {
                    text: text.into_owned(),
                    plain: style == ScalarStyle::Plain,
                    tag: tag.as_deref().and_then(core_tag),
                };
                self.done(
                    Node {
                        line,
                        kind,
                        size: 1,
                    },
                    anchor,
                )?;
            }
            Event::Alias(id) => {
                let Some(node) = self.anchors.get(&id) else {
                    return Err(self.error(
                        line,
                        "an alias names no anchor defined before it".into(),
                        "define `&name` before using `*name`",
                    ));
                };
                self.copied += node.size;
                if self.copied > MOST_COPIED {
                    return Err(self.error(
                        line,
                        format!(
                            "aliases copy more than {MOST_COPIED} values in the {}",
                            self.what
                        ),
                        "write the values out, or use fewer levels of aliases",
                    ));
                }
                let node = Node {
                    line,
                    ..node.clone()
                };
                self.done(node, 0)?;
            }
            Event::SequenceStart(_, anchor, _) => self.open(Open::Seq(Vec::new()), line, anchor),
            Event::MappingStart(_, anchor, _) => self.open(
                Open::Map {
                    entries: Vec::new(),
                    lines: HashMap::new(),
                    key: None,
                    merged: Vec::new(),
                },
                line,
                anchor,
            ),
            Event::SequenceEnd | Event::MappingEnd => self.close()?,
            _ => {}
        }
        Ok(())
    }

    fn open(&mut self, open: Open, line: usize, anchor: usize) {
        self.stack.push(Frame {
            open,
            line,
            anchor,
            size: 1,
        });
    }

    fn close(&mut self) -> Result<(), InputError> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        let kind = match frame.open {
            Open::Seq(items) => YamlShape::Seq(items),
            Open::Map {
                mut entries,
                merged,
                ..
            } => {
                merge(&mut entries, merged);
                YamlShape::Map(entries)
            }
        };
        let node = Node {
            line: frame.line,
            kind,
            size: frame.size,
        };
        self.done(node, frame.anchor)
    }

    /// A finished node: a list's item, a mapping's key or value, or the document.
    fn done(&mut self, node: Node, anchor: usize) -> Result<(), InputError> {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        let (path, what) = (self.path, self.what);
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.size += node.size;
        match &mut frame.open {
            Open::Seq(items) => items.push(node),
            Open::Map {
                entries,
                lines,
                key,
                merged,
            } => match key.take() {
                Some((k, _)) if k == "<<" => merged.push(node),
                Some((key, line)) => entries.push(Entry { key, line, node }),
                None => {
                    let YamlShape::Scalar { text, .. } = node.kind else {
                        return Err(InputError::new(
                            FilePos::line(path, node.line),
                            format!("a key in the {what} is {}", node.kind_name()),
                        )
                        .fix("write keys as plain words: `name: value`"));
                    };
                    if let Some(first) = lines.get(&text) {
                        return Err(InputError::new(
                            FilePos::line(path, node.line),
                            format!(
                                "`{text}` is written twice in one mapping (first on line {first})"
                            ),
                        )
                        .fix(format!("keep one `{text}:`; the other would be ignored")));
                    }
                    if text != "<<" {
                        lines.insert(text.clone(), node.line);
                    }
                    *key = Some((text, node.line));
                }
            },
        }
        Ok(())
    }
}

/// Applies merge keys (`<<: *defaults`): keys written in the mapping win, then the merged
/// mappings in order.
fn merge(entries: &mut Vec<Entry>, merged: Vec<Node>) {
    let sources = merged.into_iter().flat_map(|n| match n.kind {
        YamlShape::Seq(items) => items,
        _ => vec![n],
    });
    for source in sources {
        if let YamlShape::Map(more) = source.kind {
            for entry in more {
                if !entries.iter().any(|have| have.key == entry.key) {
                    entries.push(entry);
                }
            }
        }
    }
}

/// The core-schema tag's name (`str`, `int`, …) of a tag, if it is one.
fn core_tag(tag: &Tag) -> Option<String> {
    (tag.handle() == "tag:yaml.org,2002:").then(|| tag.suffix().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str, how: Scalars) -> Value {
        parse(Path::new("t.yaml"), text, "test file")
            .unwrap()
            .unwrap()
            .to_value(how)
    }

    #[test]
    fn scalars_follow_the_core_schema() {
        let text = "[NO, yes, on, off, 010, 1e3, 0x1F, 1_000, ~, true, False, 10, -3, 2.5, '010', 0o17, .5, .inf]";
        let typed = value(text, Scalars::Typed);
        assert_eq!(
            typed,
            serde_json::json!([
                "NO", "yes", "on", "off", 10, 1000.0, 31, "1_000", null, true, false, 10, -3, 2.5,
                "010", 15, 0.5, ".inf"
            ])
        );
        let written = value(text, Scalars::AsWritten);
        assert_eq!(
            written,
            serde_json::json!([
                "NO", "yes", "on", "off", "010", "1e3", "0x1F", "1_000", null, true, false, 10, -3,
                2.5, "010", "0o17", ".5", ".inf"
            ])
        );
    }

    #[test]
    fn keys_written_twice_are_refused_at_any_depth() {
        let e = parse(
            Path::new("t.yaml"),
            "- id: a\n  vars:\n    q: 1\n    q: 2\n",
            "case file",
        )
        .unwrap_err();
        assert_eq!(e.location.line, Some(4));
        assert!(e.message.contains("`q` is written twice"), "{e}");
        assert!(e.message.contains("line 3"), "{e}");
    }

    #[test]
    fn merges_and_aliases_apply_and_bombs_stop() {
        let v = value(
            "base: &b {q: x, n: 1}\nitem: {<<: *b, n: 2}\n",
            Scalars::AsWritten,
        );
        assert_eq!(v["item"], serde_json::json!({"n": 2, "q": "x"}));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..9 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse(Path::new("t.yaml"), &bomb, "case file").unwrap_err();
        assert!(e.message.contains("aliases copy more than"), "{e}");
    }
}
