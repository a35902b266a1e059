//! A variant's reading of its own answer (`extract:` in a prompt file,
//! docs/guide/scorers.md, "A variant reads its own answer"): how the answer is read before
//! the bench's scorer sees it, so variants that answer in different formats (a letter, JSON,
//! a tagged answer) share one bench and one `expected`. This file is the reading as written
//! and checked; `grade` applies it to an answer.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a variant's answer is read before it is scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Extract {
    /// `{regex: "Answer: ([A-D])"}`: the first match's first group that took part in it
    /// (the whole match when the pattern has no group).
    Regex(Pattern),
    /// `{json: /answer}`: the value at a JSON pointer (RFC 6901) in the answer's JSON, found
    /// as the `json_schema` scorer finds it: the whole answer, a Markdown fence, or the first
    /// object or list in the text.
    Json(String),
    /// `{tag: answer}`: the text inside the last `<answer>…</answer>`.
    Tag(String),
    /// `last_line`: the last line that is not blank.
    LastLine,
    /// `{template: "{{ json.choice | upper }}"}`: a template over `answer` (the whole text),
    /// `json` (its JSON, or none) and `vars` (the case's variables).
    Template(Jinja),
}

/// Why a reading as written cannot be used, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractError {
    pub message: String,
    pub fix: String,
}

impl ExtractError {
    fn new(message: impl Into<String>, fix: impl Into<String>) -> ExtractError {
        ExtractError {
            message: message.into(),
            fix: fix.into(),
        }
    }
}

/// What each form looks like, for the errors that list them.
const FORMS: &str = "`{regex: \"Answer: (.+)\"}`, `{json: /answer}`, `{tag: answer}`, `last_line` or `{template: \"{{ json.answer }}\"}`";
/// How [`Extract::looks_for`] starts.
pub const LOOKS_FOR_MARK: &str = "extract: ";
const KEYS: [&str; 5] = ["regex", "json", "tag", "last_line", "template"];

impl Extract {
    /// A regex reading; the pattern must compile.
    pub fn regex(pattern: &str) -> Result<Extract, ExtractError> {
        Pattern::new(pattern).map(Extract::Regex)
    }

    /// A JSON pointer reading; the pointer must be one (`/answer`, `/items/0/name`).
    pub fn json(pointer: &str) -> Result<Extract, ExtractError> {
        check_pointer(pointer)?;
        Ok(Extract::Json(pointer.to_string()))
    }

