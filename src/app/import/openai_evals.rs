//! `import openai-evals EVAL.json --run RUN.json [--items ITEMS.jsonl]`: an OpenAI Evals
//! export (the hosted Evals shut down on 30 November 2026) as a bench. The items become
//! cases (their fields the case's variables), each run's prompt template a variant (its
//! model the endpoint, its sampling parameters the request's), and the testing criteria
//! scorers: `string_check` a text scorer, `text_similarity` with `cosine` the embedding
//! scorer, `label_model` and `score_model` a judge with the same messages and labels (or
//! range and threshold), `python` a `command` scorer running the grader's own code. An item
//! passes when every criterion does (`all`), as OpenAI counts it. What has no equivalent
//! is listed in IMPORT-NOTES.md, never translated loosely (docs/guide/import-openai-evals.md).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::bench::{
    Import, MAX_IMPORT_BYTES, check_importable, collapse_notes, render, say_imported, slug,
    write_bench,
};
use crate::app::{Exit, Failure};
use crate::cli::ImportArgs;
use crate::error::UsageError;

/// Where OpenAI's API answers: the endpoint and judge of an imported eval.
const OPENAI: &str = "https://api.openai.com/v1";

/// The model OpenAI's `cosine` text similarity embeds with.
const OPENAI_EMBEDDING_MODEL: &str = "text-embedding-3-large";

pub(super) fn import(args: &ImportArgs) -> Result<Exit, Failure> {
    let eval = read_json(&args.config)?;
    let criteria = eval
        .get("testing_criteria")
        .and_then(Value::as_array)
        .filter(|c| eval.get("data_source_config").is_some() && !c.is_empty())
        .ok_or_else(|| {
            UsageError::with_fix(
                format!(
                    "{} is not an OpenAI eval: it has no `data_source_config` and `testing_criteria`",
                    args.config.display()
                ),
                "give the eval's JSON as exported (GET /v1/evals/ID), then its runs with --run",
            )
        })?
        .clone();
    let runs: Vec<(std::path::PathBuf, Value)> = args
        .runs
        .iter()
        .map(|p| Ok((p.clone(), read_json(p)?)))
        .collect::<Result<_, Failure>>()?;
    if runs.is_empty() {
        return Err(UsageError::with_fix(
            "an eval holds its data and its checks, not the prompt the model was asked with: that is in a run's data source",
            "add --run RUN.json (a run of this eval, as exported: GET /v1/evals/ID/runs/RUN_ID); repeat it for each prompt or model to compare",
        )
        .into());
    }
    let mut im = Import {
        tool: "openai-evals",
        ..Import::default()
    };
    let items = items(args, &runs)?;
    for (path, run) in &runs {
        let messages = variant(&mut im, path, run)?;
        // Every item must fill the prompt, as every case must fill its variant.
        for (n, item) in items.iter().enumerate() {
            for m in &messages {
                if let Err(e) = render(m, item) {
                    return Err(UsageError::with_fix(
                        format!(
                            "the prompt of the run {} cannot be filled from item {}: {e}",
                            path.display(),
                            item.get("id")
                                .map_or_else(|| (n + 1).to_string(), |v| v.to_string())
                        ),
                        "give every item the fields the prompt names",
                    )
                    .into());
                }
            }
        }
    }
    let (grade, expected) = grades(&mut im, &criteria)?;
    for (i, item) in items.iter().enumerate() {
        case(&mut im, i, item, expected.as_deref())?;
    }
    im.grade = grade;
    if let Some(kind) = eval
        .pointer("/data_source_config/type")
        .and_then(Value::as_str)
        && kind != "custom"
    {
        im.notes.push(format!(
            "the eval's data source is `{kind}` (completions stored at OpenAI): its items were read from the run or --items, not from OpenAI's logs"
        ));
    }
    im.notes = collapse_notes(std::mem::take(&mut im.notes));
    check_importable(&im, &args.config, &args.out)?;
    let name = eval
        .get("name")
        .and_then(Value::as_str)
        .map(slug)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "imported".into());
    write_bench(&args.out, &name, &args.config, &im)?;
    say_imported(&im, &args.out);
    Ok(Exit::Success)
}

