//! promptfoo's prompts as variants, in every form its docs give
//! (docs/guide/import-promptfoo.md, "Prompts"): text, a file (`file://` or a bare path, as
//! promptfoo decides which strings are paths), a glob, a `.txt` file of several prompts
//! separated by `---` lines, `.json`/`.jsonl`/`.yaml` chat prompts, `prompts.csv`, the map
//! form (`{id, label, raw, config}` and the legacy `file://x: label`), and a prompt's
//! `config` as the variant's `params`. A prompt it cannot read (code, a managed `pf://`
//! prompt, a nunjucks filter minijinja lacks) is named in the notes, never kept as text.

use serde_json::{Map, Value, json};

use super::bench::{Import, slug};
use super::reader::{Reader, is_glob, yaml};

/// One prompt as read: a suggested name, its text or its chat messages, and the request
/// parameters its `config` sets.
struct PromptRead {
    name: String,
    body: Body,
    params: Map<String, Value>,
}

enum Body {
    Text(String),
    Messages(Vec<Value>),
}

/// The extensions promptfoo reads a string ending in as a file path (and code it runs).
const FILE_EXTENSIONS: [&str; 12] = [
    ".cjs", ".cts", ".js", ".json", ".jsonl", ".mjs", ".mts", ".py", ".ts", ".txt", ".yml", ".yaml",
];

/// Whether promptfoo reads `raw` as a path rather than as the prompt's text (its
/// `maybeFilePath`): `file://`, a known extension (`file.py:fn` too), a 2- or 3-letter
/// extension, a wildcard or a slash, and no newline.
fn maybe_file_path(raw: &str) -> bool {
    if raw.contains('\n') {
        return false;
    }
    let tokens: Vec<&str> = raw.split(':').collect();
    let last_two = tokens.iter().rev().take(2);
    let chars: Vec<char> = raw.chars().collect();
    let dot_at = |back: usize| chars.len() >= back && chars[chars.len() - back] == '.';
    raw.starts_with("file://")
        || last_two
            .into_iter()
            .any(|t| FILE_EXTENSIONS.iter().any(|e| t.ends_with(e)))
        || dot_at(3)
        || dot_at(4)
        || raw.contains(['*', '/', '\\'])
}

/// The request parameters a prompt's `config` may set, carried into the variant's `params`.
const PROMPT_PARAMS: [&str; 11] = [
    "temperature",
    "max_tokens",
    "top_p",
    "seed",
    "stop",
    "response_format",
    "tools",
    "tool_choice",
    "presence_penalty",
    "frequency_penalty",
    "max_completion_tokens",
];

/// The nunjucks filters minijinja has under the same name and meaning.
const SHARED_FILTERS: [&str; 33] = [
    "abs",
    "attr",
    "batch",
    "capitalize",
    "d",
    "default",
    "dictsort",
    "e",
    "escape",
    "first",
    "float",
    "groupby",
    "indent",
    "int",
    "join",
    "last",
    "length",
    "list",
    "lower",
    "reject",
    "rejectattr",
    "replace",
    "reverse",
    "round",
    "safe",
    "select",
    "selectattr",
    "sort",
    "string",
    "sum",
    "title",
    "trim",
    "upper",
];

