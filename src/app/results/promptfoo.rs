//! promptfoo's `eval --output results.json` (results `version: 3`): each prompt × provider
//! column a variant, each test a case (its `description` and variables; a `--repeat`
//! test's copies its repeats), `success` the score (or, with `--score score`, the
//! fractional `score`; `--score METRIC`, a named score), a provider error a failed job.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::imported::{self, Imported, ImportedArm, Sample, shown};
use super::read;
use crate::cli::ImportResultsArgs;
use crate::error::UsageError;
use promptgauge_client::Usage;

pub(super) fn read(args: &ImportResultsArgs) -> Result<Imported, UsageError> {
    let mut imported = Imported {
        tool: "promptfoo".into(),
        ..Imported::default()
    };
    let mut names = Vec::new();
    for file in &args.files {
        let v = read::json(&read::bytes(file)?, &|| file.display().to_string())?;
        let results = v.get("results").filter(|r| r.is_object()).ok_or_else(|| {
            UsageError(format!(
                "{} is not a promptfoo results file: it has no `results` object (write one with `promptfoo eval --output results.json`)",
                file.display()
            ))
        })?;
        let version = results.get("version").and_then(Value::as_u64);
        if version != Some(3) {
            return Err(UsageError::with_fix(
                format!(
                    "{} is a promptfoo results file of version {}, and import-results reads version 3",
                    file.display(),
                    version.map_or("(none)".to_string(), |v| v.to_string())
                ),
                "export it again with a promptfoo of 2024 or later (`promptfoo export EVAL_ID -o results.json`)",
            ));
        }
        if let Some(version) = v
            .pointer("/metadata/promptfooVersion")
            .and_then(Value::as_str)
        {
            imported.tool = format!("promptfoo {version}");
        }
        if imported.started_at.is_none() {
            imported.started_at = results
                .get("timestamp")
                .and_then(Value::as_str)
                .map(String::from);
        }
        names.push(
            v.pointer("/config/description")
                .and_then(Value::as_str)
                .unwrap_or("promptfoo")
                .to_string(),
        );
        columns(file, results, args, &mut imported)?;
    }
    imported.name = names
        .first()
        .map(|n| imported::clean_name(n))
        .unwrap_or_else(|| "promptfoo".into());
    if imported.arms.is_empty() {
        return Err(UsageError(format!(
            "{} hold no results",
            shown(&args.files)
        )));
    }
    imported.notes.push(
        "promptfoo's per-assertion results and named scores: one score per answer is kept (`success`, or the one --score names); each assertion's verdict and reason are in results.json".into(),
    );
    imported.notes.push(
        "promptfoo's `cost`: promptgauge costs tokens at a `price`, which an import has none of; the tokens are kept".into(),
    );
    Ok(imported)
}

/// A file's columns (prompt × provider) as variants.
fn columns(
    file: &std::path::Path,
    results: &Value,
    args: &ImportResultsArgs,
    imported: &mut Imported,
) -> Result<(), UsageError> {
    let prompts = results
        .get("prompts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let list = results
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            UsageError(format!(
                "{}: `results.results` is not a list",
                file.display()
            ))
        })?;
    let providers: HashSet<&str> = list
        .iter()
        .filter_map(|r| r.pointer("/provider/id").and_then(Value::as_str))
        .collect();
    let first = imported.arms.len();
    let mut file_columns = Columns::default();
    let mut named_missing = 0usize;
    for (n, r) in list.iter().enumerate() {
        let column = r.get("promptIdx").and_then(Value::as_u64).unwrap_or(0);
        let arm = *file_columns.arms.entry(column).or_insert_with(|| {
            let p = prompts.get(column as usize);
            imported
                .arms
                .push(column_arm(file, r, p, providers.len() > 1));
            imported.arms.len() - 1
        });
        let vars = r.get("vars").cloned().unwrap_or(Value::Null);
        let (case, repeat) = file_columns.case_of(r, n, &vars, arm);
        let score = score_of(r, args.score.as_deref());
        if matches!(&score, Err(Missing::NamedScore(_))) {
            named_missing += 1;
        }
        let expected = ["expected", "answer"]
            .iter()
            .find_map(|k| vars.get(*k).and_then(Value::as_str))
            .map(|e| vec![e.to_string()])
            .unwrap_or_default();
        imported.arms[arm].samples.push(Sample {
            case,
            repeat,
            input: r
                .pointer("/prompt/raw")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            expected,
            output: match r.pointer("/response/output") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
            score: score.map_err(Missing::into_reason),
            usage: usage_of(r),
            latency_ms: r.get("latencyMs").and_then(Value::as_f64),
            tags: Vec::new(),
            files: Vec::new(),
        });
    }
    if named_missing == list.len() && !list.is_empty() {
        return Err(no_named_score(file, list, args));
    }
    if imported.arms.len() == first {
        return Err(UsageError(format!("{} holds no results", file.display())));
    }
    Ok(())
}

/// What a file's results have been sorted into so far.
#[derive(Default)]
struct Columns {
    /// Each column's variant (its place in `Imported::arms`).
    arms: HashMap<u64, usize>,
    /// Within a column, the copies of one test (a `--repeat`) are its repeats, in order.
    copies: HashMap<(usize, String), u32>,
    /// Each test's case id, by its identity.
    ids: HashMap<String, String>,
    used: HashSet<String>,
}