fn read_json(path: &Path) -> Result<Value, Failure> {
    let text = promptgauge_suite::error::read_text_limited(path, "export", MAX_IMPORT_BYTES)
        .map_err(|e| UsageError(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        UsageError::with_fix(
            format!("{} is not JSON: {e}", path.display()),
            "give the JSON the OpenAI API returned for the eval and its runs",
        )
        .into()
    })
}

/// The items: `--items` (`{"item": {…}}` per line, or bare objects), else the first run's
/// inline `file_content`.
fn items(
    args: &ImportArgs,
    runs: &[(std::path::PathBuf, Value)],
) -> Result<Vec<Map<String, Value>>, Failure> {
    let rows: Vec<Value> = match &args.items {
        Some(path) => {
            let text = promptgauge_suite::error::read_text_limited(path, "items", MAX_IMPORT_BYTES)
                .map_err(|e| UsageError(e.to_string()))?;
            text.lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .map(|(n, l)| {
                    serde_json::from_str(l).map_err(|e| {
                        UsageError(format!("{}:{}: not JSON: {e}", path.display(), n + 1))
                    })
                })
                .collect::<Result<_, _>>()?
        }
        None => {
            let (path, run) = &runs[0];
            let source = run.pointer("/data_source/source");
            match source.and_then(|s| s.get("type")).and_then(Value::as_str) {
                Some("file_content") => source
                    .and_then(|s| s.get("content"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                Some("file_id") => {
                    let id = source
                        .and_then(|s| s.get("id"))
                        .and_then(Value::as_str)
                        .unwrap_or("?");
                    return Err(UsageError::with_fix(
                        format!(
                            "the run {} reads its items from the file {id} at OpenAI, which is not in the export",
                            path.display()
                        ),
                        format!(
                            "give the items with --items ITEMS.jsonl (the file you uploaded as {id}, one {{\"item\": {{…}}}} per line)"
                        ),
                    )
                    .into());
                }
                other => {
                    return Err(UsageError::with_fix(
                        format!(
                            "the run {} takes its items from `{}`, which an export does not hold",
                            path.display(),
                            other.unwrap_or("nowhere")
                        ),
                        "give the items with --items ITEMS.jsonl",
                    )
                    .into());
                }
            }
        }
    };
    rows.into_iter()
        .enumerate()
        .map(|(n, row)| {
            let item = row.get("item").cloned().unwrap_or(row);
            item.as_object()
                .cloned()
                .ok_or_else(|| UsageError(format!("item {} is not a JSON object", n + 1)).into())
        })
        .collect()
}

/// A run's data source as a variant: its template's messages, its model and sampling
/// parameters (the first run's the endpoint; another model makes the runs endpoints).
/// Returns the messages' contents, which every item must fill.
fn variant(im: &mut Import, path: &Path, run: &Value) -> Result<Vec<String>, Failure> {
    let source = run.get("data_source").unwrap_or(&Value::Null);
    let (messages, contents) = template_of(path, source, &mut im.file_vars)?;
    let name = run
        .get("name")
        .and_then(Value::as_str)
        .map(slug)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("run-{}", im.variants.len() + 1));
    let params = sampling_params(im, &name, source);
    let prompt = json!({"name": name, "messages": messages, "params": params});
    let file = format!("{name}.yaml");
    if im.variants.iter().any(|(f, _)| *f == file) {
        return Err(UsageError::with_fix(
            format!("two runs are named `{name}`"),
            "give each run its own `name` in its JSON",
        )
        .into());
    }
    im.variants.push((
        file,
        format!(
            "# The prompt of the run {} (its data source's template).\n{}\n",
            path.display(),
            serde_json::to_string_pretty(&prompt).unwrap_or_default()
        ),
    ));
    let model = source
        .get("model")
        .or_else(|| run.get("model"))
        .and_then(Value::as_str)
        .unwrap_or("gpt-4.1-mini");
    add_endpoint(im, model);
    Ok(contents)
}

/// A run's prompt template as messages (and their contents), each made a promptgauge
/// template; a run whose answers came with its items, or whose prompt is no template, is
/// refused.
fn template_of(
    path: &Path,
    source: &Value,
    file_vars: &mut super::files::FileVars,
) -> Result<(Vec<Value>, Vec<String>), Failure> {
    let kind = source.get("type").and_then(Value::as_str).unwrap_or("");
    if kind == "jsonl" {
        return Err(UsageError::with_fix(
            format!(
                "the run {} is a `jsonl` run: its answers were given with the items, not asked of a model, so there is no prompt to measure",
                path.display()
            ),
            "import a `completions` (or `responses`) run; to compare answers you already have, use `promptgauge import-results`",
        )
        .into());
    }
    let input = source.get("input_messages").unwrap_or(&Value::Null);
    if input.get("type").and_then(Value::as_str) != Some("template") {
        return Err(UsageError::with_fix(
            format!(
                "the run {} builds its prompt from `{}` (an item reference), not a template",
                path.display(),
                input
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("nothing")
            ),
            "import a run whose input_messages is a template",
        )
        .into());
    }
    let mut messages = Vec::new();
    let mut contents = Vec::new();
    for m in input
        .get("template")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        // Text parts as templates; `input_image` parts naming an item's field as the case's
        // file of that name (docs/guide/attachments.md).
        let content = super::files::content_template(
            m.get("content").unwrap_or(&Value::Null),
            file_vars,
            &|text| template(text, TemplateSide::Prompt),
        )
        .map_err(|why| {
            UsageError(format!(
                "the run {}: a {role} message {why}",
                path.display()
            ))
        })?;
        contents.push(content.clone());
        messages.push(json!({"role": role, "content": content}));
    }
    if messages.is_empty() {
        return Err(UsageError(format!("the run {} has an empty template", path.display())).into());
    }
    Ok((messages, contents))
}

