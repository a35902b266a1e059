//! Graders (docs/guide/scorers.md, "The mechanical scorers") and the [`Scorer`] shape they share with every other scorer. Each
//! records what it extracted, so a person can see why a job failed.

pub mod combine;
pub mod command;
pub mod embedding;
pub mod judge;
pub mod scorer;
pub mod structured;

pub use crate::suite::GradeSpec;
pub use scorer::{
    Answer, CaseError, JudgeCall, Score, ScoreContext, ScoreError, ScoreInput, Scorer,
};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::sync::LazyLock;

use regex::Regex;

use crate::suite::{Bench, InputError, InputErrors};
use serde::{Deserialize, Serialize};

/// Each case's scorer, in the bench's case order: its own `grade`, or the bench's.
pub type Scorers = Vec<Arc<dyn Scorer>>;

/// Builds every case's scorer, and checks each case's expected answer against it: a
/// scorer that cannot be built (a regex that does not compile, a judge prompt with an
/// error) or that could never accept a case's expected answer is a bench bug, reported
/// with the file and line to fix. No network.
pub fn scorers_for(bench: &Bench) -> Result<Scorers, InputErrors> {
    let dir = bench.dir();
    let shared = bench.grade.scorer(dir).map_err(|e| {
        InputError::new(bench.location_of("grade"), e.to_string()).fix("fix the bench's `grade`")
    })?;
    let mut scorers = Vec::with_capacity(bench.cases.len());
    let mut errors = Vec::new();
    let mut judge_runaway_said = false;
    for case in &bench.cases {
        let scorer = match &case.grade {
            None => shared.clone(),
            Some(spec) => match spec.scorer(dir) {
                Ok(s) => s,
                Err(e) => {
                    let fix = if e.in_judge_prompt() {
                        "fix the judge prompt file named in the case's `grade` (it may use `question`, `reference`, `expected`, `answer`, `rubric`, `vars.NAME`)"
                    } else {
                        "fix the case's `grade`"
                    };
                    errors.push(
                        InputError::new(case.location.clone(), format!("case `{}`: {e}", case.id))
                            .fix(fix),
                    );
                    continue;
                }
            },
        };
        // A case whose expected answer its own scorer could never accept is a bench bug.
        if let Err(e) = scorer.check(case) {
            let runaway = matches!(
                e,
                CaseError::JudgePrompt(judge::PromptError::Runaway { .. })
            );
            let fix = if runaway {
                "remove the runaway loop or repetition from the judge prompt".to_string()
            } else if matches!(e, CaseError::JudgePrompt(_)) {
                "a judge prompt may use `question`, `conversation`, `reference`, `expected`, `answer`, `rubric`, `marker`, and the case's variables as `vars.NAME`".to_string()
            } else {
                "fix `expected`, or give the case a `grade` that fits it".to_string()
            };
            // A runaway judge prompt fails every case alike: said once.
            if !(runaway && judge_runaway_said) {
                errors.push(
                    InputError::new(case.location.clone(), format!("case `{}`: {e}", case.id))
                        .fix(fix),
                );
            }
            judge_runaway_said |= runaway;
        }
        scorers.push(scorer);
    }
    if errors.is_empty() {
        Ok(scorers)
    } else {
        Err(InputErrors(errors))
    }
}

/// The first capture group of `pattern`, as text, and a regex that matches exactly what it
/// can capture (`None` without a group, or when it cannot be taken apart).
fn first_group(pattern: &str, case_sensitive: bool) -> Option<(String, Regex)> {
    use regex_syntax::hir::{Hir, HirKind};
    fn find(h: &Hir) -> Option<&Hir> {
        match h.kind() {
            HirKind::Capture(c) if c.index == 1 => Some(&c.sub),
            HirKind::Capture(c) => find(&c.sub),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().find_map(find),
            HirKind::Repetition(r) => find(&r.sub),
            _ => None,
        }
    }
    let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
    let group = find(&hir)?.to_string();
    let flags = if case_sensitive { "" } else { "(?i)" };
    let whole = Regex::new(&format!("{flags}^(?:{group})$")).ok()?;
    Some((group, whole))
}

