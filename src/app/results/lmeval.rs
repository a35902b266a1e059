//! lm-evaluation-harness `--log_samples` output: `samples_TASK_DATE.jsonl` (one line per
//! document per filter; a JSON array before 0.4.3), with `results_DATE.json` beside it
//! naming the model. Each file is a variant; a document (`doc_id`) is a case, checked to be
//! the same document in every file by its `doc_hash`; the score is one metric (`--score`,
//! else the line's first) under one filter (`--filter`, else the file's first).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::imported::{self, Imported, ImportedArm, Sample};
use super::read;
use crate::cli::ImportResultsArgs;
use crate::error::UsageError;

pub(super) fn read(args: &ImportResultsArgs) -> Result<Imported, UsageError> {
    let mut tasks = Vec::new();
    let mut files = Vec::new();
    for file in &args.files {
        let task = task_of(file)?;
        tasks.push((task, file.as_path()));
        files.push((file.clone(), lines(file)?));
    }
    let task = imported::one_task(&tasks)?;
    let mut imported = Imported {
        name: imported::clean_name(&task),
        tool: "lm-evaluation-harness".into(),
        ..Imported::default()
    };
    let mut reading = FilesRead::default();
    for (file, lines) in &files {
        let results = results_beside(file, &task);
        if let Some(v) = results
            .as_ref()
            .and_then(|r| r.get("lm_eval_version"))
            .and_then(Value::as_str)
        {
            imported.tool = format!("lm-evaluation-harness {v}");
        }
        let model = model_of(file, results.as_ref());
        let (arm, metric) = reading.arm(file, lines, model, &task, args)?;
        if let Some(m) = &metric {
            imported
                .notes
                .retain(|n| !n.starts_with("lm-eval's metrics other than"));
            imported.notes.push(format!(
                "lm-eval's metrics other than `{m}` (each document's line holds them all; --score names another)"
            ));
        }
        imported.arms.push(arm);
    }
    if !reading.filters_left.is_empty() {
        imported.notes.push(format!(
            "lm-eval's other filters' lines ({}): one filter is kept (--filter names another)",
            reading
                .filters_left
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if reading.no_text {
        imported.notes.push(
            "lm-eval's log-likelihood answers: a multiple-choice document has no text answer, only each choice's log-likelihood; the answer shown is the choice with the highest".into(),
        );
    }
    imported
        .notes
        .push("tokens, latency and cost: lm-eval records none per document".into());
    Ok(imported)
}

/// What reading the files learns across them.
#[derive(Default)]
struct FilesRead {
    /// Each document's `doc_hash`, and the file that first gave it.
    hashes: HashMap<String, (String, PathBuf)>,
    /// Whether some answer was a choice's log-likelihood, not a text.
    no_text: bool,
    /// The filters whose lines were left out.
    filters_left: BTreeSet<String>,
}

impl FilesRead {
    /// One samples file as a variant of `model`, its lines under one filter (`--filter`,
    /// else the file's first) scored by one metric (`--score`, else the first line's);
    /// that metric is returned with it.
    fn arm(
        &mut self,
        file: &Path,
        lines: &[Value],
        model: String,
        task: &str,
        args: &ImportResultsArgs,
    ) -> Result<(ImportedArm, Option<String>), UsageError> {
        let filter = args.filter.clone().or_else(|| {
            lines
                .iter()
                .find_map(|l| l.get("filter")?.as_str().map(String::from))
        });
        let mut arm = ImportedArm {
            name: model.clone(),
            model,
            file: file.to_path_buf(),
            prompt: String::new(),
            samples: Vec::new(),
        };
        let mut metric: Option<String> = args.score.clone();
        for l in lines {
            let line_filter = l.get("filter").and_then(Value::as_str);
            if let (Some(f), Some(want)) = (line_filter, &filter)
                && f != want
            {
                self.filters_left.insert(f.to_string());
                continue;
            }
            let metric = metric.get_or_insert_with(|| first_metric(l).unwrap_or_default());
            let doc = l.get("doc_id").map_or_else(String::new, |d| match d {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            self.check_document(l, &doc, file)?;
            let score = score_of(l, metric, &doc, file)?;
            if arm.prompt.is_empty() {
                arm.prompt = format!(
                    "(lm-eval task `{task}`, filter `{}`)",
                    filter.as_deref().unwrap_or("none")
                );
            }
            let (output, text) = answer(l);
            self.no_text |= !text;
            arm.samples.push(sample_of(l, doc, output, score));
        }
        if arm.samples.is_empty() {
            return Err(UsageError::with_fix(
                format!(
                    "{} holds no line under the filter `{}`",
                    file.display(),
                    filter.unwrap_or_default()
                ),
                "name one of the file's filters with --filter",
            ));
        }
        Ok((arm, metric))
    }

    /// Refuses a document whose `doc_hash` differs from the one another file gave it.
    fn check_document(&mut self, l: &Value, doc: &str, file: &Path) -> Result<(), UsageError> {
        let Some(hash) = l.get("doc_hash").and_then(Value::as_str) else {
            return Ok(());
        };
        match self.hashes.get(doc) {
            Some((seen, other)) if seen != hash => Err(UsageError::with_fix(
                format!(
                    "document {doc} of {} is not the document {doc} of {}: the files were made from different data",
                    file.display(),
                    other.display()
                ),
                "import the files of one task over the same documents (the same --limit and dataset)",
            )),
            Some(_) => Ok(()),
            None => {
                self.hashes
                    .insert(doc.to_string(), (hash.to_string(), file.to_path_buf()));
                Ok(())
            }
        }
    }
}

/// The model that wrote a samples file: `results_DATE.json`'s `model_name` or its
/// `model_args`, else the folder lm-eval named after it (`org__model`).
fn model_of(file: &Path, results: Option<&Value>) -> String {
    results
        .and_then(|r| {
            r.get("model_name")
                .and_then(Value::as_str)
                .map(String::from)
                .or_else(|| model_from_args(r.pointer("/config/model_args")?))
        })
        .unwrap_or_else(|| {
            file.parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().replace("__", "/"))
                .unwrap_or_default()
        })
}

/// A document's score: its `metric`, or why it has none in [0, 1]; a line without the
/// metric is refused with the metrics it has.
fn score_of(
    l: &Value,
    metric: &str,
    doc: &str,
    file: &Path,
) -> Result<Result<f64, String>, UsageError> {
    match l.get(metric) {
        None => Err(UsageError::with_fix(
            format!(
                "{}: document {doc} has no metric `{metric}`",
                file.display()
            ),
            format!("--score takes one of: {}", metric_names(l).join(", ")),
        )),
        Some(v) => Ok(imported::unit_score(v).ok_or_else(|| {
            format!("lm-eval's `{metric}` is {v}: not a score in [0, 1] per document")
        })),
    }
}

/// A document's line as a sample: its prompt, its target, the answer.
fn sample_of(l: &Value, doc: String, output: String, score: Result<f64, String>) -> Sample {
    Sample {
        case: doc,
        repeat: 0,
        input: l
            .pointer("/arguments/gen_args_0/arg_0")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        expected: l
            .get("target")
            .map(|t| vec![t.as_str().map_or_else(|| t.to_string(), String::from)])
            .unwrap_or_default(),
        output,
        score,
        usage: None,
        latency_ms: None,
        tags: Vec::new(),
        files: Vec::new(),
    }
}

/// The task a samples file is of, from its name: `samples_TASK_DATE.jsonl`.
fn task_of(file: &Path) -> Result<String, UsageError> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_prefix("samples_")
        .and_then(|s| s.strip_suffix(".jsonl").or_else(|| s.strip_suffix(".json")));
    // The date is the last `_`-separated part: `2026-12-01T21-13-12.978123`.
    stem.and_then(|s| s.rsplit_once('_'))
        .map(|(task, _)| task.to_string())
        .ok_or_else(|| {
            UsageError::with_fix(
                format!(
                    "{} is not named as lm-eval names its samples (samples_TASK_DATE.jsonl)",
                    file.display()
                ),
                "give the samples_*.jsonl files lm-eval --log_samples wrote",
            )
        })
}

/// A samples file's lines: JSON lines, or (lm-eval before 0.4.3) one JSON array.
fn lines(file: &Path) -> Result<Vec<Value>, UsageError> {
    let bytes = read::bytes(file)?;
    let trimmed = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &bytes[i..]);
    if trimmed.is_some_and(|t| t.starts_with(b"[")) {
        let v = read::json(&bytes, &|| file.display().to_string())?;
        return Ok(v.as_array().cloned().unwrap_or_default());
    }
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .map(|(i, l)| read::json(l, &|| format!("{}:{}", file.display(), i + 1)))
        .collect()
}

/// The `results_DATE.json` beside a samples file (the same date), if it is there.
fn results_beside(file: &Path, task: &str) -> Option<Value> {
    let name = file.file_name()?.to_string_lossy().into_owned();
    let date = name
        .strip_prefix(&format!("samples_{task}_"))?
        .trim_end_matches(".jsonl")
        .trim_end_matches(".json");
    let path = file.with_file_name(format!("results_{date}.json"));
    read::json(&read::bytes(&path).ok()?, &|| path.display().to_string()).ok()
}

/// The model from `model_args`: an object (0.4.10 on) or `pretrained=…,dtype=…`.
fn model_from_args(args: &Value) -> Option<String> {
    let keys = ["peft", "delta", "pretrained", "model", "path", "engine"];
    match args {
        Value::Object(m) => keys
            .iter()
            .find_map(|k| m.get(*k)?.as_str().map(String::from)),
        Value::String(s) => keys.iter().find_map(|k| {
            s.split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(String::from))
        }),
        _ => None,
    }
}

/// The line's metrics: its `metrics` list (0.4.7 on), else its numeric keys that are not
/// lm-eval's own.
fn metric_names(l: &Value) -> Vec<String> {
    if let Some(list) = l.get("metrics").and_then(Value::as_array) {
        return list
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect();
    }
    const OWN: [&str; 10] = [
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    ];
    l.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, v)| !OWN.contains(&k.as_str()) && (v.is_number() || v.is_boolean()))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn first_metric(l: &Value) -> Option<String> {
    metric_names(l).into_iter().next()
}

/// The answer as text, and whether the model wrote one: a generation's filtered response,
/// else (log-likelihood requests) the choice it scored highest.
fn answer(l: &Value) -> (String, bool) {
    let filtered = l.get("filtered_resps").and_then(Value::as_array);
    if let Some(Value::String(text)) = filtered.and_then(|f| f.first()) {
        return (text.clone(), true);
    }
    // Each request's filtered response is [log-likelihood, is_greedy] (as strings).
    let best = filtered.and_then(|f| {
        f.iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let ll = r.get(0)?;
                let ll = ll.as_f64().or_else(|| ll.as_str()?.parse().ok())?;
                Some((i, ll))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    });
    match best {
        Some((i, _)) => {
            let choice = l
                .pointer(&format!("/arguments/gen_args_{i}/arg_1"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .trim();
            (format!("choice {i}: {choice}"), false)
        }
        None => (String::new(), false),
    }
}