/// The sampling parameters of the run `name` that a request takes; the others are noted.
fn sampling_params(im: &mut Import, name: &str, source: &Value) -> Map<String, Value> {
    let mut params = Map::new();
    let Some(sp) = source.get("sampling_params").and_then(Value::as_object) else {
        return params;
    };
    for (k, v) in sp {
        match k.as_str() {
            "temperature" | "top_p" | "seed" | "max_completion_tokens" | "reasoning_effort"
            | "response_format" => {
                params.insert(k.clone(), v.clone());
            }
            "tools" => im.notes.push(format!(
                "the run `{name}`'s tools: promptgauge takes them as `params.tools` in the chat API's shape; add them by hand"
            )),
            other => im.notes.push(format!(
                "the run `{name}`'s sampling parameter `{other}` was left out"
            )),
        }
    }
    params
}

/// A run's model as the bench's endpoint at OpenAI: the first run's is `endpoint:`; a
/// second model makes every model one of `endpoints:`.
fn add_endpoint(im: &mut Import, model: &str) {
    let endpoint = |m: &str| {
        let mut e = Map::new();
        e.insert("base_url".into(), json!(OPENAI));
        e.insert("model".into(), json!(m));
        e.insert("api_key_env".into(), json!("OPENAI_API_KEY"));
        e
    };
    if im.endpoint.is_empty() {
        im.endpoint = endpoint(model);
        im.review.push(format!(
            "every prompt and item will be sent to {OPENAI} as model `{model}` (the key from $OPENAI_API_KEY): change `endpoint:` to measure another model or server"
        ));
    } else if im.endpoint.get("model").and_then(Value::as_str) != Some(model)
        && !im
            .endpoints
            .iter()
            .any(|e| e.get("model").and_then(Value::as_str) == Some(model))
    {
        if im.endpoints.is_empty() {
            let first = std::mem::take(&mut im.endpoint);
            let mut named = first.clone();
            named.insert(
                "name".into(),
                json!(slug(first["model"].as_str().unwrap_or("first"))),
            );
            im.endpoints.push(named);
        }
        let mut named = endpoint(model);
        named.insert("name".into(), json!(slug(model)));
        im.endpoints.push(named);
        im.notes.push(
            "runs of several models: each model is an endpoint and every variant runs on each (OpenAI ran each run's prompt on its own model only)".into(),
        );
    }
}

