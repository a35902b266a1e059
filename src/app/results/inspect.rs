//! inspect_ai eval logs, `.json` or `.eval` (a zip archive: `header.json` and one
//! `samples/ID_epoch_N.json` per sample, DEFLATE or, since inspect 0.3.206, zstd). Each log
//! is a variant; a sample is a case (its `id`), its epoch a repeat; the score is the
//! headline scorer's (or `--score`'s), read as inspect reads it: `C` 1, `I` 0, `P` 0.5,
//! `N` 0, numbers and booleans as they are. A sample that errored, or that its scorer left
//! unscored (`NaN`), is a failed job with the reason, never a 0.

use serde_json::Value;

use super::imported::{self, Imported, ImportedArm, Sample};
use super::read;
use crate::cli::ImportResultsArgs;
use crate::error::UsageError;
use promptgauge_client::Usage;
use promptgauge_client::attachment::{Kind, sha256_hex};
use promptgauge_runner::job_record::FileNote;

/// One log: its header (eval, plan, results) and its samples.
struct Log {
    file: std::path::PathBuf,
    header: Value,
    samples: Vec<Value>,
    /// Written by a run still going or killed (an archive without `header.json`).
    unfinished: bool,
}

pub(super) fn read(args: &ImportResultsArgs) -> Result<Imported, UsageError> {
    let logs: Vec<Log> = args
        .files
        .iter()
        .map(|f| open(f))
        .collect::<Result<_, _>>()?;
    let mut imported = task_of(&logs)?;
    for (log, name) in logs.iter().zip(arm_names(&logs)) {
        if log.unfinished {
            imported.notes.push(format!(
                "{} was written by a run that had not finished (no header.json): only its samples are read, and its variant may lack cases",
                log.file.display()
            ));
        }
        imported
            .arms
            .push(arm_of(log, name, args.score.as_deref())?);
    }
    let multi_scorer = logs.iter().any(|log| {
        log.header
            .pointer("/results/scores")
            .and_then(Value::as_array)
            .is_some_and(|s| s.len() > 1)
    });
    if multi_scorer {
        imported.notes.push(format!(
            "inspect's other scores: one score per sample is kept (`{}`; --score names another)",
            args.score.as_deref().unwrap_or("the headline scorer's")
        ));
    }
    imported.notes.push(
        "inspect's epoch reducers: each epoch is kept as a repeat of its case, and the reports reduce them by their mean".into(),
    );
    imported.notes.push(
        "inspect's transcripts (messages, tool calls, events) and its solver chain: the final completion is kept as the answer, and a `system_message` step's template as the variant's prompt".into(),
    );
    Ok(imported)
}

/// The logs' task (one for all), the inspect_ai that wrote them and when the first began.
fn task_of(logs: &[Log]) -> Result<Imported, UsageError> {
    let tasks: Vec<(String, &std::path::Path)> = logs
        .iter()
        .map(|l| {
            (
                l.header
                    .pointer("/eval/task")
                    .and_then(Value::as_str)
                    .unwrap_or("inspect")
                    .to_string(),
                l.file.as_path(),
            )
        })
        .collect();
    let task = imported::one_task(&tasks)?;
    let version = logs[0]
        .header
        .pointer("/eval/packages/inspect_ai")
        .and_then(Value::as_str);
    Ok(Imported {
        name: imported::clean_name(&task),
        tool: version.map_or_else(|| "inspect_ai".into(), |v| format!("inspect_ai {v}")),
        started_at: logs
            .iter()
            .filter_map(|l| l.header.pointer("/eval/created").and_then(Value::as_str))
            .min()
            .map(String::from),
        ..Imported::default()
    })
}