    /// A tag reading; the name must be a tag's (`answer`, `final-answer`).
    pub fn tag(name: &str) -> Result<Extract, ExtractError> {
        let mut chars = name.chars();
        let ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c));
        if !ok {
            return Err(ExtractError::new(
                format!("`{}` is not a tag name", name.escape_debug()),
                "name the tag without its angle brackets, a letter first: `{tag: answer}` reads <answer>…</answer>",
            ));
        }
        Ok(Extract::Tag(name.to_string()))
    }

    /// A template reading; the template must compile and use only `answer`, `json`, `vars`.
    pub fn template(source: &str) -> Result<Extract, ExtractError> {
        Jinja::new(source).map(Extract::Template)
    }

    /// The reading written in a prompt file (or by an importer) as `extract:`'s value.
    pub fn from_value(value: &Value) -> Result<Extract, ExtractError> {
        let text = |key: &str, v: &Value| match v {
            Value::String(s) => Ok(s.clone()),
            other => Err(ExtractError::new(
                format!("`extract: {{{key}: …}}` takes text, found {other}"),
                format!("quote it: `{{{key}: \"…\"}}`"),
            )),
        };
        let one = value
            .as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.iter().next());
        if let Some((key, v)) = one {
            return match key.as_str() {
                "regex" => Extract::regex(&text(key, v)?),
                "json" => Extract::json(&text(key, v)?),
                "tag" => Extract::tag(&text(key, v)?),
                "template" => Extract::template(&text(key, v)?),
                "last_line" => Ok(Extract::LastLine),
                other => Err(unknown_key(other)),
            };
        }
        match value {
            Value::String(s) if s == "last_line" => Ok(Extract::LastLine),
            Value::Object(map) if map.len() > 1 => Err(ExtractError::new(
                format!(
                    "`extract:` names {} readings ({}); a variant reads its answer one way",
                    map.len(),
                    map.keys()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                format!("keep one of {FORMS}"),
            )),
            other => Err(ExtractError::new(
                format!("`extract: {}` is not a reading", shown(other)),
                format!("write one of {FORMS}"),
            )),
        }
    }

    /// What it reads, in a person's words (`check` prints it).
    pub fn describe(&self) -> String {
        match self {
            Extract::Regex(p) => {
                format!("reads the first group of the regex {}", quoted(p.as_str()))
            }
            Extract::Json(pointer) => format!("reads {pointer} as a JSON pointer"),
            Extract::Tag(tag) => format!("reads the last <{tag}>…</{tag}>"),
            Extract::LastLine => "reads the last non-blank line".to_string(),
            Extract::Template(t) => format!("reads the template {}", quoted(&t.source)),
        }
    }

    /// What an answer that gives it nothing lacks, in the record's `not_found`, marked
    /// `extract: ` so the reports say the reading, not the scorer, found nothing (they name
    /// a variant most of whose answers lack it).
    pub fn looks_for(&self) -> String {
        let what = match self {
            Extract::Regex(_) => "match of its regex".to_string(),
            Extract::Json(pointer) => format!("JSON value at {pointer}"),
            Extract::Tag(tag) => format!("<{tag}> tag"),
            Extract::LastLine => "non-blank line".to_string(),
            Extract::Template(_) => "text from its template".to_string(),
        };
        format!("{LOOKS_FOR_MARK}{what}")
    }

    /// What a prompt that asks for this reading's format would hold and `prompt` does not
    /// (`None`: it holds a hint, or the reading has none to look for). `prompt` is all the
    /// variant's text — its templates and its messages as rendered — and `json_mode`
    /// whether its parameters ask for JSON (`response_format`). Kept to what is sure: JSON
    /// never named, a tag never written, a regex's words never used; a last line or a
    /// template has no format to look for.
    pub fn missing_hint(&self, prompt: &str, json_mode: bool) -> Option<String> {
        let lower = prompt.to_lowercase();
        match self {
            Extract::Json(_) => {
                (!json_mode && !lower.contains("json") && !has_json_example(prompt))
                    .then(|| "never mentions JSON (nor asks for it with `response_format`)".into())
            }
            Extract::Tag(tag) => {
                let tag = tag.to_lowercase();
                (!lower.contains(&format!("<{tag}>")) && !lower.contains(&format!("</{tag}>")))
                    .then(|| format!("never writes the tag <{tag}>"))
            }
            Extract::Regex(p) => {
                let words = regex_words(p.as_str());
                (!words.is_empty() && !words.iter().any(|w| lower.contains(&w.to_lowercase())))
                    .then(|| format!("never uses the regex's words ({})", backticked(&words)))
            }
            Extract::LastLine | Extract::Template(_) => None,
        }
    }

    /// The reading as a prompt file writes it, in YAML's flow form (what an importer
    /// writes: `{json: "/answer"}`).
    pub fn to_yaml(&self) -> String {
        let q = yaml_quoted;
        match self {
            Extract::Regex(p) => format!("{{regex: {}}}", q(p.as_str())),
            Extract::Json(pointer) => format!("{{json: {}}}", q(pointer)),
            Extract::Tag(tag) => format!("{{tag: {}}}", q(tag)),
            Extract::LastLine => "last_line".to_string(),
            Extract::Template(t) => format!("{{template: {}}}", q(&t.source)),
        }
    }
}

/// A value as an error quotes it.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Text quoted, cut when long: as written (a regex's `\d` stays `\d`), but for the
/// characters a line cannot show (a line break is `\n`).
fn quoted(s: &str) -> String {
    let cut: String = s.chars().take(60).collect();
    let more = if cut.len() < s.len() { "…" } else { "" };
    let shown: String = cut
        .chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_debug().to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("`{shown}{more}`")
}