/// Where a template is used: the prompt sent to the model, or a grader's.
#[derive(Clone, Copy, PartialEq)]
enum TemplateSide {
    Prompt,
    Grader,
}

/// An OpenAI template as a promptgauge (Jinja) one: `{{ item.x }}` becomes the case's
/// variable `{{ x }}` (`{{ vars.x }}` in a judge prompt), `{{ sample.output_text }}` the
/// answer; anything that would read as Jinja is kept as text.
fn template(text: &str, side: TemplateSide) -> Result<String, String> {
    let re = regex::Regex::new(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\.([^{}]*?)\s*\}\}")
        .map_err(|e| e.to_string())?;
    // Text between the placeholders: `{%`, `{#` and a stray `{{` are literal in OpenAI's.
    let literal = |t: &str| {
        t.replace("{{", "{{ '{{' }}")
            .replace("{%", "{{ '{%' }}")
            .replace("{#", "{{ '{#' }}")
    };
    let mut out = String::new();
    let mut at = 0;
    for c in re.captures_iter(text) {
        let whole = c.get(0).map_or(0..0, |m| m.range());
        out.push_str(&literal(&text[at..whole.start]));
        at = whole.end;
        let (space, path) = (&c[1], c[2].trim());
        let valid_path = path
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|ch| ch.is_alphanumeric() || ch == '_'));
        match (space, side) {
            ("item", _) if !valid_path => {
                return Err(format!(
                    "uses `item.{path}`, which promptgauge cannot read as a variable"
                ));
            }
            ("item", TemplateSide::Prompt) => out.push_str(&format!("{{{{ {path} }}}}")),
            ("item", TemplateSide::Grader) => out.push_str(&format!("{{{{ vars.{path} }}}}")),
            ("sample", TemplateSide::Grader) if path == "output_text" => {
                out.push_str("{{ answer }}")
            }
            ("sample", TemplateSide::Grader) => {
                return Err(format!(
                    "uses `sample.{path}`; a promptgauge judge sees the answer's text (`sample.output_text`) only"
                ));
            }
            ("sample", TemplateSide::Prompt) => {
                return Err(format!("uses `sample.{path}` before there is an answer"));
            }
            (other, _) => {
                return Err(format!(
                    "uses `{other}.{path}`: only `item` and `sample` are known"
                ));
            }
        }
    }
    out.push_str(&literal(&text[at..]));
    // What OpenAI would have filled and promptgauge cannot read (`{{ item["x"] }}`,
    // `{{ other }}`) is not kept as literal text.
    let unread = re.replace_all(text, "");
    if let Some(at) = unread.find("{{")
        && unread[at..].contains("}}")
    {
        let end = unread[at..].find("}}").map_or(unread.len(), |e| at + e + 2);
        return Err(format!(
            "uses `{}`, which is neither `{{{{ item.NAME }}}}` nor `{{{{ sample.output_text }}}}`",
            &unread[at..end]
        ));
    }
    Ok(out)
}

/// A message's text: a string, `{type: input_text, text}`, or a list of text parts.
fn text_of(content: &Value) -> Result<String, String> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Object(o) => match o.get("text").and_then(Value::as_str) {
            Some(t) => Ok(t.to_string()),
            None => Err(format!(
                "holds `{}` content, which is not text",
                o.get("type").and_then(Value::as_str).unwrap_or("unknown")
            )),
        },
        Value::Array(parts) => parts
            .iter()
            .map(text_of)
            .collect::<Result<Vec<_>, _>>()
            .map(|p| p.join("")),
        _ => Err("has no content".into()),
    }
}

/// The reference a criterion compares with: a pure `{{ item.x }}` (the case's expected
/// answer is then that field), or literal text.
enum CriterionReference {
    Field(String),
    Literal(String),
    /// A template mixing text and fields: rendered per item into the expected answer.
    Mixed(String),
}

