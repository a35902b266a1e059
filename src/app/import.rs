//! `import promptfoo CONFIG`: a promptfoo config as a promptgauge bench. Prompts become
//! variants, tests (inline, YAML/JSON or CSV files) become cases, the asserts promptgauge
//! has a scorer for become scorers, the providers become the endpoint (several: `endpoints:`,
//! side by side in one run); whatever has
//! no equivalent is listed, in the terminal and in IMPORT-NOTES.md, never dropped silently.

mod asserts;
mod bench;
mod files;
mod gates;
mod openai_evals;
mod promptfoo_tests;
mod prompts;
mod reader;
mod transform;
mod vars;

use std::path::Path;

use serde_json::{Map, Value, json};

use self::bench::{
    Import, MAX_IMPORT_BYTES, check_importable, collapse_notes, render, say_imported, slug,
    write_bench,
};
use self::reader::{Reader, yaml};
use super::{Exit, Failure};
use crate::cli::ImportArgs;
use crate::error::UsageError;

/// A provider read: its label (or model), the endpoint's fields, its request parameters.
type ProviderRead = (String, Map<String, Value>, Map<String, Value>);

/// An endpoint's name from a provider's label or model: letters, digits, `-`, `_`, `.`
/// (others become `-`), at most 64, starting with a letter or digit.
fn endpoint_name(label: &str) -> String {
    let cleaned: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed: String = cleaned
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(64)
        .collect();
    if trimmed.is_empty() {
        "endpoint".to_string()
    } else {
        trimmed
    }
}