/// Whether the text holds a JSON object written out (a few-shot answer `{"answer": "C"}`).
fn has_json_example(prompt: &str) -> bool {
    prompt.match_indices('{').any(|(i, _)| {
        serde_json::Deserializer::from_str(&prompt[i..])
            .into_iter::<Value>()
            .next()
            .is_some_and(|v| v.is_ok_and(|v| v.as_object().is_some_and(|o| !o.is_empty())))
    })
}

/// The words (three letters or more) a regex matches literally outside its groups: what
/// the answer must say around what is read (`Answer` in `Answer: ([A-D])`). None when it
/// matches no word as written (`(?i)` makes its letters classes, not words).
fn regex_words(pattern: &str) -> Vec<String> {
    use regex_syntax::hir::{Hir, HirKind};
    fn literals(h: &Hir, out: &mut String) {
        match h.kind() {
            HirKind::Literal(l) => out.push_str(&String::from_utf8_lossy(&l.0)),
            HirKind::Concat(hs) => hs.iter().for_each(|h| literals(h, out)),
            // A group's text is what is read; anything else breaks a word.
            _ => out.push(' '),
        }
    }
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return Vec::new();
    };
    let mut text = String::new();
    literals(&hir, &mut text);
    let mut words: Vec<String> = text
        .split(|c: char| !c.is_alphabetic())
        .filter(|w| w.chars().count() >= 3)
        .map(String::from)
        .collect();
    words.dedup();
    words
}

/// Names as a message lists them: `a`, `b`.
fn backticked(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text as a YAML scalar that reads back as itself, as a person writes it: in double
/// quotes, or — when it holds a backslash (a regex) or a double quote, and nothing a line
/// cannot show — in single quotes, where `\` is itself (`'Answer: (\d+)'`, not
/// `"Answer: (\\d+)"`).
fn yaml_quoted(s: &str) -> String {
    if s.contains(['\\', '"']) && !s.chars().any(char::is_control) {
        format!("'{}'", s.replace('\'', "''"))
    } else {
        Value::String(s.to_string()).to_string()
    }
}

/// An unknown form, with the nearest known one.
fn unknown_key(key: &str) -> ExtractError {
    let nearest = KEYS
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), *k))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|(score, _)| *score > 0.7);
    let fix = match nearest {
        Some((_, k)) => format!("did you mean `{k}`? A reading is one of {FORMS}"),
        None => format!("a reading is one of {FORMS}"),
    };
    ExtractError::new(format!("unknown reading `{key}` in `extract:`"), fix)
}

/// A JSON pointer: empty (the whole document) or `/`-separated tokens, `~` only as `~0`
/// or `~1`.
fn check_pointer(pointer: &str) -> Result<(), ExtractError> {
    if !pointer.is_empty() && !pointer.starts_with('/') {
        let as_pointer = format!(
            "/{}",
            pointer
                .trim_start_matches('$')
                .trim_start_matches('.')
                .replace(['.', '['], "/")
                .replace(']', "")
        );
        return Err(ExtractError::new(
            format!("`{pointer}` is not a JSON pointer"),
            format!("a JSON pointer starts with `/`: write `{{json: {as_pointer}}}`"),
        ));
    }
    let bad_tilde = pointer
        .split('~')
        .skip(1)
        .any(|rest| !rest.starts_with(['0', '1']));
    if bad_tilde {
        return Err(ExtractError::new(
            format!("`{pointer}` is not a JSON pointer: `~` must be `~0` (a ~) or `~1` (a /)"),
            "write `~0` for a ~ and `~1` for a / inside a key",
        ));
    }
    Ok(())
}

/// A compiled regex, written and compared as its pattern.
#[derive(Clone)]
pub struct Pattern(regex::Regex);

impl Pattern {
    fn new(pattern: &str) -> Result<Pattern, ExtractError> {
        regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map(Pattern)
            .map_err(|e| {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("").trim();
                ExtractError::new(
                    format!("`extract:`'s regex `{pattern}` does not compile: {last}"),
                    "fix the pattern (Rust regex syntax: https://docs.rs/regex); quote it in YAML: `{regex: \"Answer: ([A-D])\"}`",
                )
            })
    }

    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The compiled regex.
    pub fn regex(&self) -> &regex::Regex {
        &self.0
    }
}