fn reference(text: &str) -> CriterionReference {
    let re = regex::Regex::new(r"^\s*\{\{\s*item\.([A-Za-z0-9_.]+)\s*\}\}\s*$").ok();
    if let Some(c) = re.as_ref().and_then(|r| r.captures(text)) {
        return CriterionReference::Field(c[1].to_string());
    }
    if text.contains("{{") {
        CriterionReference::Mixed(text.to_string())
    } else {
        CriterionReference::Literal(text.to_string())
    }
}

/// Whether a criterion's `input` is the answer's text.
fn is_answer(input: &str) -> bool {
    let compact: String = input.chars().filter(|c| !c.is_whitespace()).collect();
    compact == "{{sample.output_text}}"
}

/// The testing criteria as one scorer (`all` of them when several), and the reference the
/// cases' expected answers come from (one per bench: the first criterion that needs one).
fn grades(im: &mut Import, criteria: &[Value]) -> Result<(Option<Value>, Option<String>), Failure> {
    let mut parts: Vec<Value> = Vec::new();
    let mut expected = Expected::default();
    for c in criteria {
        let kind = c.get("type").and_then(Value::as_str).unwrap_or("");
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or(kind)
            .to_string();
        let part = match kind {
            "string_check" => string_check(im, c, &name, &mut expected),
            "text_similarity" => text_similarity(im, c, &name, &mut expected),
            "label_model" | "score_model" => judge(im, c, &name, kind),
            "python" => python(im, c, &name),
            other => {
                im.notes.push(format!(
                    "criterion `{name}` of type `{other}`: promptgauge has no equivalent; left out"
                ));
                None
            }
        };
        parts.extend(part);
    }
    let grade = match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(json!({"kind": "all", "of": parts})),
    };
    if grade.is_none() {
        return Err(UsageError::with_fix(
            "none of the eval's testing criteria has a promptgauge equivalent: there is nothing to score with",
            "see the notes above; write a `grade:` for the bench by hand",
        )
        .into());
    }
    Ok((grade, expected.0))
}

/// The reference the cases' expected answers come from, claimed by the first criterion
/// that needs one.
#[derive(Default)]
struct Expected(Option<String>);

impl Expected {
    /// Whether criterion `name` may compare with `text`: the first claim takes it, a later
    /// one only the same text (another is noted and left out).
    fn claim(&mut self, im: &mut Import, name: &str, text: &str) -> bool {
        match &self.0 {
            None => {
                self.0 = Some(text.to_string());
                true
            }
            Some(e) if e == text => true,
            Some(e) => {
                im.notes.push(format!(
                    "criterion `{name}` compares with `{text}`, and the cases' expected answer is already `{e}` (for an earlier criterion): promptgauge's text scorers compare with one expected answer per case; left out"
                ));
                false
            }
        }
    }
}

/// A string_check of the answer's text as a text scorer: against a literal, a pattern;
/// against an item's field, the expected answer; `ne` and unknown operations left out.
fn string_check(im: &mut Import, c: &Value, name: &str, expected: &mut Expected) -> Option<Value> {
    let operation = c.get("operation").and_then(Value::as_str).unwrap_or("");
    let input = c.get("input").and_then(Value::as_str).unwrap_or("");
    if !is_answer(input) {
        im.notes.push(format!(
            "string_check `{name}` checks `{input}`, not the answer's text: left out"
        ));
        return None;
    }
    let reference_text = c.get("reference").and_then(Value::as_str).unwrap_or("");
    let case_sensitive = operation != "ilike";
    let part = match (operation, reference(reference_text)) {
        ("ne", _) => {
            im.notes.push(format!(
                "string_check `{name}` (`ne`: the answer must differ): promptgauge has no negated scorer; left out"
            ));
            return None;
        }
        ("eq" | "like" | "ilike", CriterionReference::Literal(lit)) => {
            let escaped = regex::escape(&lit);
            let pattern = match operation {
                "eq" => format!(r"\A\s*{escaped}\s*\z"),
                "ilike" => format!("(?i){escaped}"),
                _ => escaped,
            };
            json!({"kind": "regex", "pattern": pattern, "case_sensitive": true})
        }
        ("eq" | "like" | "ilike", CriterionReference::Field(f)) => {
            if !expected.claim(im, name, &format!("{{{{ item.{f} }}}}")) {
                return None;
            }
            scorer_for(operation, case_sensitive)
        }
        ("eq" | "like" | "ilike", CriterionReference::Mixed(t)) => {
            if !expected.claim(im, name, &t) {
                return None;
            }
            scorer_for(operation, case_sensitive)
        }
        (other, _) => {
            im.notes.push(format!(
                "string_check `{name}`: the operation `{other}` is unknown; left out"
            ));
            return None;
        }
    };
    if operation == "eq" {
        im.notes.push(format!(
            "string_check `{name}` (`eq`): promptgauge compares after trimming the answer's surrounding whitespace"
        ));
    }
    Some(part)
}