/// A regex with every capturing group made non-capturing: the same matches, no capture
/// to compare (promptfoo's `regex` passes on a match).
fn without_captures(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // `[]…]` and `[^]…]`: a leading `]` is a literal.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push(']');
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            '(' if !in_class => {
                if chars.peek() == Some(&'?') {
                    // Named groups `(?P<n>…)`, `(?<n>…)` capture too; other `(?…)` do not.
                    let rest: String = chars.clone().take(3).collect();
                    if rest.starts_with("?P<")
                        || (rest.starts_with("?<")
                            && !rest.starts_with("?<=")
                            && !rest.starts_with("?<!"))
                    {
                        for c in chars.by_ref() {
                            if c == '>' {
                                break;
                            }
                        }
                        out.push_str("(?:");
                    } else {
                        out.push('(');
                    }
                } else {
                    out.push_str("(?:");
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// `` `a` `` or `` `a`, `b` ``: expected answers as a note shows them.
fn quoted(answers: &[String]) -> String {
    answers
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// An assert's value as text, rendered against the test's variables; `None` for a value
/// that is not text, a number or a boolean.
fn rendered(v: &Value, vars: &Map<String, Value>) -> Result<Option<String>, String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return Ok(None),
    };
    render(&text, vars).map(Some)
}

/// Whether an assert of this kind means nothing without a text value.
fn needs_text(kind: &str) -> bool {
    matches!(
        kind,
        "contains"
            | "icontains"
            | "starts-with"
            | "regex"
            | "llm-rubric"
            | "model-graded-closedqa"
            | "factuality"
            | "model-graded-factuality"
    )
}

/// The scorer (and the answers it compares with) of an assert that takes at most one
/// text; `None` for the other kinds.
fn text_scorer(
    kind: &str,
    value: Option<&Value>,
    text: Option<String>,
) -> Option<(Value, Option<Vec<String>>)> {
    let one = |t: &Option<String>| t.clone().map(|t| vec![t]);
    Some(match kind {
        // JavaScript's `==` of the whole output, untrimmed: `exact` would trim and
        // normalise (asserts.rs says each form of the value).
        "equals" => (
            json!({"kind": "expr", "expr": asserts::equals_expr(value, text.as_deref())?}),
            one(&text).filter(|_| value.is_some_and(|v| v.is_string())),
        ),
        "contains" => (
            json!({"kind": "contains", "case_sensitive": true}),
            one(&text),
        ),
        "icontains" => (json!({"kind": "contains"}), one(&text)),
        "starts-with" => (
            json!({"kind": "regex", "pattern": format!("^\\s*(?:{})", regex::escape(text.as_deref().unwrap_or(""))), "case_sensitive": true}),
            None,
        ),
        // promptfoo passes a regex on a match; promptgauge compares a capture group with
        // the expected answer, so groups become non-capturing (the same match).
        "regex" => (
            json!({"kind": "regex", "pattern": without_captures(text.as_deref().unwrap_or("")), "case_sensitive": true}),
            None,
        ),
        // The rubric is what the judge judges by: there is no reference answer.
        "llm-rubric" | "model-graded-closedqa" => (
            json!({"kind": "judge", "rubric": text.clone().unwrap_or_default()}),
            None,
        ),
        // Factuality compares with a reference: the value is that reference.
        "factuality" | "model-graded-factuality" => (json!({"kind": "judge"}), one(&text)),
        _ => return None,
    })
}

/// A test's named parts as one grade: `all` of them. Asserts with `weight: 0` are metrics
/// promptfoo records and passes: with others beside them, the grade is the `mean` of the
/// others' `all` (weight 1) and of them (weight 0), so they are reported and never decide.
fn combined(scorers: Vec<Value>, metric_only: &[bool]) -> Value {
    let metrics = metric_only.iter().filter(|m| **m).count();
    if metrics == 0 || metrics == scorers.len() {
        return json!({"kind": "all", "of": scorers});
    }
    let (mut decide, mut record) = (Vec::new(), Vec::new());
    for (scorer, metric) in scorers.into_iter().zip(metric_only) {
        if *metric {
            record.push(scorer);
        } else {
            decide.push(scorer);
        }
    }
    let head = if decide.len() == 1 {
        decide.remove(0)
    } else {
        json!({"kind": "all", "name": "asserts", "of": decide})
    };
    let weights: Vec<f64> = std::iter::once(1.0)
        .chain(record.iter().map(|_| 0.0))
        .collect();
    let of: Vec<Value> = std::iter::once(head).chain(record).collect();
    json!({"kind": "mean", "weights": weights, "of": of})
}

/// Why an assert with no scorer was left out.
fn left_out(kind: &str, test: usize) -> String {
    format!("test {test}: assert `{kind}` has no promptgauge scorer and was left out")
}

/// The endpoint of a provider promptgauge speaks to (`openai:…`, `anthropic:…`,
/// `ollama:…`): its model, base URL (the config's `apiBaseUrl` or `apiHost`, else the
/// provider's own), key variable and protocol; `None` for any other.
fn known_endpoint(
    kind: &str,
    api: &str,
    model: &str,
    config: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let base_of = |default: &str| {
        config
            .get("apiBaseUrl")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| {
                config
                    .get("apiHost")
                    .and_then(Value::as_str)
                    .map(|h| format!("https://{h}/v1"))
            })
            .unwrap_or_else(|| default.into())
    };
    let mut endpoint = Map::new();
    match (kind, api) {
        ("openai", _) => {
            endpoint.insert("model".into(), json!(model));
            endpoint.insert(
                "base_url".into(),
                json!(base_of("https://api.openai.com/v1")),
            );
            endpoint.insert("api_key_env".into(), json!("OPENAI_API_KEY"));
            if api == "responses" {
                endpoint.insert("protocol".into(), json!("openai-responses"));
            }
        }
        ("anthropic", "messages" | "chat") => {
            endpoint.insert("model".into(), json!(model));
            endpoint.insert(
                "base_url".into(),
                json!(base_of("https://api.anthropic.com/v1")),
            );
            endpoint.insert("api_key_env".into(), json!("ANTHROPIC_API_KEY"));
            endpoint.insert("protocol".into(), json!("anthropic-messages"));
        }
        ("ollama", _) => {
            endpoint.insert("model".into(), json!(model));
            endpoint.insert("base_url".into(), json!("http://127.0.0.1:11434/v1"));
        }
        _ => return None,
    }
    Some(endpoint)
}

/// A test's asserts as scorers.
#[derive(Default)]
struct AssertScorers {
    scorers: Vec<Value>,
    /// Each scorer's assert: its type, and its `metric` when it names one.
    asserts: Vec<(String, Option<String>)>,
    /// Whether each scorer's assert has `weight: 0` (a metric promptfoo records and never
    /// fails the test on).
    metric_only: Vec<bool>,
    /// The answers they compare with.
    expected: Option<Vec<String>>,
    /// A `regex` passes on a match, with no answer to compare.
    pattern_only: bool,
    /// Which of the asserts became a scorer (or a gate), in order.
    converted: Vec<bool>,
    /// Every assert became a run gate (`latency`, `cost`): nothing to score.
    gates_only: bool,
}

impl Import {
    /// The cases' files, once every test is read: a `file://` variable naming an image, a
    /// PDF or audio is copied into the bench's `files/` folder and becomes a case's file
    /// of that name; a variable a prompt's image part names becomes one too (its URL,
    /// data URL or base64); a text prompt's `{{ var }}` of such a variable places it.
    fn attach_files(&mut self, reader: &Reader) -> Result<(), String> {
        let mut copied: std::collections::HashMap<String, String> = Default::default();
        let mut left_out = Vec::new();
        for (i, case) in self.cases.iter_mut().enumerate() {
            let Some(case) = case.as_object_mut() else {
                continue;
            };
            let mut attached = Map::new();
            if let Some(Value::Object(vars)) = case.get_mut("vars") {
                let names: Vec<String> = vars
                    .iter()
                    .filter(|(_, v)| v.as_str().is_some_and(files::attachable))
                    .map(|(k, _)| k.clone())
                    .collect();
                for name in names {
                    let Some(Value::String(reference)) = vars.remove(&name) else {
                        continue;
                    };
                    let rel = match copied.get(&reference) {
                        Some(rel) => rel.clone(),
                        None => {
                            let path = reader.attachment(&reference)?;
                            let file = path
                                .file_name()
                                .map(|f| f.to_string_lossy().into_owned())
                                .unwrap_or_else(|| "file".into());
                            let mut rel = format!("files/{file}");
                            if self.copies.iter().any(|(r, _)| *r == rel) {
                                rel = format!("files/{}-{file}", self.copies.len() + 1);
                            }
                            self.copies.push((rel.clone(), path));
                            copied.insert(reference, rel.clone());
                            rel
                        }
                    };
                    // The detail the prompt's image part asked for goes with the file.
                    let entry = match &self.file_vars.entry(name.clone()).or_default().detail {
                        Some(d) => json!({"path": rel, "detail": d}),
                        None => json!(rel),
                    };
                    attached.insert(files::file_name(&name), entry);
                }
            }
            if !attached.is_empty() {
                case.insert("files".into(), Value::Object(attached));
            }
            // A case whose file cannot be a bench's (`check` would refuse it) is left out,
            // named: never written.
            if let Err(why) = files::vars_to_files(case, &self.file_vars) {
                left_out.push(i);
                self.notes.push(format!(
                    "{why}: this case was left out (download the file beside the config and name it `file://…`, or add the case by hand with the file's `kind:`, docs/guide/attachments.md)"
                ));
            }
        }
        for i in left_out.into_iter().rev() {
            self.cases.remove(i);
        }
        for (file, text) in &mut self.variants {
            if file.ends_with(".txt") {
                *text = files::place_in_text(text, &self.file_vars);
            }
        }
        Ok(())
    }

    /// `defaultTest` (inline or from a file): its variables start every test's, its
    /// asserts are returned (added to every test's); its other settings are noted.
    fn default_test(&mut self, files: &Reader, config: &Value) -> Result<Vec<Value>, String> {
        let d = promptfoo_tests::default_test(files, config)?;
        self.default_vars = vars::vars_of(files, d.get("vars"))?;
        self.default_transform = self.options(d.get("options"), "defaultTest");
        for key in d
            .keys()
            .filter(|k| !matches!(k.as_str(), "assert" | "vars" | "options"))
        {
            self.notes
                .push(format!("`defaultTest.{key}` was not carried over"));
        }
        Ok(d.get("assert")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// The config's providers: one becomes the bench's `endpoint:` (its settings the
    /// bench's `params`); several become `endpoints:`, side by side in one run (each with
    /// its own `params`), named by their `label` or model.
    fn provider(&mut self, providers: &Value) {
        let list = match providers {
            Value::Array(items) => items.clone(),
            one => vec![one.clone()],
        };
        let read: Vec<ProviderRead> = list.iter().filter_map(|p| self.one_provider(p)).collect();
        match read.as_slice() {
            [] => {}
            [(_, endpoint, params)] => {
                self.endpoint = endpoint.clone();
                self.params = params.clone();
            }
            several => {
                let mut names = std::collections::HashSet::new();
                for (label, endpoint, params) in several {
                    let mut e = Map::new();
                    let mut name = endpoint_name(label);
                    let base = name.clone();
                    let mut n = 1;
                    while !names.insert(name.clone()) {
                        n += 1;
                        name = format!("{base}-{n}");
                    }
                    e.insert("name".into(), json!(name));
                    e.extend(endpoint.clone());
                    if !params.is_empty() {
                        e.insert("params".into(), Value::Object(params.clone()));
                    }
                    self.endpoints.push(e);
                }
                self.review.push(format!(
                    "{} providers became {} endpoints, measured side by side in one run (each variant at each endpoint, verdicts on both axes: docs/guide/endpoints.md); add each one's `price` to compare costs",
                    list.len(),
                    several.len()
                ));
            }
        }
    }

    /// One provider as (its label, the endpoint's fields, its request parameters); `None`
    /// (with a note) for a provider promptgauge cannot speak to.
    fn one_provider(&mut self, provider: &Value) -> Option<ProviderRead> {
        let (id, config, label) = match provider {
            Value::String(s) => (s.clone(), Map::new(), None),
            Value::Object(o) => {
                let id = o
                    .get("id")
                    .or_else(|| o.get("provider"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let others = o
                    .keys()
                    .filter(|k| !matches!(k.as_str(), "id" | "provider" | "config" | "label"));
                for key in others {
                    self.notes
                        .push(format!("provider `{id}`: its `{key}` was not carried over"));
                }
                (
                    id,
                    o.get("config")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                    o.get("label").and_then(Value::as_str).map(String::from),
                )
            }
            _ => return None,
        };
        let parts: Vec<&str> = id.split(':').collect();
        let (kind, api, model) = match parts.as_slice() {
            [kind, api @ ("chat" | "responses" | "messages"), model @ ..] if !model.is_empty() => {
                (*kind, *api, model.join(":"))
            }
            [kind, model @ ..] if !model.is_empty() => (*kind, "chat", model.join(":")),
            _ => ("", "", String::new()),
        };
        let Some(mut endpoint) = known_endpoint(kind, api, &model, &config) else {
            self.notes.push(format!(
                "provider `{id}` is not one promptgauge knows (it speaks OpenAI chat completions and Responses, and Anthropic messages): set endpoint.base_url and endpoint.model for it (any OpenAI-compatible server works)"
            ));
            return None;
        };
        let params = self.provider_settings(&id, &config, &mut endpoint);
        if let (Some(base), Some(model)) = (
            endpoint.get("base_url").and_then(Value::as_str),
            endpoint.get("model").and_then(Value::as_str),
        ) {
            self.review.push(format!(
                "an endpoint comes from the config's provider `{id}`: model `{model}` at {} — `promptgauge run` sends every prompt and case there",
                promptgauge_client::secrets::redact_url(base)
            ));
        }
        Some((label.unwrap_or_else(|| model.clone()), endpoint, params))
    }

    /// A provider's `config`: the request parameters it sets (returned), the key's
    /// variable (into `endpoint`); an API key is never copied, and the rest is noted.
    fn provider_settings(
        &mut self,
        id: &str,
        config: &Map<String, Value>,
        endpoint: &mut Map<String, Value>,
    ) -> Map<String, Value> {
        let mut params = Map::new();
        for (k, v) in config {
            match k.as_str() {
                "temperature" | "max_tokens" | "top_p" | "seed" | "stop" | "response_format" => {
                    params.insert(k.clone(), v.clone());
                }
                "apiKeyEnvar" => match v.as_str() {
                    Some(var) => {
                        endpoint.insert("api_key_env".into(), json!(var));
                    }
                    None => self
                        .notes
                        .push("provider setting `apiKeyEnvar` is not a name: not carried over".into()),
                },
                "apiKey" => self.notes.push(
                    "the config holds an API key (`apiKey`): it was not copied (a bench names the variable that holds the key, endpoint.api_key_env); put the key in that variable".into(),
                ),
                "apiBaseUrl" | "apiHost" => {}
                other => self
                    .notes
                    .push(format!("provider `{id}`: setting `{other}` was not carried over")),
            }
        }
        params
    }

    /// One promptfoo assert as (scorer, the answers it compares with), its values rendered
    /// against the test's variables as promptfoo does (`contains: "{{expected}}"`).
    fn assertion(
        &mut self,
        a: &Value,
        test: usize,
        vars: &Map<String, Value>,
    ) -> Option<(Value, Option<Vec<String>>)> {
        let kind = a.get("type").and_then(Value::as_str).unwrap_or("");
        // These kinds carry their `threshold` over.
        let thresholded = matches!(kind, "similar" | "g-eval" | "javascript" | "python");
        let metric_only = a.get("weight").and_then(Value::as_f64) == Some(0.0);
        for key in a.as_object().into_iter().flat_map(|o| o.keys()) {
            // `metric` names the assert's part (when the test has several).
            let carried = matches!(key.as_str(), "type" | "value" | "metric")
                || (thresholded && key == "threshold")
                || (metric_only && key == "weight");
            if key == "transform" {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s `transform` is JavaScript run for that assert alone, which promptgauge does not do: the assert sees the untransformed output"
                ));
            } else if !carried {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s `{key}` was not carried over (promptgauge scores every assert alike)"
                ));
            }
        }
        let value = a.get("value");
        let text = match value.map(|v| rendered(v, vars)) {
            None => None,
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                self.notes.push(format!(
                    "test {test}: assert `{kind}`'s value cannot be filled from the test's vars ({e}): left out"
                ));
                return None;
            }
        };
        if needs_text(kind) && text.is_none() {
            self.notes.push(format!(
                "test {test}: assert `{kind}` with a value that is not text ({}) has no exact promptgauge equivalent: left out",
                value.map_or("none".to_string(), |v| promptgauge_client::protocol::truncate(&v.to_string(), 60))
            ));
            return None;
        }
        if let Some(scorer) = text_scorer(kind, value, text.clone()) {
            return Some(scorer);
        }
        match kind {
            "contains-any" | "icontains-any" => self.any_of(kind, value, test, vars),
            other => {
                let notes = self.notes.len();
                let more = self.more_assertion(other, a, text.as_deref(), test);
                // An assert that is neither converted nor already explained is said.
                if more.is_none() && self.notes.len() == notes {
                    self.notes.push(left_out(other, test));
                }
                more
            }
        }
    }

    /// `contains-any` / `icontains-any`: any one of the listed strings, which is what a
    /// case's expected answers are.
    fn any_of(
        &mut self,
        kind: &str,
        value: Option<&Value>,
        test: usize,
        vars: &Map<String, Value>,
    ) -> Option<(Value, Option<Vec<String>>)> {
        let list: Option<Vec<String>> = match value {
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| rendered(v, vars).ok().flatten())
                .collect(),
            Some(v) => rendered(v, vars)
                .ok()
                .flatten()
                .map(|t| t.split(',').map(|p| p.trim().to_string()).collect()),
            None => None,
        };
        let Some(list) = list.filter(|l| !l.is_empty()) else {
            self.notes.push(format!(
                "test {test}: assert `{kind}` has no list of strings: left out"
            ));
            return None;
        };
        let sensitive = kind == "contains-any";
        Some((
            json!({"kind": "contains", "case_sensitive": sensitive}),
            Some(list),
        ))
    }

    /// A test as a case: its asserts' scorers (`all` of them, when several) and the one set
    /// of answers they compare with; a test none of whose asserts can score is skipped,
    /// with a note.
    fn case(
        &mut self,
        vars: Map<String, Value>,
        asserts: &[Value],
        description: Option<&str>,
        id: Option<String>,
    ) -> Vec<bool> {
        self.cases_seen += 1;
        let (n, c) = (self.test_no, self.cases_seen);
        if asserts.is_empty() {
            // promptfoo shows such a test's answers and passes it; promptgauge keeps it to
            // read, apart from the cases it scores.
            let mut case = Map::new();
            case.insert("id".into(), json!(self.case_id(id, c)));
            case.insert("vars".into(), Value::Object(vars));
            if let Some(d) = description {
                case.insert("tags".into(), json!([slug(d)]));
            }
            self.unscored.push(Value::Object(case));
            return Vec::new();
        }
        let AssertScorers {
            mut scorers,
            asserts,
            metric_only,
            expected,
            pattern_only,
            converted,
            gates_only,
        } = self.scorers(asserts, n, &vars);
        if gates_only {
            // Its asserts are the run's gates: the case runs (its latency and cost are
            // measured), and every answer passes, as promptfoo's row does within them.
            scorers.push(json!({"kind": "expr", "expr": "true"}));
            self.notes.push(format!(
                "test {n}: its only asserts are gates of the run: it is kept, scored by `expr: true`, so its jobs' latency and cost are measured"
            ));
        }
        if scorers.is_empty() {
            self.notes.push(format!(
                "test {n} has no assert promptgauge can score: skipped"
            ));
            return converted;
        }
        let grade = self.grade_of(n, scorers, &asserts, expected.as_deref(), &metric_only);
        let mut case = Map::new();
        case.insert("id".into(), json!(self.case_id(id, c)));
        case.insert("vars".into(), Value::Object(vars));
        match expected {
            Some(e) if e.len() == 1 => {
                case.insert("expected".into(), json!(e[0]));
            }
            Some(e) => {
                case.insert("expected".into(), json!(e));
            }
            // A pattern alone passes on a match, a program by its own test: the expected
            // text is not compared.
            None if pattern_only => {
                case.insert("expected".into(), json!("(the assert decides)"));
            }
            None => {}
        }
        case.insert("grade".into(), grade);
        if let Some(d) = description {
            case.insert("tags".into(), json!([slug(d)]));
        }
        self.cases.push(Value::Object(case));
        converted
    }

    /// A test's grade: its one scorer, or all of them as parts named by their checks
    /// ([`Self::named_parts`]), weight-0 asserts recorded beside the deciding ones
    /// ([`combined`]); a judge that also sees another assert's value, and asserts of
    /// weight 0 alone deciding, are noted.
    fn grade_of(
        &mut self,
        n: usize,
        mut scorers: Vec<Value>,
        asserts: &[(String, Option<String>)],
        expected: Option<&[String]>,
        metric_only: &[bool],
    ) -> Value {
        let rubric_judge = scorers
            .iter()
            .any(|s| s["kind"] == "judge" && s.get("rubric").is_some());
        if let (true, Some(e), true) = (rubric_judge, expected, scorers.len() > 1) {
            self.notes.push(format!(
                "test {n}: the judge of its llm-rubric also sees {} (another assert's value) as the reference answer",
                quoted(e)
            ));
        }
        if !metric_only.is_empty() && metric_only.iter().all(|m| *m) {
            self.notes.push(format!(
                "test {n}: every assert has `weight: 0` (promptfoo records them and passes the test): here they decide it"
            ));
        }
        if scorers.len() == 1 {
            return scorers.remove(0);
        }
        combined(self.named_parts(scorers, asserts), metric_only)
    }

    /// Test `n`'s asserts as scorers; an assert comparing with other answers than the
    /// first one's is left out (with a note): a case has one set of expected answers.
    fn scorers(&mut self, asserts: &[Value], n: usize, vars: &Map<String, Value>) -> AssertScorers {
        let mut found = AssertScorers {
            gates_only: true,
            ..AssertScorers::default()
        };
        for a in asserts {
            let kind = a.get("type").and_then(Value::as_str).unwrap_or("");
            if matches!(kind, "latency" | "cost") {
                let gate = self.gate_assert(kind, a, n);
                found.converted.push(gate);
                found.gates_only &= gate;
                continue;
            }
            found.gates_only = false;
            found.converted.push(false);
            let Some((scorer, value)) = self.assertion(a, n, vars) else {
                continue;
            };
            // A pattern, or a program, decides alone: no answer to compare.
            if (scorer["kind"] == "regex" || scorer["kind"] == "command") && value.is_none() {
                found.pattern_only = true;
            }
            match (&found.expected, value) {
                (None, Some(v)) => found.expected = Some(v),
                (Some(e), Some(v)) if *e != v => {
                    self.notes.push(format!(
                        "test {n}: asserts compare with different values ({}, {}); a promptgauge case has one set of expected answers: the assert using {} was left out",
                        quoted(e),
                        quoted(&v),
                        quoted(&v)
                    ));
                    continue;
                }
                _ => {}
            }
            found.converted.pop();
            found.converted.push(true);
            found.scorers.push(scorer);
            let kind = a.get("type").and_then(Value::as_str).unwrap_or("assert");
            let metric = a.get("metric").and_then(Value::as_str).map(str::trim);
            found.asserts.push((
                kind.to_string(),
                metric
                    .filter(|m| promptgauge_grade::part_name_ok(m))
                    .map(String::from),
            ));
            found
                .metric_only
                .push(a.get("weight").and_then(Value::as_f64) == Some(0.0));
        }
        found
    }

    /// Several asserts' scorers as parts, each named for its report row: its `metric`, else its type numbered over the bench by check ([`bench::PartNames`]), so a
    /// part pools the same check over the tests and nothing else.
    fn named_parts(
        &mut self,
        scorers: Vec<Value>,
        asserts: &[(String, Option<String>)],
    ) -> Vec<Value> {
        let mut used: Vec<String> = Vec::with_capacity(scorers.len());
        let mut checks: Vec<String> = Vec::with_capacity(scorers.len());
        scorers
            .into_iter()
            .zip(asserts)
            .map(|(mut scorer, (kind, metric))| {
                // The same scorer twice in one test is two checks (its place among its like).
                let check = scorer.to_string();
                let like = checks.iter().filter(|c| **c == check).count();
                checks.push(check.clone());
                let name = match metric.as_deref().filter(|m| !used.iter().any(|u| u == m)) {
                    Some(m) => self.part_names.metric(m),
                    None => self.part_names.name(kind, &format!("{check}#{like}")),
                };
                used.push(name.clone());
                if let Some(o) = scorer.as_object_mut() {
                    o.insert("name".into(), json!(name));
                }
                scorer
            })
            .collect()
    }

    /// Counts the asserts of a test's first case that became scorers: its own, and (into
    /// `defaults`) defaultTest's, which come first.
    fn count_converted(&mut self, converted: &[bool], defaults: &mut [bool]) {
        for (i, c) in converted.iter().enumerate() {
            match defaults.get_mut(i) {
                Some(d) => *d |= *c,
                None => self.asserts_converted += usize::from(*c),
            }
        }
    }

    /// Case `n`'s id: the one its test gives, unless used before; else `t-NNN`.
    fn case_id(&mut self, id: Option<String>, n: usize) -> String {
        let id = match id {
            Some(id) if !self.ids.contains(&id) => id,
            Some(id) => {
                self.notes.push(format!(
                    "test {}: its id `{id}` was used before; it became t-{n:03}",
                    self.test_no
                ));
                format!("t-{n:03}")
            }
            None => format!("t-{n:03}"),
        };
        self.ids.insert(id.clone());
        id
    }

    /// `tests:`, each test as a case (a test with list variables as one case per
    /// combination, as promptfoo runs it).
    fn tests(
        &mut self,
        files: &Reader,
        tests: &Value,
        default_asserts: &[Value],
    ) -> Result<(), String> {
        let mut default_converted = vec![false; default_asserts.len()];
        for promptfoo_tests::TestRead { test: t, id } in promptfoo_tests::read_tests(files, tests)?
        {
            let mut vars = self.default_vars.clone();
            vars.extend(vars::vars_of(files, t.get("vars"))?);
            let mut asserts: Vec<Value> = default_asserts.to_vec();
            asserts.extend(
                t.get("assert")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            self.tests_read += 1;
            self.test_no = self.tests_read;
            let test = self.test_no;
            let own = asserts.len() - default_asserts.len();
            self.asserts_written += own;
            for key in t.as_object().into_iter().flat_map(|o| o.keys()) {
                if !matches!(key.as_str(), "vars" | "assert" | "description" | "options") {
                    self.notes
                        .push(format!("test {test}: its `{key}` was not carried over"));
                }
            }
            if let Some(js) = self.options(t.get("options"), &format!("test {test}")) {
                self.test_transforms.push((test, js));
            }
            let combos = vars::combinations(files, &vars)?;
            let many = combos.len() > 1;
            for (i, mut combo) in combos.into_iter().enumerate() {
                vars::read_file_values(files, &mut combo)
                    .map_err(|e| format!("test {test}: {e}"))?;
                let id = if many { None } else { id.clone() };
                let converted = self.case(
                    combo,
                    &asserts,
                    t.get("description").and_then(Value::as_str),
                    id,
                );
                // Each assert as written counts once: its test's first case says whether it
                // became a scorer (defaultTest's, once for the whole config).
                if i == 0 {
                    self.count_converted(&converted, &mut default_converted);
                }
            }
        }
        self.asserts_written += default_asserts.len();
        self.asserts_converted += default_converted.iter().filter(|c| **c).count();
        Ok(())
    }
}