/// A grader ready to use: its regex compiled once, its path parsed once.
#[derive(Debug, Clone)]
pub enum Grader {
    Exact {
        case_sensitive: bool,
    },
    Contains {
        case_sensitive: bool,
    },
    Regex {
        regex: Regex,
        case_sensitive: bool,
    },
    Number {
        tolerance: f64,
    },
    Choice,
    Json {
        path: Vec<PathStep>,
        case_sensitive: bool,
    },
}

/// One step of a JSON path: a key or an index.
#[derive(Debug, Clone, PartialEq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

/// The verdict on one output: a text grader's score is full marks or none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grade {
    /// 1 when the output matches an expected answer, else 0.
    pub score: f64,
    /// What the grader took from the output; `None` when it found nothing to compare.
    pub extracted: Option<String>,
}

/// Full marks (1) when `pass`, else none (0).
fn marks(pass: bool) -> f64 {
    if pass { 1.0 } else { 0.0 }
}

impl Grade {
    /// Whether it has full marks.
    pub fn passed(&self) -> bool {
        self.score == 1.0
    }
}

/// Why a `grade:` spec cannot become a scorer, in the user's terms.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("`of` lists no scorers")]
    NoParts,
    #[error("tolerance must be a number ≥ 0, found {0}")]
    Tolerance(f64),
    #[error("`weights` has {weights} numbers for {parts} scorers in `of`")]
    WeightCount { weights: usize, parts: usize },
    #[error("`weights` must be numbers ≥ 0, not all 0")]
    Weights,
    #[error("the regex `{pattern}` does not compile: {error}")]
    Regex {
        pattern: String,
        error: regex::Error,
    },
    #[error("json path `{0}` names nothing; write it like `answer` or `result.items[0].name`")]
    EmptyPath(String),
    /// A structured or model-graded kind asked for as a text grader.
    #[error("`{0}` is not a text grader")]
    NotText(String),
    #[error("cannot read the schema: {0}")]
    ReadSchema(InputError),
    #[error("the schema {} is not JSON: {error}", path.display())]
    SchemaNotJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    /// What the JSON Schema validator found wrong with the schema.
    #[error("the JSON schema is not valid: {0}")]
    InvalidSchema(String),
    #[error("votes must be between 1 and 15, found {0}")]
    Votes(u32),
    #[error("{0}")]
    ReadJudgePrompt(InputError),
    #[error(
        "the judge prompt {}{} does not compile: {error}",
        path.display(),
        judge::at_line(*line)
    )]
    JudgePromptSyntax {
        path: PathBuf,
        line: Option<usize>,
        error: minijinja::Error,
    },
    #[error(
        "the judge prompt {} uses {}; it may use {} (case variables are under `vars`)",
        path.display(),
        backticked(unknown),
        backticked(&judge::PROMPT_VARIABLES)
    )]
    JudgePromptVariables { path: PathBuf, unknown: Vec<String> },
    #[error("{0}")]
    Command(#[from] command::CommandError),
    #[error("`threshold` must be a number between -1 and 1 (a cosine similarity), found {0}")]
    Threshold(f64),
    /// A judge's `labels` or `range` that cannot be read by.
    #[error("{0}")]
    Reading(String),
}

impl SpecError {
    /// Whether the judge prompt file's text is at fault (it does not compile, or uses
    /// variables a judge prompt does not have).
    fn in_judge_prompt(&self) -> bool {
        matches!(
            self,
            SpecError::JudgePromptSyntax { .. } | SpecError::JudgePromptVariables { .. }
        )
    }
}