impl std::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pattern({:?})", self.as_str())
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Pattern) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Pattern::new(&text).map_err(|e| serde::de::Error::custom(e.message))
    }
}

/// The variables a reading's template may use.
pub const TEMPLATE_VARIABLES: [&str; 3] = ["answer", "json", "vars"];

/// Instructions one reading of one answer may execute: a reading takes a few hundred; a
/// loop bomb stops here instead of holding up the run.
const READING_FUEL: u64 = 100_000;

/// A reading's template, compiled once in an environment of its own (strict, on fuel).
#[derive(Clone)]
pub struct Jinja {
    source: String,
    env: Arc<minijinja::Environment<'static>>,
}

impl Jinja {
    fn new(source: &str) -> Result<Jinja, ExtractError> {
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_fuel(Some(READING_FUEL));
        env.add_template_owned("extract", source.to_string())
            .map_err(|e| {
                ExtractError::new(
                    format!(
                        "`extract:`'s template does not compile: {}",
                        e.detail().unwrap_or("a syntax error")
                    ),
                    "templates use Jinja syntax over `answer`, `json` and `vars`: {{ json.answer }}, {{ answer | trim | upper }}",
                )
            })?;
        let globals: Vec<String> = env.globals().map(|(n, _)| n.to_string()).collect();
        let template = env.get_template("extract").map_err(|e| {
            ExtractError::new(e.to_string(), "write the template again".to_string())
        })?;
        let mut unknown: Vec<String> = template
            .undeclared_variables(false)
            .into_iter()
            .filter(|v| !TEMPLATE_VARIABLES.contains(&v.as_str()) && !globals.contains(v))
            .collect();
        unknown.sort();
        if let Some(first) = unknown.first() {
            return Err(ExtractError::new(
                format!("`extract:`'s template uses `{first}`, which a reading does not have"),
                "a reading's template sees `answer` (the whole answer), `json` (its JSON, or none) and `vars` (the case's variables: `vars.NAME`)",
            ));
        }
        if let Some(u) = super::jinja::unknown_in_template(&env, &template, &[]).first() {
            return Err(ExtractError::new(
                format!("`extract:`'s template uses an {u}"),
                "a reading's template may use the engine's filters and tests (`upper`, `trim`, `default`, … `is defined`, …)",
            ));
        }
        Ok(Jinja {
            source: source.to_string(),
            env: Arc::new(env),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The compiled template.
    pub fn template(&self) -> minijinja::Template<'_, '_> {
        self.env
            .get_template("extract")
            .expect("compiled when the reading was made")
    }
}

impl std::fmt::Debug for Jinja {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Jinja({:?})", self.source)
    }
}

impl PartialEq for Jinja {
    fn eq(&self, other: &Jinja) -> bool {
        self.source == other.source
    }
}

impl Serialize for Jinja {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for Jinja {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Jinja::new(&text).map_err(|e| serde::de::Error::custom(e.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_form_is_read_and_written_back_as_written() {
        for (written, yaml) in [
            (
                json!({"regex": "Answer: ([A-D])"}),
                r#"{regex: "Answer: ([A-D])"}"#,
            ),
            (json!({"json": "/answer"}), r#"{json: "/answer"}"#),
            (json!({"tag": "answer"}), r#"{tag: "answer"}"#),
            // A regex as written: no backslash doubled, in quotes where `\` is itself.
            (
                json!({"regex": r#"Answer: (\d+)\s*"?'"#}),
                r#"{regex: 'Answer: (\d+)\s*"?'''}"#,
            ),
            (json!("last_line"), "last_line"),
            (
                json!({"template": "{{ json.choice | upper }}"}),
                r#"{template: "{{ json.choice | upper }}"}"#,
            ),
        ] {
            let x = Extract::from_value(&written).unwrap();
            assert_eq!(x.to_yaml(), yaml);
            // As run.json keeps it: the same form, and the same reading back.
            assert_eq!(serde_json::to_value(&x).unwrap(), written);
            assert_eq!(serde_json::from_value::<Extract>(written).unwrap(), x);
        }
    }

    #[test]
    fn bad_readings_say_what_is_wrong_and_how_to_fix_it() {
        let err = |v: Value| Extract::from_value(&v).unwrap_err();
        let e = err(json!({"regex": "Answer: ([A-D]"}));
        assert!(e.message.contains("does not compile"), "{e:?}");
        let e = err(json!({"json": "answer"}));
        assert!(e.message.contains("not a JSON pointer"), "{e:?}");
        assert!(e.fix.contains("{json: /answer}"), "{e:?}");
        let e = err(json!({"json": "$.result.items[0]"}));
        assert!(e.fix.contains("/result/items/0"), "{e:?}");
        let e = err(json!({"json": "/a~2b"}));
        assert!(e.message.contains("~0"), "{e:?}");
        let e = err(json!({"tag": "<answer>"}));
        assert!(e.fix.contains("without its angle brackets"), "{e:?}");
        let e = err(json!({"regx": "x"}));
        assert_eq!(e.message, "unknown reading `regx` in `extract:`");
        assert!(e.fix.starts_with("did you mean `regex`?"), "{e:?}");
        let e = err(json!({"tag": "a", "json": "/a"}));
        assert!(e.message.contains("one way"), "{e:?}");
        let e = err(json!("first_line"));
        assert!(e.message.contains("is not a reading"), "{e:?}");
        let e = err(json!({"tag": 3}));
        assert!(e.message.contains("takes text"), "{e:?}");
        let e = err(json!({"template": "{{ answer "}));
        assert!(e.message.contains("does not compile"), "{e:?}");
        let e = err(json!({"template": "{{ output }}"}));
        assert!(e.message.contains("`output`"), "{e:?}");
    }

    #[test]
    fn a_prompt_that_never_asks_for_the_format_read_is_found_and_one_that_does_is_not() {
        let json = Extract::json("/answer").unwrap();
        let tag = Extract::tag("answer").unwrap();
        let line = Extract::regex("Answer: ([A-D])").unwrap();
        let plain = "Answer with the letter of the right option alone.\nWhich is it?";
        assert_eq!(
            json.missing_hint(plain, false).as_deref(),
            Some("never mentions JSON (nor asks for it with `response_format`)")
        );
        assert_eq!(
            tag.missing_hint(plain, false).as_deref(),
            Some("never writes the tag <answer>")
        );
        // "Answer" is in the prompt: a regex's words say little, and no false alarm.
        assert_eq!(line.missing_hint(plain, false), None);
        assert_eq!(
            Extract::regex(r"Final verdict:\s*(\w+)")
                .unwrap()
                .missing_hint(plain, false)
                .as_deref(),
            Some("never uses the regex's words (`Final`, `verdict`)")
        );
        // Each is satisfied by what asks for its format.
        assert_eq!(json.missing_hint("Reply in json.", false), None);
        assert_eq!(json.missing_hint(plain, true), None);
        assert_eq!(
            json.missing_hint("Example reply: {\"answer\": \"C\"}", false),
            None
        );
        assert_eq!(
            tag.missing_hint("then give it inside <ANSWER></ANSWER>", false),
            None
        );
        assert_eq!(
            Extract::regex("(?i)final verdict: (.+)")
                .unwrap()
                .missing_hint(plain, false),
            None
        );
        assert_eq!(Extract::LastLine.missing_hint("", false), None);
    }

    #[test]
    fn a_regex_is_described_as_written() {
        assert_eq!(
            Extract::regex(r"Answer:\s*(\d+)").unwrap().describe(),
            r"reads the first group of the regex `Answer:\s*(\d+)`"
        );
        assert_eq!(
            Extract::regex("(?s)a\nb").unwrap().describe(),
            r"reads the first group of the regex `(?s)a\nb`"
        );
    }

    #[test]
    fn each_reading_says_what_it_reads() {
        assert_eq!(
            Extract::json("/answer").unwrap().describe(),
            "reads /answer as a JSON pointer"
        );
        assert_eq!(
            Extract::tag("answer").unwrap().describe(),
            "reads the last <answer>…</answer>"
        );
        assert!(
            Extract::regex("A: (.)")
                .unwrap()
                .describe()
                .contains("`A: (.)`")
        );
    }
}