/// One log as a variant named `name`: its model, its system prompt, its samples by case
/// and epoch, each scored by the score `asked` (or the headline's).
fn arm_of(log: &Log, name: String, asked: Option<&str>) -> Result<ImportedArm, UsageError> {
    let score = score_name(log, asked)?;
    let mut samples: Vec<Sample> = log.samples.iter().map(|s| sample(s, &score)).collect();
    samples.sort_by(|a, b| (a.case.as_str(), a.repeat).cmp(&(b.case.as_str(), b.repeat)));
    Ok(ImportedArm {
        name,
        model: log
            .header
            .pointer("/eval/model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        file: log.file.clone(),
        prompt: system_prompt(&log.header).unwrap_or_default(),
        samples,
    })
}

/// Reads a `.eval` archive or a `.json` log.
fn open(file: &std::path::Path) -> Result<Log, UsageError> {
    let is_zip = read::bytes_prefix(file, 4)?.starts_with(b"PK\x03\x04");
    if !is_zip {
        let v = read::json(&read::bytes(file)?, &|| file.display().to_string())?;
        if v.get("eval").is_none() {
            return Err(UsageError(format!(
                "{} is not an inspect_ai log: it has no `eval` (write one with `inspect eval … --log-format json`, or give the .eval file)",
                file.display()
            )));
        }
        let samples = v
            .get("samples")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        return Ok(Log {
            file: file.to_path_buf(),
            header: v,
            samples,
            unfinished: false,
        });
    }
    let mut archive = read::Archive::open(file)?;
    let (header, unfinished) = match archive.json("header.json")? {
        Some(h) => (h, false),
        None => match archive.json("_journal/start.json")? {
            Some(h) => (h, true),
            None => {
                return Err(UsageError(format!(
                    "{} is a zip archive without header.json or _journal/start.json: not an inspect_ai log",
                    file.display()
                )));
            }
        },
    };
    let mut samples = Vec::new();
    for name in archive.names() {
        if name.starts_with("samples/")
            && name.ends_with(".json")
            && let Some(s) = archive.json(&name)?
        {
            samples.push(s);
        }
    }
    Ok(Log {
        file: file.to_path_buf(),
        header,
        samples,
        unfinished,
    })
}

/// What tells the logs apart: their models, else their tags, else the first task argument
/// that differs (its value), else the log's id.
fn arm_names(logs: &[Log]) -> Vec<String> {
    let args: Vec<serde_json::Map<String, Value>> = logs
        .iter()
        .map(|l| {
            header_at(l, "/eval/task_args")
                .as_object()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    by_model(logs)
        .or_else(|| by_tags(logs))
        .or_else(|| by_task_args(&args))
        .unwrap_or_else(|| {
            logs.iter()
                .map(|l| {
                    header_at(l, "/eval/eval_id")
                        .as_str()
                        .map_or_else(|| "log".to_string(), |id| id.chars().take(8).collect())
                })
                .collect()
        })
}

/// A value of a log's header, `null` where it has none.
fn header_at(l: &Log, pointer: &str) -> Value {
    l.header.pointer(pointer).cloned().unwrap_or(Value::Null)
}

/// The logs' models, when each names one and no two the same.
fn by_model(logs: &[Log]) -> Option<Vec<String>> {
    let models: Vec<Value> = logs.iter().map(|l| header_at(l, "/eval/model")).collect();
    (models.iter().all(|m| m.is_string()) && distinct(&models)).then(|| {
        models
            .iter()
            .map(|m| m.as_str().unwrap_or_default().to_string())
            .collect()
    })
}

/// The logs' tags (joined by `+`), when each has some and no two the same.
fn by_tags(logs: &[Log]) -> Option<Vec<String>> {
    let tags: Vec<String> = logs
        .iter()
        .map(|l| {
            header_at(l, "/eval/tags")
                .as_array()
                .map(|t| {
                    t.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("+")
                })
                .unwrap_or_default()
        })
        .collect();
    (tags.iter().all(|t| !t.is_empty()) && distinct_names(&tags)).then_some(tags)
}

/// The task arguments that differ between the logs: the one whose values tell them apart
/// in the fewest characters, else all of them as `key=value,…`.
fn by_task_args(args: &[serde_json::Map<String, Value>]) -> Option<Vec<String>> {
    let mut keys: Vec<&String> = args.iter().flat_map(|a| a.keys()).collect();
    keys.sort();
    keys.dedup();
    let differing: Vec<&String> = keys
        .into_iter()
        .filter(|k| args.iter().any(|a| a.get(*k) != args[0].get(*k)))
        .collect();
    let arg_text = |a: &serde_json::Map<String, Value>, k: &str, at_most: usize| {
        let v = a.get(k).cloned().unwrap_or(Value::Null);
        let v = v.as_str().map_or_else(|| v.to_string(), String::from);
        v.chars().take(at_most).collect::<String>()
    };
    let mut candidates: Vec<Vec<String>> = differing
        .iter()
        .map(|k| args.iter().map(|a| arg_text(a, k, 32)).collect())
        .filter(|names: &Vec<String>| {
            names.iter().all(|n| !n.trim().is_empty()) && distinct_names(names)
        })
        .collect();
    candidates.sort_by_key(|names| names.iter().map(String::len).sum::<usize>());
    if let Some(names) = candidates.into_iter().next() {
        return Some(names);
    }
    if differing.is_empty() {
        return None;
    }
    let names: Vec<String> = args
        .iter()
        .map(|a| {
            differing
                .iter()
                .map(|k| format!("{k}={}", arg_text(a, k, 24)))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    distinct_names(&names).then_some(names)
}

fn distinct_names(names: &[String]) -> bool {
    names
        .iter()
        .enumerate()
        .all(|(i, n)| !names[..i].contains(n))
}

fn distinct(values: &[Value]) -> bool {
    values
        .iter()
        .enumerate()
        .all(|(i, v)| !values[..i].contains(v))
}

/// Where the score is: a scorer's name, or one key of a scorer whose value is a dict.
enum ScoreAt {
    Scorer(String),
    Key { scorer: String, key: String },
}

impl ScoreAt {
    fn shown(&self) -> String {
        match self {
            ScoreAt::Scorer(s) => s.clone(),
            ScoreAt::Key { scorer, key } => format!("{scorer}'s {key}"),
        }
    }
}

/// The score to take: `--score`, else the headline's, else the first of `results.scores`;
/// a name no scorer has is refused with those it has.
fn score_name(log: &Log, asked: Option<&str>) -> Result<ScoreAt, UsageError> {
    let scores: Vec<(String, String)> = log
        .header
        .pointer("/results/scores")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|s| {
                    let name = s.get("name")?.as_str()?.to_string();
                    let scorer = s
                        .get("scorer")
                        .and_then(Value::as_str)
                        .unwrap_or(&name)
                        .to_string();
                    Some((name, scorer))
                })
                .collect()
        })
        .unwrap_or_default();
    let headline = log
        .header
        .pointer("/results/headline/score")
        .and_then(Value::as_str)
        .map(String::from);
    let in_samples = |name: &str| {
        log.samples
            .iter()
            .any(|s| s.pointer(&format!("/scores/{name}")).is_some())
    };
    let name = match asked
        .map(String::from)
        .or(headline)
        .or_else(|| scores.first().map(|s| s.0.clone()))
    {
        Some(n) => n,
        None => {
            // An unfinished log has no results: its samples' first scorer.
            let first = log
                .samples
                .iter()
                .find_map(|s| s.get("scores")?.as_object()?.keys().next().cloned());
            return first.map(ScoreAt::Scorer).ok_or_else(|| {
                UsageError(format!("{} has no scores to import", log.file.display()))
            });
        }
    };
    if in_samples(&name) {
        return Ok(ScoreAt::Scorer(name));
    }
    if let Some((_, scorer)) = scores.iter().find(|(n, s)| *n == name && *s != name) {
        return Ok(ScoreAt::Key {
            scorer: scorer.clone(),
            key: name,
        });
    }
    Err(UsageError::with_fix(
        format!("{} has no score `{name}`", log.file.display()),
        format!(
            "--score takes one of: {}",
            scores
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ))
}

/// The template of the plan's `system_message` step, if it has one.
fn system_prompt(header: &Value) -> Option<String> {
    header
        .pointer("/plan/steps")?
        .as_array()?
        .iter()
        .find(|s| s.get("solver").and_then(Value::as_str) == Some("system_message"))?
        .pointer("/params/template")?
        .as_str()
        .map(String::from)
}

/// One sample as a job.
fn sample(s: &Value, at: &ScoreAt) -> Sample {
    let case = match s.get("id") {
        Some(Value::String(id)) => id.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let repeat = s
        .get("epoch")
        .and_then(Value::as_u64)
        .map_or(0, |e| e.saturating_sub(1)) as u32;
    let mut files = Vec::new();
    let input = match s.get("input") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(messages)) => messages
            .iter()
            .filter_map(|m| {
                let role = m.get("role")?.as_str()?;
                Some(format!(
                    "{role}: {}",
                    text_of(m.get("content")?, s.get("attachments"), &mut files)
                ))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    let expected = match s.get("target") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(|t| t.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    };
    let output = s
        .pointer("/output/completion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let score = match s.pointer("/error/message").and_then(Value::as_str) {
        Some(message) => Err(format!("the sample errored in inspect: {message}")),
        None => score_of(s, at),
    };
    let usage = s.get("model_usage").and_then(Value::as_object).map(|m| {
        let sum = |k: &str| m.values().filter_map(|u| u.get(k)?.as_u64()).sum::<u64>();
        Usage {
            prompt_tokens: sum("input_tokens"),
            completion_tokens: sum("output_tokens"),
            cached_tokens: sum("input_tokens_cache_read"),
            reasoning_tokens: sum("reasoning_tokens"),
            estimated: false,
        }
    });
    let tags = s
        .pointer("/metadata/tags")
        .and_then(Value::as_array)
        .map(|t| {
            t.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    Sample {
        case,
        repeat,
        input,
        expected,
        output,
        score,
        usage: usage.filter(|u| u.prompt_tokens + u.completion_tokens > 0),
        latency_ms: s
            .get("total_time")
            .and_then(Value::as_f64)
            .map(|t| t * 1000.0),
        tags,
        files,
    }
}

/// A message's content as text: a string, or its text parts, each image, audio or
/// document part as `[image: NAME, sha256 …]` where it was (the file itself in `files`).
fn text_of(content: &Value, attachments: Option<&Value>, files: &mut Vec<FileNote>) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p.get("type").and_then(Value::as_str) {
                Some("image" | "audio" | "video" | "document") => {
                    Some(file_of(p, attachments, files))
                }
                _ => p.get("text").and_then(Value::as_str).map(String::from),
            })
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// inspect's `ContentImage` (`image`), `ContentAudio` (`audio`), `ContentVideo` and
/// `ContentDocument`: a data URL (decoded, its kind from its bytes), a URL or a path (its
/// kind from its name), noted in `files`; what the input's text shows in its place. A log
/// keeps a large one as `attachment://HASH`, the sample's `attachments` holding it.
fn file_of(part: &Value, attachments: Option<&Value>, files: &mut Vec<FileNote>) -> String {
    let kind_word = part.get("type").and_then(Value::as_str).unwrap_or("file");
    let mut held = part
        .get(kind_word)
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(hash) = held.strip_prefix("attachment://") {
        held = attachments
            .and_then(|a| a.get(hash))
            .and_then(Value::as_str)
            .unwrap_or(held);
    }
    let name = part
        .get("filename")
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| {
            let n = files
                .iter()
                .filter(|f| f.name.starts_with(kind_word))
                .count();
            format!("{kind_word}-{}", n + 1)
        });
    let note = if let Some(data) = held.strip_prefix("data:") {
        let bytes = data.split_once(',').and_then(|(head, b64)| {
            use base64::Engine;
            head.ends_with(";base64")
                .then(|| {
                    base64::engine::general_purpose::STANDARD
                        .decode(b64.trim())
                        .ok()
                })
                .flatten()
        });
        bytes.and_then(|b| {
            Some(FileNote {
                name: name.clone(),
                origin: format!("data:{}", data.split([',', ';']).next().unwrap_or("")),
                kind: Kind::sniff(&b)?,
                bytes: b.len() as u64,
                sha256: Some(sha256_hex(&b)),
                path: None,
            })
        })
    } else {
        let ext = held.rsplit_once('.').map_or("", |(_, e)| e);
        let ext = part.get("format").and_then(Value::as_str).unwrap_or(ext);
        Kind::of_extension(ext).map(|kind| FileNote {
            name: name.clone(),
            origin: held.to_string(),
            kind,
            bytes: 0,
            sha256: None,
            path: None,
        })
    };
    match note {
        Some(n) => {
            let shown = match &n.sha256 {
                Some(h) => format!("[{kind_word}: {name}, sha256 {}…]", &h[..12]),
                None => format!("[{kind_word}: {}]", n.origin),
            };
            files.push(n);
            shown
        }
        None => format!("[{kind_word}: not a kind promptgauge knows]"),
    }
}

/// The sample's score at `at`, as inspect's `value_to_float` reads it.
fn score_of(s: &Value, at: &ScoreAt) -> Result<f64, String> {
    let (scorer, key) = match at {
        ScoreAt::Scorer(n) => (n.as_str(), None),
        ScoreAt::Key { scorer, key } => (scorer.as_str(), Some(key.as_str())),
    };
    let Some(score) = s.pointer(&format!("/scores/{scorer}")) else {
        return Err(format!("inspect did not score it with `{}`", at.shown()));
    };
    let value = match key {
        Some(k) => score
            .pointer(&format!("/value/{k}"))
            .unwrap_or(&Value::Null),
        None => score.get("value").unwrap_or(&Value::Null),
    };
    let read = match value {
        // `NaN` (read as null): inspect's "unscored".
        Value::Null => {
            let why = score
                .get("explanation")
                .or_else(|| score.get("reason"))
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            return Err(format!(
                "inspect left it unscored by `{}`: {why}",
                at.shown()
            ));
        }
        Value::String(t) => match t.trim().to_ascii_uppercase().as_str() {
            "C" | "YES" | "TRUE" => Some(1.0),
            "I" | "N" | "NO" | "FALSE" => Some(0.0),
            "P" => Some(0.5),
            other => other.parse::<f64>().ok(),
        },
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        Value::Object(keys) => {
            return Err(format!(
                "`{}` gives several scores ({}): name one with --score",
                at.shown(),
                keys.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        Value::Array(_) => None,
    };
    match read {
        Some(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Some(v) => Err(format!("`{}` is {v}, outside [0, 1]", at.shown())),
        None => Err(format!(
            "`{}` is {value}, not a score promptgauge can read",
            at.shown()
        )),
    }
}