/// A text_similarity by `cosine` as the embedding scorer against the expected answer; any
/// other metric left out, with what to use instead.
fn text_similarity(
    im: &mut Import,
    c: &Value,
    name: &str,
    expected: &mut Expected,
) -> Option<Value> {
    let input = c.get("input").and_then(Value::as_str).unwrap_or("");
    let metric = c
        .get("evaluation_metric")
        .and_then(Value::as_str)
        .unwrap_or("");
    let threshold = c.get("pass_threshold").and_then(Value::as_f64);
    let reference_text = c.get("reference").and_then(Value::as_str).unwrap_or("");
    if metric != "cosine" {
        im.notes.push(format!(
            "text_similarity `{name}` ({metric}{}): promptgauge has no {metric}; left out. An `embedding` scorer measures closeness by meaning instead — add {{kind: embedding, threshold: …}} yourself, its threshold chosen on labelled answers (a {metric} threshold does not carry over)",
            threshold.map(|t| format!(" ≥ {t}")).unwrap_or_default()
        ));
        return None;
    }
    if !is_answer(input) {
        im.notes.push(format!(
            "text_similarity `{name}` compares `{input}`, not the answer: left out"
        ));
        return None;
    }
    let text = match reference(reference_text) {
        CriterionReference::Field(f) => format!("{{{{ item.{f} }}}}"),
        CriterionReference::Literal(t) | CriterionReference::Mixed(t) => t,
    };
    if !expected.claim(im, name, &text) {
        return None;
    }
    im.review.push(format!(
        "text_similarity `{name}` (cosine) embeds through the endpoint's /v1/embeddings with {OPENAI_EMBEDDING_MODEL}, as OpenAI's does: a self-hosted endpoint needs an embedding model there (the scorer's `model`)"
    ));
    Some(json!({
        "kind": "embedding",
        "threshold": threshold.unwrap_or(0.8),
        "model": OPENAI_EMBEDDING_MODEL,
    }))
}

/// The text scorer for a string_check against the case's expected answer.
fn scorer_for(operation: &str, case_sensitive: bool) -> Value {
    match operation {
        "eq" => json!({"kind": "exact", "case_sensitive": true}),
        _ => json!({"kind": "contains", "case_sensitive": case_sensitive}),
    }
}