/// A nunjucks template as a minijinja one: the filters both have are kept; one minijinja
/// lacks (`dump`, `truncate`, `wordcount`, …) is an error naming it.
pub(super) fn nunjucks_to_minijinja(text: &str) -> Result<String, String> {
    if !text.contains("{{") && !text.contains("{%") {
        return Ok(text.to_string());
    }
    let tag = regex::Regex::new(r"(?s)\{\{.*?\}\}|\{%.*?%\}").map_err(|e| e.to_string())?;
    let filter = regex::Regex::new(r"\|\s*([A-Za-z_][A-Za-z0-9_]*)").map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    let out = tag.replace_all(text, |t: &regex::Captures| {
        filter
            .replace_all(&t[0], |f: &regex::Captures| match &f[1] {
                name if SHARED_FILTERS.contains(&name) => f[0].to_string(),
                name => {
                    if !unknown.contains(&name.to_string()) {
                        unknown.push(name.to_string());
                    }
                    f[0].to_string()
                }
            })
            .into_owned()
    });
    if !unknown.is_empty() {
        return Err(format!(
            "uses the nunjucks filter{} {}, which promptgauge's templates (minijinja) do not have",
            if unknown.len() > 1 { "s" } else { "" },
            unknown
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(out.into_owned())
}

/// A text as chat messages, when it is a JSON list of `{role, content}`.
fn chat_messages(text: &str) -> Option<Vec<Value>> {
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    chat_of(&v)
}

fn chat_of(v: &Value) -> Option<Vec<Value>> {
    v.as_array()
        .filter(|m| {
            !m.is_empty()
                && m.iter()
                    .all(|x| x.get("role").is_some() && x.get("content").is_some())
        })
        .cloned()
}

/// One entry of `prompts:`: its text or path, its label, and its `config` (with any other
/// key it has, to be named).
struct Entry {
    raw: Option<String>,
    label: Option<String>,
    config: Map<String, Value>,
}

/// `prompts:` as promptfoo normalizes it: a string, a list of strings and objects, or the
/// legacy map of `raw: label`.
fn entries(prompts: &Value) -> Vec<Entry> {
    let entry = |raw: Option<String>, label: Option<String>, config| Entry { raw, label, config };
    let obj_entry = |o: &Map<String, Value>| {
        let text = |k: &str| o.get(k).and_then(Value::as_str).map(String::from);
        // Keys a prompt has beyond these are said by `prompt_params` (as config keys).
        let mut config = o
            .get("config")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (k, v) in o {
            if !matches!(k.as_str(), "raw" | "id" | "label" | "config") {
                config.insert(format!("(prompt key) {k}"), v.clone());
            }
        }
        entry(
            text("raw").or_else(|| text("id")),
            text("label").or_else(|| text("id")),
            config,
        )
    };
    match prompts {
        Value::String(s) => vec![entry(Some(s.clone()), None, Map::new())],
        Value::Array(items) => items
            .iter()
            .map(|p| match p {
                Value::String(s) => entry(Some(s.clone()), None, Map::new()),
                Value::Object(o) => obj_entry(o),
                _ => entry(None, None, Map::new()),
            })
            .collect(),
        // The legacy map form: `file://prompt.txt: label`.
        Value::Object(o) if !o.contains_key("raw") && !o.contains_key("id") => o
            .iter()
            .map(|(raw, label)| {
                entry(
                    Some(raw.clone()),
                    label.as_str().map(String::from),
                    Map::new(),
                )
            })
            .collect(),
        Value::Object(o) => vec![obj_entry(o)],
        _ => Vec::new(),
    }
}

impl Import {
    /// `prompts:` as variants (with notes for what cannot be one).
    pub(super) fn prompts(&mut self, files: &Reader, prompts: &Value) -> Result<(), String> {
        for (i, Entry { raw, label, config }) in entries(prompts).into_iter().enumerate() {
            let n = i + 1;
            let Some(raw) = raw else {
                self.notes.push(format!(
                    "prompt {n} is neither text nor {{raw, label}}: skipped"
                ));
                continue;
            };
            let params = self.prompt_params(n, &config);
            let read = self.read_prompt(files, n, &raw, label.as_deref())?;
            for mut p in read {
                p.params = params.clone();
                let before = self.variants.len();
                self.add_variant(n, p)?;
                if self.variants.len() > before && super::asserts::asks_json_schema(&params) {
                    self.schema_variants += 1;
                }
            }
        }
        Ok(())
    }

    /// A prompt's `config`: the request parameters it sets; the rest noted.
    fn prompt_params(&mut self, n: usize, config: &Map<String, Value>) -> Map<String, Value> {
        let mut params = Map::new();
        for (k, v) in config {
            if PROMPT_PARAMS.contains(&k.as_str()) {
                params.insert(k.clone(), v.clone());
            } else {
                let what = match k.strip_prefix("(prompt key) ") {
                    Some(key) => format!("its `{key}`"),
                    None => format!("its config's `{k}`"),
                };
                self.notes
                    .push(format!("prompt {n}: {what} was not carried over"));
            }
        }
        params
    }

    /// The prompts one entry of `prompts:` reads to (several for a glob, a `---` file, a
    /// CSV or JSONL file); none, with a note, for one promptgauge cannot read.
    fn read_prompt(
        &mut self,
        files: &Reader,
        n: usize,
        raw: &str,
        label: Option<&str>,
    ) -> Result<Vec<PromptRead>, String> {
        let named = |name: Option<String>| {
            label
                .map(slug)
                .filter(|s| !s.is_empty())
                .or(name)
                .unwrap_or_else(|| format!("prompt-{n}"))
        };
        if ["pf://", "exec:", "langfuse://", "portkey://", "helicone://"]
            .iter()
            .any(|p| raw.starts_with(p))
        {
            self.notes.push(format!(
                "prompt {n} (`{raw}`) is a prompt promptfoo fetches or runs, not one written in the config: write it as a variant by hand"
            ));
            return Ok(Vec::new());
        }
        if !maybe_file_path(raw) {
            return Ok(vec![text_prompt(named(None), raw)]);
        }
        let reference = raw.trim_start_matches("file://");
        if is_glob(reference) {
            let matched = files.glob(reference)?;
            if matched.is_empty() {
                // promptfoo too takes a glob that matches nothing as the prompt's text.
                return Ok(vec![text_prompt(named(None), raw)]);
            }
            let mut all = Vec::new();
            for m in matched {
                all.extend(self.read_prompt_file(files, n, &m, None)?);
            }
            return Ok(all);
        }
        // A bare string that only looks like a path (`a/b`, `Answer in 1.5`) and names no
        // file is the prompt's text, as promptfoo takes it; `file://` must name a file.
        let known_extension = FILE_EXTENSIONS
            .iter()
            .chain(&[".md", ".j2", ".csv"])
            .any(|e| reference.split(':').next().unwrap_or("").ends_with(e));
        if !raw.starts_with("file://") && !known_extension && files.inside(reference).is_err() {
            return Ok(vec![text_prompt(named(None), raw)]);
        }
        let label = label.map(slug).filter(|s| !s.is_empty());
        self.read_prompt_file(files, n, &format!("file://{reference}"), label)
    }

    /// The prompts in one file, by its extension as promptfoo reads them.
    fn read_prompt_file(
        &mut self,
        files: &Reader,
        n: usize,
        reference: &str,
        label: Option<String>,
    ) -> Result<Vec<PromptRead>, String> {
        let path_part = reference.trim_start_matches("file://");
        let ext = path_part
            .rsplit_once('.')
            .map(|(_, e)| e.split(':').next().unwrap_or(e).to_ascii_lowercase())
            .unwrap_or_default();
        if matches!(
            ext.as_str(),
            "js" | "cjs" | "mjs" | "ts" | "cts" | "mts" | "py" | "sh" | "rb" | "pl"
        ) || (path_part.contains(':') && !path_part.ends_with(&format!(".{ext}")))
        {
            self.notes.push(format!(
                "prompt {n} is generated by code ({reference}): write the prompt it produces as a variant by hand"
            ));
            return Ok(Vec::new());
        }
        let (path, text) = files.read(reference)?;
        let stem = path
            .file_stem()
            .map(|s| slug(&s.to_string_lossy()))
            .unwrap_or_default();
        let base = label.unwrap_or(stem);
        let found = file_prompts(&text, &ext, reference)?;
        if found.is_empty() {
            return Err(format!("{reference} holds no prompt"));
        }
        let many = found.len() > 1;
        Ok(found
            .into_iter()
            .enumerate()
            .map(|(i, (body, own_label))| PromptRead {
                // A CSV's `label` column names its prompt.
                name: match own_label.map(|l| slug(&l)).filter(|l| !l.is_empty()) {
                    Some(l) => l,
                    None if many => format!("{base}-{}", i + 1),
                    None => base.clone(),
                },
                body,
                params: Map::new(),
            })
            .collect())
    }

    /// A prompt as a variant file: `.txt` for one user message with no parameters, else
    /// `.yaml` with its messages and `params`; its template translated from nunjucks (a
    /// prompt using a filter minijinja lacks is left out, naming the filter).
    fn add_variant(&mut self, n: usize, p: PromptRead) -> Result<(), String> {
        let mut name = p.name;
        let base = name.clone();
        let mut k = 1;
        while self
            .variants
            .iter()
            .any(|(f, _)| f.rsplit_once('.').map(|(s, _)| s) == Some(name.as_str()))
        {
            k += 1;
            name = format!("{base}-{k}");
        }
        let messages = match p.body {
            Body::Text(t) if p.params.is_empty() => match nunjucks_to_minijinja(&t) {
                Ok(t) => {
                    self.variants.push((format!("{name}.txt"), t));
                    return Ok(());
                }
                Err(why) => {
                    self.notes
                        .push(format!("prompt {n} ({name}) {why}: left out"));
                    return Ok(());
                }
            },
            Body::Text(t) => vec![json!({"role": "user", "content": t})],
            Body::Messages(m) => m,
        };
        let mut y = format!("# imported from promptfoo prompt {n}\nname: {name}\nmessages:\n");
        for (i, m) in messages.iter().enumerate() {
            let content = super::files::content_template(
                &m["content"],
                &mut self.file_vars,
                &nunjucks_to_minijinja,
            );
            let content = match content {
                Ok(c) => c,
                Err(why) if why.contains("nunjucks filter") => {
                    self.notes
                        .push(format!("prompt {n} ({name}) {why}: left out"));
                    return Ok(());
                }
                Err(why) => return Err(format!("prompt {n}: message {} {why}", i + 1)),
            };
            y.push_str(&format!(
                "  - role: {}\n    content: {}\n",
                m["role"].as_str().unwrap_or("user"),
                serde_json::to_string(&content).unwrap_or_default()
            ));
        }
        if !p.params.is_empty() {
            y.push_str(&format!("params: {}\n", Value::Object(p.params)));
        }
        self.variants.push((format!("{name}.yaml"), y));
        Ok(())
    }
}

/// The prompts in a file's text, by its extension as promptfoo reads them, each with the
/// label its file gives it (a CSV's `label` column).
fn file_prompts(
    text: &str,
    ext: &str,
    reference: &str,
) -> Result<Vec<(Body, Option<String>)>, String> {
    Ok(match ext {
        "txt" => split_prompts(text)
            .into_iter()
            .map(|t| (body_of(&t), None))
            .collect(),
        "jsonl" => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| (body_of(l), None))
            .collect(),
        "yaml" | "yml" => {
            let v = yaml(text, reference)?;
            let body = match chat_of(&v) {
                Some(m) => Body::Messages(m),
                None => Body::Text(
                    v.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| v.to_string()),
                ),
            };
            vec![(body, None)]
        }
        "csv" => csv_prompts(text)
            .map_err(|e| format!("{reference}: {e}"))?
            .into_iter()
            .map(|(t, l)| (body_of(&t), l))
            .collect(),
        _ => vec![(body_of(text), None)],
    })
}

fn text_prompt(name: String, raw: &str) -> PromptRead {
    PromptRead {
        name,
        body: body_of(raw),
        params: Map::new(),
    }
}

/// A prompt's text: chat messages when it is a JSON list of them, else one user message.
fn body_of(text: &str) -> Body {
    match chat_messages(text) {
        Some(m) => Body::Messages(m),
        None => Body::Text(text.to_string()),
    }
}

/// A `.txt` file's prompts, as promptfoo splits them: at each line that is `---` once
/// trimmed, each part trimmed, empty parts dropped.
fn split_prompts(text: &str) -> Vec<String> {
    let mut prompts = Vec::new();
    let mut buffer: Vec<&str> = Vec::new();
    let mut flush = |buffer: &mut Vec<&str>| {
        let raw = buffer.join("\n").trim().to_string();
        if !raw.is_empty() {
            prompts.push(raw);
        }
        buffer.clear();
    };
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim() == "---" {
            flush(&mut buffer);
        } else {
            buffer.push(line);
        }
    }
    flush(&mut buffer);
    prompts
}