/// Names as the messages list them: `a`, `b`.
fn backticked(names: &[impl AsRef<str>]) -> String {
    names
        .iter()
        .map(|n| format!("`{}`", n.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the grade layer adds to a spec: the scorer it describes, and what the simulator
/// makes of it.
pub trait SpecExt {
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError>;
    fn shape(&self) -> Shape;
    fn compile(&self) -> Result<Grader, SpecError>;
}

impl SpecExt for GradeSpec {
    /// The scorer this spec describes; files it names (a schema, a judge prompt) are read
    /// relative to `dir`. The error says what is wrong in the user's terms.
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError> {
        let parts = |of: &[GradeSpec]| -> Result<Vec<Arc<dyn Scorer>>, SpecError> {
            if of.is_empty() {
                return Err(SpecError::NoParts);
            }
            of.iter().map(|p| p.scorer(dir)).collect()
        };
        Ok(match self {
            GradeSpec::Judge {
                rubric,
                scale,
                votes,
                prompt,
                labels,
                passing_labels,
                range,
                pass_threshold,
            } => {
                let reading = match (labels.is_empty(), range) {
                    (false, None) => judge::Reading::Labels {
                        labels: labels.clone(),
                        passing: passing_labels.clone(),
                    },
                    (true, Some([low, high])) => judge::Reading::Range {
                        low: *low,
                        high: *high,
                        pass: pass_threshold.unwrap_or(*high),
                    },
                    (false, Some(_)) => {
                        return Err(SpecError::Reading(
                            "a judge reads either `labels` or a `range`, not both".into(),
                        ));
                    }
                    (true, None) if pass_threshold.is_some() || !passing_labels.is_empty() => {
                        return Err(SpecError::Reading(
                            "`pass_threshold` goes with a `range`, `passing_labels` with `labels`"
                                .into(),
                        ));
                    }
                    (true, None) => judge::Reading::Scale,
                };
                Arc::new(
                    judge::Judge::new(
                        rubric.clone(),
                        *scale,
                        *votes,
                        prompt.as_deref().map(|p| dir.join(p)).as_deref(),
                    )?
                    .reading(reading)?,
                )
            }
            GradeSpec::JsonSchema { schema } => {
                let schema = match schema {
                    serde_json::Value::String(file) => {
                        let path = dir.join(file);
                        let text = crate::suite::error::read_text(&path, "schema")
                            .map_err(SpecError::ReadSchema)?;
                        serde_json::from_str(&text)
                            .map_err(|error| SpecError::SchemaNotJson { path, error })?
                    }
                    inline => inline.clone(),
                };
                Arc::new(structured::JsonSchema::new(&schema)?)
            }
            GradeSpec::Fields {
                required,
                case_sensitive,
                tolerance,
            } => {
                if !tolerance.is_finite() || *tolerance < 0.0 {
                    return Err(SpecError::Tolerance(*tolerance));
                }
                Arc::new(structured::Fields {
                    required: required.clone(),
                    case_sensitive: *case_sensitive,
                    tolerance: *tolerance,
                })
            }
            GradeSpec::Command {
                run,
                env,
                workers,
                timeout,
                binary,
            } => {
                let timeout = match timeout {
                    None => command::DEFAULT_TIMEOUT,
                    Some(t) => crate::suite::parse_duration(t)
                        .map_err(|e| command::CommandError::Timeout(e.to_string()))?,
                };
                Arc::new(command::Command::new(
                    run, env, dir, *workers, timeout, *binary,
                )?)
            }
            GradeSpec::Embedding {
                threshold,
                endpoint,
                model,
            } => {
                if !threshold.is_finite() || !(-1.0..=1.0).contains(threshold) {
                    return Err(SpecError::Threshold(*threshold));
                }
                if model.as_deref().is_some_and(|m| m.trim().is_empty())
                    || endpoint.as_deref().is_some_and(|e| e.trim().is_empty())
                {
                    return Err(SpecError::Reading(
                        "`model` and `endpoint` name something when given: leave them out to use the run's endpoint and its model".into(),
                    ));
                }
                Arc::new(embedding::Embedding {
                    threshold: *threshold,
                    service: (endpoint.clone(), model.clone()),
                })
            }
            GradeSpec::ToolCall { exact, order } => Arc::new(structured::ToolCalls {
                exact: *exact,
                order: *order,
            }),
            GradeSpec::All { of } => Arc::new(combine::Combined {
                how: combine::Combine::All,
                weights: vec![1.0; of.len()],
                parts: parts(of)?,
            }),
            GradeSpec::Any { of } => Arc::new(combine::Combined {
                how: combine::Combine::Any,
                weights: vec![1.0; of.len()],
                parts: parts(of)?,
            }),
            GradeSpec::Mean { of, weights } => {
                let weights = match weights {
                    None => vec![1.0; of.len()],
                    Some(w) if w.len() != of.len() => {
                        return Err(SpecError::WeightCount {
                            weights: w.len(),
                            parts: of.len(),
                        });
                    }
                    Some(w)
                        if w.iter().any(|x| !x.is_finite() || *x < 0.0)
                            || w.iter().sum::<f64>() <= 0.0 =>
                    {
                        return Err(SpecError::Weights);
                    }
                    Some(w) => w.clone(),
                };
                Arc::new(combine::Combined {
                    how: combine::Combine::Mean,
                    weights,
                    parts: parts(of)?,
                })
            }
            text => Arc::new(text.compile()?),
        })
    }

    /// The shape of answer this spec expects, for the simulator.
    fn shape(&self) -> Shape {
        match self {
            GradeSpec::Number { .. } => Shape::Number,
            GradeSpec::Choice => Shape::Choice,
            GradeSpec::Json { path, .. } => Shape::JsonPath(path.clone()),
            GradeSpec::JsonSchema { .. } | GradeSpec::Fields { .. } => Shape::Json,
            GradeSpec::ToolCall { .. } => Shape::ToolCall,
            GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => {
                of.first().map_or(Shape::Text, GradeSpec::shape)
            }
            _ => Shape::Text,
        }
    }

    /// A text grader: its regex compiled once, its path parsed once. Errors for the
    /// structured and model-graded kinds (use [`GradeSpec::scorer`]).
    fn compile(&self) -> Result<Grader, SpecError> {
        Ok(match self {
            GradeSpec::Exact { case_sensitive } => Grader::Exact {
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Contains { case_sensitive } => Grader::Contains {
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Regex {
                pattern,
                case_sensitive,
            } => Grader::Regex {
                regex: Regex::new(pattern).map_err(|error| SpecError::Regex {
                    pattern: pattern.clone(),
                    error,
                })?,
                case_sensitive: *case_sensitive,
            },
            GradeSpec::Number { tolerance } => {
                if !tolerance.is_finite() || *tolerance < 0.0 {
                    return Err(SpecError::Tolerance(*tolerance));
                }
                Grader::Number {
                    tolerance: *tolerance,
                }
            }
            GradeSpec::Choice => Grader::Choice,
            GradeSpec::Json {
                path,
                case_sensitive,
            } => Grader::Json {
                path: parse_path(path)?,
                case_sensitive: *case_sensitive,
            },
            other => {
                return Err(SpecError::NotText(
                    serde_json::to_value(other)
                        .ok()
                        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(String::from))
                        .unwrap_or_default(),
                ));
            }
        })
    }
}

/// What an answer looks like, as far as the simulator needs to know to make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Text,
    Number,
    Choice,
    /// JSON with the answer at this path.
    JsonPath(String),
    /// A JSON document (fields, a schema).
    Json,
    ToolCall,
}

impl Grader {
    /// Checks that an expected answer can ever match, so a typo is caught before the run.
    pub(crate) fn check_expected(&self, expected: &str) -> Result<(), CaseError> {
        match self {
            Grader::Number { .. } if parse_number(expected).is_none() => {
                Err(CaseError::NotANumber(expected.to_string()))
            }
            Grader::Choice if choice_letter(expected).is_none() => {
                Err(CaseError::NotALetter(expected.to_string()))
            }
            Grader::Regex {
                regex,
                case_sensitive,
            } => match first_group(regex.as_str(), *case_sensitive) {
                Some((group, whole)) if !whole.is_match(expected.trim()) => {
                    Err(CaseError::NeverCaptured {
                        expected: expected.to_string(),
                        group,
                    })
                }
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Whether `output` matches one of `expected`, and what was extracted from it.
    pub fn grade(&self, output: &str, expected: &[String]) -> Grade {
        match self {
            Grader::Exact { case_sensitive } => {
                let got = output.trim();
                Grade {
                    score: marks(
                        expected
                            .iter()
                            .any(|e| text_eq(got, e.trim(), *case_sensitive)),
                    ),
                    extracted: Some(got.to_string()),
                }
            }
            Grader::Contains { case_sensitive } => {
                let found = expected.iter().find(|e| {
                    if *case_sensitive {
                        output.contains(e.as_str())
                    } else {
                        output.to_lowercase().contains(&e.to_lowercase())
                    }
                });
                Grade {
                    score: marks(found.is_some()),
                    extracted: found.cloned(),
                }
            }
            Grader::Regex {
                regex,
                case_sensitive,
            } => {
                let Some(caps) = regex.captures(output) else {
                    return Grade {
                        score: marks(false),
                        extracted: None,
                    };
                };
                match caps.get(1) {
                    Some(group) => {
                        let got = group.as_str().trim();
                        Grade {
                            score: marks(
                                expected
                                    .iter()
                                    .any(|e| text_eq(got, e.trim(), *case_sensitive)),
                            ),
                            extracted: Some(got.to_string()),
                        }
                    }
                    None => Grade {
                        score: marks(true),
                        extracted: caps.get(0).map(|m| m.as_str().to_string()),
                    },
                }
            }
            Grader::Number { tolerance } => {
                let got = last_number(output);
                Grade {
                    score: marks(got.is_some_and(|g| {
                        expected
                            .iter()
                            .filter_map(|e| parse_number(e))
                            .any(|e| (g - e).abs() <= *tolerance)
                    })),
                    extracted: got.map(format_number),
                }
            }
            Grader::Choice => {
                let got = extract_choice(output);
                Grade {
                    score: marks(
                        got.is_some_and(|g| expected.iter().any(|e| choice_letter(e) == Some(g))),
                    ),
                    extracted: got.map(String::from),
                }
            }
            Grader::Json {
                path,
                case_sensitive,
            } => {
                let got = json_value_at(output, path);
                Grade {
                    score: marks(got.as_ref().is_some_and(|g| {
                        expected.iter().any(|e| {
                            text_eq(g, e.trim(), *case_sensitive)
                                || matches!((parse_number(g), parse_number(e)), (Some(a), Some(b)) if a == b)
                        })
                    })),
                    extracted: got,
                }
            }
        }
    }
}

fn text_eq(a: &str, b: &str, case_sensitive: bool) -> bool {
    if case_sensitive {
        a == b
    } else {
        a.to_lowercase() == b.to_lowercase()
    }
}

static NUMBER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[-−]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+−]?\d+)?")
        .expect("valid regex")
});

/// A number as people write it: `-3`, `1,234`, `3.50`, `−2` (Unicode minus), `1e3`,
/// `6.02E23`, `2.5e-4`.
pub(crate) fn parse_number(text: &str) -> Option<f64> {
    let t = text.trim();
    let m = NUMBER.find(t)?;
    if m.start() != 0 || m.end() != t.len() {
        return None;
    }
    to_f64(m.as_str())
}

fn to_f64(s: &str) -> Option<f64> {
    s.replace(',', "").replace('−', "-").parse().ok()
}

/// The last number in a text, the usual place for a final answer.
pub(crate) fn last_number(text: &str) -> Option<f64> {
    NUMBER
        .find_iter(text)
        .last()
        .and_then(|m| to_f64(m.as_str()))
}

fn format_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The letter of an expected choice: `B`, `b`, `(B)`, `B)`.
fn choice_letter(expected: &str) -> Option<char> {
    let t = expected
        .trim()
        .trim_matches(|c| matches!(c, '(' | ')' | '.' | ':'));
    let mut chars = t.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => Some(c.to_ascii_uppercase()),
        _ => None,
    }
}

static ANSWER_IS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b(?:answer|choice|option|category)\s*(?:is|:)?\s*[:\-]?\s*\(?([A-Z])\)?(?:[^A-Za-z0-9]|$)")
        .expect("valid regex")
});
static LONE_LETTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\(?([A-Z])\)?[.:]?$").expect("valid regex"));
static LEADING_LETTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^\(?([A-Z])[).:](?:\s|$)").expect("valid regex"));
static BRACKETED: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\(([A-Z])\)").expect("valid regex"));