/// A label_model or score_model criterion as a judge: its messages as the judge prompt
/// (each headed by its role), its labels or range and threshold; its model the bench's
/// judge (the first such criterion's).
fn judge(im: &mut Import, c: &Value, name: &str, kind: &str) -> Option<Value> {
    let prompt = judge_prompt(im, c, name, kind)?;
    let file = format!("judges/{}.j2", slug(name));
    im.files.push((file.clone(), prompt));
    im.notes.push(format!(
        "{kind} `{name}`: its messages are sent to the judge as one user message, each part headed by its role ({file})"
    ));
    let model = c.get("model").and_then(Value::as_str).unwrap_or("");
    match &im.judge {
        None => {
            let judge = bench_judge(im, c, name, kind, model);
            im.judge = Some(judge);
            im.review.push(format!(
                "the judge is `{model}` at {OPENAI} (the key from $OPENAI_API_KEY), as the eval's `{name}` grader was"
            ));
        }
        Some(j) if j.get("model").and_then(Value::as_str) != Some(model) => {
            let theirs = j
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            im.notes.push(format!(
                "{kind} `{name}` graded with `{model}`; promptgauge has one judge per bench, `{theirs}`, which grades it instead"
            ));
        }
        Some(_) => {}
    }
    if kind == "label_model" {
        let list = |k: &str| -> Vec<Value> {
            c.get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        return Some(json!({
            "kind": "judge",
            "prompt": file,
            "labels": list("labels"),
            "passing_labels": list("passing_labels"),
        }));
    }
    let range = c
        .get("range")
        .and_then(Value::as_array)
        .and_then(|r| Some([r.first()?.as_f64()?, r.get(1)?.as_f64()?]))
        .unwrap_or([0.0, 1.0]);
    let pass = c.get("pass_threshold").and_then(Value::as_f64);
    if pass.is_none() {
        im.notes.push(format!(
            "score_model `{name}` has no pass_threshold: it passes at the top of its range, {}",
            range[1]
        ));
    }
    im.notes.push(format!(
        "score_model `{name}`: its number is kept as pass/fail at its threshold (the number is in each judge call's reply)"
    ));
    Some(json!({
        "kind": "judge",
        "prompt": file,
        "range": range,
        "pass_threshold": pass.unwrap_or(range[1]),
    }))
}

/// A grader's messages as one judge prompt, each headed by its role; `None` (with a note)
/// when one is not text or names what a judge cannot see.
fn judge_prompt(im: &mut Import, c: &Value, name: &str, kind: &str) -> Option<String> {
    let mut prompt = String::new();
    for m in c
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let text = match text_of(m.get("content").unwrap_or(&Value::Null))
            .and_then(|t| template(&t, TemplateSide::Grader))
        {
            Ok(t) => t,
            Err(why) => {
                im.notes
                    .push(format!("{kind} `{name}`: a {role} message {why}; left out"));
                return None;
            }
        };
        prompt.push_str(&format!("{}:\n{text}\n\n", role.to_uppercase()));
    }
    Some(prompt)
}

/// The bench's `judge:` from the first model grader: `model` at OpenAI, with the sampling
/// parameters a judge's request takes (the others noted).
fn bench_judge(
    im: &mut Import,
    c: &Value,
    name: &str,
    kind: &str,
    model: &str,
) -> Map<String, Value> {
    let mut j = Map::new();
    j.insert("base_url".into(), json!(OPENAI));
    j.insert("model".into(), json!(model));
    j.insert("api_key_env".into(), json!("OPENAI_API_KEY"));
    let Some(sp) = c.get("sampling_params").and_then(Value::as_object) else {
        return j;
    };
    let mut params = Map::new();
    for (k, v) in sp {
        match k.as_str() {
            "temperature" | "top_p" | "seed" | "reasoning_effort" => {
                params.insert(k.clone(), v.clone());
            }
            // OpenAI's name for it in graders.
            "max_completions_tokens" | "max_completion_tokens" => {
                params.insert("max_completion_tokens".into(), v.clone());
            }
            other => im.notes.push(format!(
                "{kind} `{name}`'s sampling parameter `{other}` was left out"
            )),
        }
    }
    if !params.is_empty() {
        j.insert("params".into(), Value::Object(params));
    }
    j
}

/// The protocol around an OpenAI python grader: each request becomes `grade(sample, item)`
/// (sample: the answer as `output_text`, its JSON as `output_json`, its tool calls as
/// `output_tools`; item: the case's variables), the float it returns the score.
const PYTHON_RUNNER: &str = r#"
import json, sys

def _sample(request):
    text = request["answer"]
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    return {
        "output_text": text,
        "output_json": parsed,
        "output_tools": [{"type": "function", "id": c.get("id", ""), "function": {"name": c["name"], "arguments": c["arguments"]}} for c in request["tool_calls"]],
        "choices": [{"index": 0, "finish_reason": request["finish_reason"], "message": {"role": "assistant", "content": text}}],
    }