/// `import TOOL CONFIG`: writes the bench into `--out`; nothing is overwritten.
pub fn import(args: &ImportArgs) -> Result<Exit, Failure> {
    match args.from {
        crate::cli::ImportFrom::Promptfoo if !args.runs.is_empty() || args.items.is_some() => {
            Err(UsageError::with_fix(
                "--run and --items are for `import openai-evals`: a promptfoo config names its own prompts and tests",
                "drop them",
            )
            .into())
        }
        crate::cli::ImportFrom::Promptfoo => import_promptfoo(args),
        crate::cli::ImportFrom::OpenaiEvals => openai_evals::import(args),
    }
}

/// The keys of a promptfoo config the import reads (`$schema` only names the schema).
const READ_CONFIG_KEYS: [&str; 7] = [
    "$schema",
    "description",
    // Read where `$ref` uses them.
    "assertionTemplates",
    "prompts",
    "providers",
    "defaultTest",
    "tests",
];

/// `import promptfoo CONFIG`.
fn import_promptfoo(args: &ImportArgs) -> Result<Exit, Failure> {
    let config_path = &args.config;
    let config = reader::dereference(&read_config(config_path)?);
    let files = Reader::beside(config_path, args.allow_outside_files);
    let mut im = Import {
        tool: "promptfoo",
        reader: Some(files.clone()),
        ..Import::default()
    };
    let bad = |m: String| -> Failure {
        UsageError::with_fix(m, "fix the promptfoo config, or import its parts by hand").into()
    };
    im.prompts(&files, config.get("prompts").unwrap_or(&Value::Null))
        .map_err(bad)?;
    if let Some(p) = config.get("providers") {
        im.provider(p);
    }
    let default_asserts = im.default_test(&files, &config).map_err(bad)?;
    if let Some(tests) = config.get("tests") {
        im.tests(&files, tests, &default_asserts).map_err(bad)?;
    }
    let (default, each) = (
        im.default_transform.take(),
        std::mem::take(&mut im.test_transforms),
    );
    im.transforms(default, each);
    im.attach_files(&files).map_err(bad)?;
    im.say_cost_gate();
    // The asserts' own files (`file://check.js`), beside the shim that runs them.
    for (reference, rel) in std::mem::take(&mut im.code_files) {
        let (_, text) = files.read(&reference).map_err(bad)?;
        im.files.push((rel, text));
    }
    // Every key the config has and this import did not read is said: the notes claim
    // nothing was left only when nothing was.
    for key in config.as_object().into_iter().flat_map(|o| o.keys()) {
        if !READ_CONFIG_KEYS.contains(&key.as_str()) {
            im.notes.push(format!(
                "`{key}` has no promptgauge equivalent and was left out"
            ));
        }
    }
    // The same note for many tests (a defaultTest assert) is said once, with the count.
    im.notes = collapse_notes(std::mem::take(&mut im.notes));
    im.run_for_answers();
    let out = &args.out;
    check_importable(&im, config_path, out)?;
    let name = config
        .get("description")
        .and_then(Value::as_str)
        .map(slug)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "imported".into());
    write_bench(out, &name, config_path, &im)?;
    say_imported(&im, out);
    Ok(Exit::Success)
}