impl Columns {
    /// The case and repeat of the `n`th result, in the column of variant `arm`: a test is
    /// known by its description and variables, its id its description (made unique) or
    /// `test-N`.
    fn case_of(&mut self, r: &Value, n: usize, vars: &Value, arm: usize) -> (String, u32) {
        let description = r
            .pointer("/testCase/description")
            .and_then(Value::as_str)
            .unwrap_or("");
        let identity = format!("{description}\u{0}{vars}");
        let case = match self.ids.get(&identity) {
            Some(id) => id.clone(),
            None => {
                let base = if description.trim().is_empty() {
                    format!(
                        "test-{}",
                        r.get("testIdx").and_then(Value::as_u64).unwrap_or(n as u64)
                    )
                } else {
                    description.trim().to_string()
                };
                let mut id = base.clone();
                let mut k = 2;
                while self.used.contains(&id) {
                    id = format!("{base}-{k}");
                    k += 1;
                }
                self.used.insert(id.clone());
                self.ids.insert(identity.clone(), id.clone());
                id
            }
        };
        let c = self.copies.entry((arm, identity)).or_insert(0);
        *c += 1;
        (case, *c - 1)
    }
}

/// A column's variant, from its first result: named by the prompt's label (and the
/// provider's, when the file holds several), its prompt the prompt's text.
fn column_arm(
    file: &std::path::Path,
    r: &Value,
    prompt: Option<&Value>,
    several_providers: bool,
) -> ImportedArm {
    let label = prompt
        .and_then(|p| p.get("label"))
        .and_then(Value::as_str)
        .or_else(|| r.pointer("/prompt/label").and_then(Value::as_str))
        .unwrap_or("prompt");
    let provider = r
        .pointer("/provider/label")
        .and_then(Value::as_str)
        .or_else(|| r.pointer("/provider/id").and_then(Value::as_str))
        .unwrap_or("");
    ImportedArm {
        name: if several_providers {
            format!("{label}/{provider}")
        } else {
            label.to_string()
        },
        model: provider.to_string(),
        file: file.to_path_buf(),
        prompt: prompt
            .and_then(|p| p.get("raw"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        samples: Vec::new(),
    }
}

/// Why a result has no score.
enum Missing {
    /// Its named score is not there: counted, since a name no result has is refused.
    NamedScore(String),
    Other(String),
}

impl Missing {
    fn into_reason(self) -> String {
        match self {
            Missing::NamedScore(why) | Missing::Other(why) => why,
        }
    }
}

/// A result's score: `success` (the default), the fractional `score`, or a named score.
fn score_of(r: &Value, asked: Option<&str>) -> Result<f64, Missing> {
    let failure = r.get("failureReason").and_then(Value::as_u64).unwrap_or(0);
    if failure == 2 {
        return Err(Missing::Other(format!(
            "the provider failed (in promptfoo): {}",
            r.get("error")
                .and_then(Value::as_str)
                .unwrap_or("no answer")
        )));
    }
    match asked {
        None | Some("success") | Some("pass") => Ok(f64::from(u8::from(
            r.get("success").and_then(Value::as_bool).unwrap_or(false),
        ))),
        Some("score") => r
            .get("score")
            .and_then(imported::unit_score)
            .ok_or_else(|| Missing::Other("promptfoo gave no score in [0, 1]".to_string())),
        Some(metric) => match r.get("namedScores").and_then(|m| m.get(metric)) {
            Some(v) => imported::unit_score(v).ok_or_else(|| {
                Missing::Other(format!("the named score `{metric}` is {v}, not in [0, 1]"))
            }),
            None => Err(Missing::NamedScore(format!(
                "promptfoo gave no named score `{metric}`"
            ))),
        },
    }
}

/// A result's tokens, when it counts any.
fn usage_of(r: &Value) -> Option<Usage> {
    let tokens = r.pointer("/response/tokenUsage");
    let count = |k: &str| tokens.and_then(|t| t.get(k)).and_then(Value::as_u64);
    count("prompt")
        .map(|prompt| Usage {
            prompt_tokens: prompt,
            completion_tokens: count("completion").unwrap_or(0),
            cached_tokens: count("cached").unwrap_or(0),
            ..Usage::default()
        })
        .filter(|u| u.prompt_tokens + u.completion_tokens > 0)
}

/// `--score METRIC` that no result of the file has, refused with the names it has.
fn no_named_score(file: &std::path::Path, list: &[Value], args: &ImportResultsArgs) -> UsageError {
    let known: BTreeSet<&str> = list
        .iter()
        .filter_map(|r| r.get("namedScores").and_then(Value::as_object))
        .flat_map(|m| m.keys().map(String::as_str))
        .collect();
    UsageError::with_fix(
        format!(
            "{}: no result has a named score `{}`",
            file.display(),
            args.score.as_deref().unwrap_or_default()
        ),
        format!(
            "--score takes `success` (the default), `score`, or a named score: {}",
            known.into_iter().collect::<Vec<_>>().join(", ")
        ),
    )
}