for _line in sys.stdin:
    _request = json.loads(_line)
    try:
        _score = float(grade(_sample(_request), _request["case"]["vars"]))
        if PASS_THRESHOLD is not None:
            _reply = {"score": 1.0 if _score >= PASS_THRESHOLD else 0.0, "detail": {"grade": _score}}
        else:
            _reply = {"score": _score}
    except Exception as e:
        _reply = {"error": "the grader raised " + type(e).__name__ + ": " + str(e)}
    _reply["id"] = _request["id"]
    sys.stdout.write(json.dumps(_reply) + "\n")
    sys.stdout.flush()
"#;

/// A python criterion as a `command` scorer running its own `grade(sample, item)`.
fn python(im: &mut Import, c: &Value, name: &str) -> Option<Value> {
    let source = c.get("source").and_then(Value::as_str)?;
    if c.get("image_tag").is_some() {
        im.notes.push(format!(
            "python `{name}`'s image_tag: the grader runs with the python3 on PATH, not OpenAI's image"
        ));
    }
    let pass = c.get("pass_threshold").and_then(Value::as_f64);
    let file = format!("scorers/{}.py", slug(name));
    im.files.push((
        file.clone(),
        format!(
            "# The eval's python grader `{name}`, as written, run by promptgauge's `command` scorer\n# (docs/guide/scorers.md): one JSON request per line in, one reply per line out.\n\n{source}\n\nPASS_THRESHOLD = {}\n{PYTHON_RUNNER}",
            pass.map_or("None".to_string(), |p| format!("{p:?}"))
        ),
    ));
    im.review.push(format!(
        "python `{name}` runs the eval's own grader code on your machine ({file}): read it before running"
    ));
    Some(json!({"kind": "command", "run": ["python3", file], "binary": pass.is_some()}))
}

/// One item as a case: its fields the variables, its id the case's (`id` if it has one),
/// the expected answer the claimed reference rendered against it.
fn case(
    im: &mut Import,
    i: usize,
    item: &Map<String, Value>,
    expected: Option<&str>,
) -> Result<(), Failure> {
    let id = match item.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => format!("item-{}", i + 1),
    };
    if !im.ids.insert(id.clone()) {
        return Err(UsageError::with_fix(
            format!("two items have the id `{id}`"),
            "give each item its own `id` (or none: they are then numbered)",
        )
        .into());
    }
    let mut case = json!({"id": id, "vars": item});
    if let Some(c) = case.as_object_mut() {
        super::files::vars_to_files(c, &im.file_vars).map_err(UsageError)?;
    }
    if let Some(reference) = expected {
        let rendered = template(reference, TemplateSide::Prompt)
            .ok()
            .and_then(|t| render(&t, item).ok());
        match rendered {
            Some(text) => case["expected"] = json!(text),
            None => {
                return Err(UsageError(format!(
                    "item `{id}` cannot fill the reference `{reference}`: a field it names is missing"
                ))
                .into());
            }
        }
    }
    im.cases.push(case);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_templates_become_promptgauge_ones_and_literal_text_stays_literal() {
        assert_eq!(
            template(
                "Q: {{item.question}} / {{ item.meta.lang }}",
                TemplateSide::Prompt
            )
            .unwrap(),
            "Q: {{ question }} / {{ meta.lang }}"
        );
        assert_eq!(
            template(
                "Reply: {{ sample.output_text }} for {{item.q}}",
                TemplateSide::Grader
            )
            .unwrap(),
            "Reply: {{ answer }} for {{ vars.q }}"
        );
        assert_eq!(
            template("Use {% raw %} and {{ literally", TemplateSide::Prompt).unwrap(),
            "Use {{ '{%' }} raw %} and {{ '{{' }} literally"
        );
        assert!(template(r#"{{ item["category"] }}"#, TemplateSide::Prompt).is_err());
        assert!(template("{{ not_an_item }}", TemplateSide::Prompt).is_err());
        assert!(template("{{ sample.output_json.x }}", TemplateSide::Grader).is_err());
        assert!(template("{{ sample.output_text }}", TemplateSide::Prompt).is_err());
        assert!(template("{{ other.x }}", TemplateSide::Prompt).is_err());
    }
}