/// The option letter a model chose. In order of trust: an explicit "Answer: X" (the last
/// one, as models revise), the whole output being a letter, a leading "X)", a bracketed "(X)".
pub(crate) fn extract_choice(output: &str) -> Option<char> {
    let text = output.replace(['*', '`'], "");
    let text = text.trim();
    let letter = |m: Option<regex::Match>| m.and_then(|m| m.as_str().chars().next());
    if let Some(c) = ANSWER_IS.captures_iter(text).last() {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    if let Some(c) = LONE_LETTER.captures(text) {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    if let Some(c) = LEADING_LETTER.captures(text) {
        return letter(c.get(1)).map(|c| c.to_ascii_uppercase());
    }
    BRACKETED
        .captures_iter(text)
        .last()
        .and_then(|c| letter(c.get(1)))
}

/// `a.b[0].c`, `$.a.b.0` or `/a/b/0`.
fn parse_path(path: &str) -> Result<Vec<PathStep>, SpecError> {
    let p = path.trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let parts: Vec<&str> = if p.starts_with('/') {
        p.split('/').filter(|s| !s.is_empty()).collect()
    } else {
        p.split(['.', '[', ']']).filter(|s| !s.is_empty()).collect()
    };
    if parts.is_empty() {
        return Err(SpecError::EmptyPath(path.to_string()));
    }
    Ok(parts
        .into_iter()
        .map(|s| match s.parse::<usize>() {
            Ok(i) => PathStep::Index(i),
            Err(_) => PathStep::Key(s.to_string()),
        })
        .collect())
}

/// The value at `path`, as text: strings bare, everything else as compact JSON.
fn json_value_at(output: &str, path: &[PathStep]) -> Option<String> {
    let body = strip_code_fence(output.trim());
    let mut value: &serde_json::Value = &serde_json::from_str(body).ok()?;
    for step in path {
        value = match (step, value) {
            (PathStep::Key(k), serde_json::Value::Object(map)) => map.get(k)?,
            (PathStep::Index(i), serde_json::Value::Array(items)) => items.get(*i)?,
            (PathStep::Index(i), serde_json::Value::Object(map)) => map.get(&i.to_string())?,
            _ => return None,
        };
    }
    let owned = match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Some(owned)
}

/// Models often wrap JSON in a Markdown fence; the JSON inside is still the answer.
pub(crate) fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.split_once('\n').map_or("", |(_, r)| r);
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_whose_expected_answer_its_scorer_cannot_accept_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: number }\n",
        )
        .unwrap();
        std::fs::write(
            d.join("cases.jsonl"),
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\"}, \"expected\": \"five\"}\n",
        )
        .unwrap();
        std::fs::write(d.join("plain.txt"), "{{ q }}").unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        let e = scorers_for(&bench).unwrap_err().to_string();
        assert!(
            e.contains("cases.jsonl:1: case `a`: expected `five` is not a number"),
            "{e}"
        );
        // The bench's own grade, when it cannot be built, is named at its line.
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: regex, pattern: \"(\" }\n",
        )
        .unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        let e = scorers_for(&bench).unwrap_err().to_string();
        assert!(
            e.contains("bench.yaml:4") && e.contains("does not compile"),
            "{e}"
        );
    }

    fn grade(spec: GradeSpec, output: &str, expected: &[&str]) -> Grade {
        let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        spec.compile().unwrap().grade(output, &expected)
    }

    #[test]
    fn exact_trims_and_ignores_case_by_default() {
        assert!(grade(GradeSpec::default(), "  Paris \n", &["paris"]).passed());
        let sensitive = GradeSpec::Exact {
            case_sensitive: true,
        };
        assert!(!grade(sensitive, "Paris", &["paris"]).passed());
        assert!(!grade(GradeSpec::default(), "Paris, France", &["paris"]).passed());
    }

    #[test]
    fn contains_accepts_any_expected() {
        let g = grade(
            GradeSpec::Contains {
                case_sensitive: false,
            },
            "It is LYON.",
            &["paris", "lyon"],
        );
        assert!(g.passed());
        assert_eq!(g.extracted.as_deref(), Some("lyon"));
    }

    #[test]
    fn regex_compares_capture_group() {
        let spec = GradeSpec::Regex {
            pattern: r"Answer:\s*(\w+)".into(),
            case_sensitive: false,
        };
        let g = grade(spec.clone(), "blah\nAnswer: Blue", &["blue"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("Blue")));
        assert!(!grade(spec, "Answer: red", &["blue"]).passed());
        let bad = GradeSpec::Regex {
            pattern: "(".into(),
            case_sensitive: false,
        };
        assert!(
            bad.compile()
                .unwrap_err()
                .to_string()
                .contains("does not compile")
        );
    }

    #[test]
    fn number_takes_last_number_with_separators_and_sign() {
        let n = GradeSpec::Number { tolerance: 0.0 };
        let g = grade(
            n.clone(),
            "2 + 3 = 5, so the total is 1,234.50",
            &["1234.5"],
        );
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("1234.5")));
        assert!(grade(n.clone(), "It is -7.", &["-7"]).passed());
        assert!(grade(n.clone(), "It is −7.", &["-7"]).passed());
        assert!(grade(n.clone(), "$3.50", &["3.5"]).passed());
        // Scientific notation is one number, not its exponent.
        let g = grade(n.clone(), "It is 1e3.", &["1000"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("1000")));
        assert!(grade(n.clone(), "Avogadro: 6.02E23", &["6.02e23"]).passed());
        assert!(grade(n.clone(), "about 2.5e-4 m", &["0.00025"]).passed());
        assert!(grade(n.clone(), "x = −1.5e−2", &["-0.015"]).passed());
        assert!(grade(n.clone(), "5 eggs", &["5"]).passed());
        assert!(!grade(n.clone(), "no digits", &["3"]).passed());
        assert!(!grade(n, "4", &["3"]).passed());
        let tol = GradeSpec::Number { tolerance: 0.01 };
        assert!(grade(tol, "3.141", &["3.14"]).passed());
    }

    #[test]
    fn choice_finds_the_letter() {
        for (output, letter) in [
            ("B", 'B'),
            ("(c)", 'C'),
            ("D.", 'D'),
            ("A) Billing", 'A'),
            ("The customer mentions a refund. Answer: C", 'C'),
            ("**Answer:** (B)", 'B'),
            ("I think it is A, no wait. The answer is D.", 'D'),
            ("Category: b", 'B'),
            ("It must be (A) because…", 'A'),
        ] {
            assert_eq!(extract_choice(output), Some(letter), "{output}");
        }
        assert_eq!(extract_choice("I am not sure"), None);
        assert!(grade(GradeSpec::Choice, "Answer: b", &["B"]).passed());
        assert!(!grade(GradeSpec::Choice, "Answer: A", &["B"]).passed());
    }

    #[test]
    fn json_reads_path_and_strips_fence() {
        let spec = GradeSpec::Json {
            path: "result.items[1].name".into(),
            case_sensitive: false,
        };
        let out = "```json\n{\"result\": {\"items\": [{\"name\": \"a\"}, {\"name\": \"B\"}]}}\n```";
        let g = grade(spec, out, &["b"]);
        assert_eq!((g.passed(), g.extracted.as_deref()), (true, Some("B")));
        let n = GradeSpec::Json {
            path: "$.n".into(),
            case_sensitive: false,
        };
        assert!(grade(n.clone(), r#"{"n": 5.0}"#, &["5"]).passed());
        let g = grade(n, "not json", &["5"]);
        assert_eq!((g.passed(), g.extracted), (false, None));
    }

    #[test]
    fn expected_values_are_checked_against_the_grader() {
        let number = GradeSpec::Number { tolerance: 0.0 }.compile().unwrap();
        assert!(number.check_expected("12").is_ok());
        assert!(number.check_expected("twelve").is_err());
        assert!(Grader::Choice.check_expected("AB").is_err());
        // A capture group that can only take digits can never capture "four".
        let regex = |p: &str| {
            GradeSpec::Regex {
                pattern: p.into(),
                case_sensitive: false,
            }
            .compile()
            .unwrap()
        };
        assert!(regex(r"Answer: (\d+)").check_expected("4").is_ok());
        let e = regex(r"Answer: (\d+)")
            .check_expected("four")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("can never be what the regex's first group"),
            "{e}"
        );
        assert!(
            regex(r"Team: (billing|shipping)")
                .check_expected("Billing")
                .is_ok()
        );
        assert!(
            regex(r"Team: (billing|shipping)")
                .check_expected("sales")
                .is_err()
        );
        // Without a group the expected value is not compared: nothing to check.
        assert!(regex(r"done\.").check_expected("anything").is_ok());
    }
}