/// The promptfoo config, read and parsed.
fn read_config(path: &Path) -> Result<Value, Failure> {
    let text = promptgauge_suite::error::read_text_limited(path, "config", MAX_IMPORT_BYTES)
        .map_err(|e| {
            UsageError::with_fix(
                e.to_string(),
                "name a promptfoo config: promptgauge import promptfoo promptfooconfig.yaml",
            )
        })?;
    yaml(&text, &path.display().to_string()).map_err(|e| UsageError(e).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_stop_capturing_and_nothing_else_changes() {
        for (pattern, want) in [
            (r"(\d+) apples", r"(?:\d+) apples"),
            (r"\(not a group\)", r"\(not a group\)"),
            (r"[(]x[)]", r"[(]x[)]"),
            (r"[]()](a)", r"[]()](?:a)"),
            (r"(?P<n>\w+)-(?<m>\d)", r"(?:\w+)-(?:\d)"),
            (
                r"(?:kept)(?i)(?=ahead)(?<=behind)(?<!not)",
                r"(?:kept)(?i)(?=ahead)(?<=behind)(?<!not)",
            ),
        ] {
            let got = without_captures(pattern);
            assert_eq!(got, want, "{pattern}");
            let re = regex::Regex::new(&got);
            if !pattern.contains("(?=") {
                assert_eq!(re.unwrap().captures_len(), 1, "{pattern}: no group left");
            }
        }
    }

    #[test]
    fn assert_values_are_filled_from_the_test_vars() {
        let vars: Map<String, Value> =
            serde_json::from_value(json!({"expected": "Paris", "n": 3})).unwrap();
        assert_eq!(render("{{expected}}", &vars).unwrap(), "Paris");
        assert_eq!(render("{{ n + 1 }} items", &vars).unwrap(), "4 items");
        assert_eq!(render("no tags", &vars).unwrap(), "no tags");
        assert!(render("{{missing}}", &vars).is_err());
    }
}