/// A prompts CSV: a `prompt` column (and an optional `label`), or one prompt a line.
fn csv_prompts(text: &str) -> Result<Vec<(String, Option<String>)>, String> {
    let one_a_line = || -> Vec<(String, Option<String>)> {
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let skip = usize::from(
            lines
                .first()
                .is_some_and(|l| l.trim().eq_ignore_ascii_case("prompt")),
        );
        lines[skip..]
            .iter()
            .map(|l| (l.to_string(), None))
            .collect()
    };
    if !text.contains(',') {
        return Ok(one_a_line());
    }
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let Some(prompt_at) = headers.iter().position(|h| h == "prompt") else {
        return Ok(one_a_line());
    };
    let label_at = headers.iter().position(|h| h == "label");
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| e.to_string())?;
        let prompt = record.get(prompt_at).unwrap_or("").to_string();
        if prompt.is_empty() {
            continue;
        }
        let label = label_at
            .and_then(|i| record.get(i))
            .filter(|l| !l.is_empty())
            .map(String::from);
        out.push((prompt, label));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_txt_file_splits_at_dash_lines_as_promptfoo_splits_it() {
        assert_eq!(
            split_prompts("Say hi to {{name}}.\n---\nGreet {{name}}\r\n  ---  \n\n---\nBye\n"),
            ["Say hi to {{name}}.", "Greet {{name}}", "Bye"]
        );
        // A `---` inside a line is text.
        assert_eq!(split_prompts("a --- b\n"), ["a --- b"]);
    }

    #[test]
    fn strings_are_paths_as_promptfoo_decides() {
        for path in [
            "file://p.txt",
            "prompts/a.txt",
            "prompt.txt",
            "p.md",
            "x.py:make",
            "p/*.txt",
        ] {
            assert!(maybe_file_path(path), "{path}");
        }
        for text in ["What is {{x}}?", "Say hi\nto me.txt"] {
            assert!(!maybe_file_path(text), "{text}");
        }
    }

    #[test]
    fn nunjucks_filters_minijinja_shares_are_kept_others_refused_by_name() {
        assert_eq!(
            nunjucks_to_minijinja("{{ x | upper }} {{ y|join(', ') }} a|b").unwrap(),
            "{{ x | upper }} {{ y|join(', ') }} a|b"
        );
        assert!(
            nunjucks_to_minijinja("{{ y | dump }}")
                .unwrap_err()
                .contains("`dump`")
        );
        let e = nunjucks_to_minijinja("{{ x | truncate(3) }}{{ y | wordcount }}").unwrap_err();
        assert!(e.contains("`truncate`") && e.contains("`wordcount`"), "{e}");
        // Each filter kept exists in minijinja.
        let env = minijinja::Environment::new();
        for f in SHARED_FILTERS {
            let t = format!("{{{{ x | {f} }}}}");
            let e = env.render_str(&t, minijinja::context! { x => vec![1] });
            assert!(
                !e.as_ref()
                    .is_err_and(|e| e.kind() == minijinja::ErrorKind::UnknownFilter),
                "{f}: {e:?}"
            );
        }
    }

    #[test]
    fn every_form_of_prompts_is_an_entry() {
        let e = entries(&json!({"file://a.txt": "first", "file://b.txt": "second"}));
        assert_eq!(e[1].raw.as_deref(), Some("file://b.txt"));
        assert_eq!(e[1].label.as_deref(), Some("second"));
        let e = entries(
            &json!([{"id": "file://c.json", "label": "chat", "config": {"response_format": {"type": "json_object"}}}]),
        );
        assert_eq!(e[0].raw.as_deref(), Some("file://c.json"));
        assert_eq!(e[0].config["response_format"]["type"], "json_object");
        assert_eq!(
            csv_prompts("prompt,label\n\"Hi, {{x}}\",greet\nBye,\n").unwrap(),
            [
                ("Hi, {{x}}".to_string(), Some("greet".to_string())),
                ("Bye".to_string(), None)
            ]
        );
    }
}
