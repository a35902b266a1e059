//! Why a `grade:` spec cannot become a scorer: [`SpecError`], in the user's terms.

use std::path::PathBuf;

use super::command::CommandError;
use super::judge_prompt::{PROMPT_VARIABLES, at_line};
use promptgauge_suite::InputError;

/// Why a `grade:` spec cannot become a scorer, in the user's terms.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("`of` lists no scorers")]
    NoParts,
    #[error(
        "the part name {name:?} {why}: a part's name is how the reports and the gates name it (`--min-accuracy @NAME=P`), so it holds no `=`, `,` or control character and no space at an end; rename it, or leave `name:` out to name the part by its kind"
    )]
    PartName { name: String, why: &'static str },
    #[error("two parts are named `{0}`: give each its own `name:`")]
    PartNamedTwice(String),
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
        at_line(*line)
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
        backticked(&PROMPT_VARIABLES)
    )]
    JudgePromptVariables { path: PathBuf, unknown: Vec<String> },
    #[error("{0}")]
    Command(#[from] CommandError),
    #[error("{0}")]
    Expr(#[from] ExprError),
    #[error("`threshold` must be a number between -1 and 1 (a cosine similarity), found {0}")]
    Threshold(f64),
    /// A judge's `labels` or `range` that cannot be read by.
    #[error("{0}")]
    Reading(String),
}

impl SpecError {
    /// The text of the bench file the error is about, when it can be found there (the line
    /// of an expression that does not compile).
    pub(super) fn written(&self) -> Option<&str> {
        match self {
            SpecError::Expr(e) => e.written(),
            _ => None,
        }
    }

    /// Whether the judge prompt file's text is at fault (it does not compile, or uses
    /// variables a judge prompt does not have).
    pub(super) fn in_judge_prompt(&self) -> bool {
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

/// Why an expression cannot be used, found when the bench loads.
#[derive(Debug, thiserror::Error)]
pub enum ExprError {
    #[error("the expression is empty: write one, e.g. expr: \"'refund' in output\"")]
    Empty,
    #[error("the expression `{expr}` does not compile: {detail}, at `{part}` (column {column})")]
    Syntax {
        expr: String,
        detail: String,
        /// The expression from the failing token on (its first 30 characters).
        part: String,
        column: usize,
        /// The line of the expression the error is on, as written.
        line: String,
    },
    #[error(
        "the expression `{expr}` uses `{name}`, which it does not have{nearest}: it may use `output` (or `answer`), `raw`, `json`, `expected` and `vars.NAME`"
    )]
    Unknown {
        expr: String,
        name: String,
        nearest: String,
    },
    #[error("the expression `{expr}`: {why}")]
    Regex { expr: String, why: String },
    #[error(
        "the expression `{expr}` uses an {unknown}: it may use the engine's filters and tests and the helpers `matches`, `capture`, `wordcount`, `last_number`, `fromjson`"
    )]
    UnknownFilter {
        expr: String,
        unknown: promptgauge_suite::jinja::UnknownName,
    },
}

impl ExprError {
    /// The line of the expression to look for in the bench file, so the error points at it.
    pub(crate) fn written(&self) -> Option<&str> {
        match self {
            ExprError::Syntax { line, .. } => Some(line),
            ExprError::Unknown { expr, .. } | ExprError::Regex { expr, .. } => expr.lines().next(),
            ExprError::UnknownFilter { expr, unknown } => expr
                .lines()
                .nth(unknown.line.unwrap_or(1).saturating_sub(1)),
            ExprError::Empty => None,
        }
    }
}
