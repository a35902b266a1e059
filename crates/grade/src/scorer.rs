//! The `Scorer` shape: a scorer sees the case (its variables and expected answers), the
//! messages the variant rendered for it, and the whole answer, and returns a score in
//! [0, 1] with what it extracted. It is async and gets a [`ScoreContext`], so a scorer may
//! call a model (a judge) through the same client as the run; the text graders
//! ([`super::Grader`]) are scorers that return 0 or 1 at once.

use std::future::Future;
use std::pin::Pin;

pub use super::call::JudgeCall;
pub use super::context::ScoreContext;
use super::judge_prompt::PromptError;
use promptgauge_client::ChatMessage;
use promptgauge_client::{ToolCall, Usage};
use promptgauge_suite::Case;

/// What a scorer returns: a score, later.
pub(super) type ScoreFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Score, ScoreError>> + Send + 'a>>;

/// A whole answer: streamed to its finish (or taken from the cache).
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub text: String,
    /// The whole answer, when `text` is what the variant's `extract:` read of it (an
    /// `expr`'s `raw`); `None` when `text` is the whole answer.
    pub raw: Option<String>,
    pub reasoning: String,
    pub finish_reason: Option<String>,
    /// The tool calls the model made, assembled from the stream.
    pub tool_calls: Vec<ToolCall>,
    /// An agent loop's calls before this answer, and what each got back (empty for a job
    /// that is no loop): what the trajectory scorers read.
    pub steps: Vec<promptgauge_suite::tools::ToolStep>,
}

/// What a scorer is given for one job.
#[derive(Debug, Clone, Copy)]
pub struct ScoreInput<'a> {
    /// The job's idempotency key: a judge's calls derive theirs from it.
    pub key: &'a str,
    /// The job's repeat index: a scorer's cached calls are keyed on it, so repeats are
    /// never served one cached verdict.
    pub repeat: u32,
    pub case: &'a Case,
    /// The messages the variant rendered for this case, as sent.
    pub messages: &'a [ChatMessage],
    pub answer: &'a Answer,
}

/// A score known at once, as a scorer's future.
pub(crate) fn ready(score: Score) -> ScoreFuture<'static> {
    Box::pin(std::future::ready(Ok(score)))
}

/// One job's score.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// In [0, 1]; binary scorers give exactly 0 or 1.
    pub value: f64,
    /// What the scorer took from the answer; `None` when it found nothing to compare.
    pub extracted: Option<String>,
    /// Tokens the scorer itself spent (a judge's), costed apart from the answer's.
    pub usage: Option<Usage>,
    /// Why, in the scorer's terms: per-field results, the first schema violation, each
    /// judge's verdict and reason. Journaled with the job.
    pub detail: Option<serde_json::Value>,
    /// Every call a model-graded scorer made, journaled under the job.
    pub judge: Vec<JudgeCall>,
    /// The score's named parts, each in [0, 1], in the bench's order: a `fields` scorer's
    /// fields, an `all`/`any`/`mean`'s scorers, a judge's rubric items
    /// (docs/guide/scorers.md, "Parts"). Empty for a score of one piece.
    pub parts: Vec<(String, f64)>,
}

impl Score {
    /// A pass/fail verdict as a score.
    pub(crate) fn binary(pass: bool, extracted: Option<String>) -> Score {
        Score {
            value: if pass { 1.0 } else { 0.0 },
            extracted,
            usage: None,
            detail: None,
            judge: Vec::new(),
            parts: Vec::new(),
        }
    }
}

/// Whether a score is exactly 0 or 1.
pub fn is_binary(value: f64) -> bool {
    value == 0.0 || value == 1.0
}

/// A scorer could not score this answer (a judge that replied nonsense, or timed out): the
/// job fails; it is never scored 0. The calls it made are journaled all the same.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct ScoreError {
    pub message: String,
    pub judge: Vec<JudgeCall>,
    pub usage: Option<Usage>,
    /// The run was stopped while the scorer waited: the job did not finish (a resume
    /// scores it again); it is not a failure.
    pub stopped: bool,
}

impl ScoreError {
    /// A failure with no judge calls behind it.
    pub(crate) fn new(message: impl Into<String>) -> ScoreError {
        ScoreError {
            message: message.into(),
            judge: Vec::new(),
            usage: None,
            stopped: false,
        }
    }
}

/// Why a case's expected answer could never score under its scorer, in the user's terms:
/// a bench bug, caught before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    #[error(
        "`expected` is a JSON object or list, but this grader compares text: use `fields`, `json_schema` or `tool_call`, or write `expected` as a string"
    )]
    ExpectedJson,
    #[error("expected `{0}` is not a number, but the grader is `number`")]
    NotANumber(String),
    #[error("expected `{0}` is not an option letter A–Z, but the grader is `choice`")]
    NotALetter(String),
    #[error("expected `{expected}` can never be what the regex's first group `{group}` captures")]
    NeverCaptured { expected: String, group: String },
    #[error(
        "the judge has nothing to judge by: give the case an `expected` answer, or the judge a `rubric`"
    )]
    NothingToJudge,
    /// The judge prompt does not render for this case.
    #[error("{0}")]
    JudgePrompt(#[from] PromptError),
    #[error("`embedding` compares the answer with `expected`, and the case has no expected answer")]
    NothingToEmbed,
    /// An `expr` reads `vars.NAME` or `expected`, which the case has not.
    #[error("the expression reads `{0}`, which this case does not have")]
    ExprReads(String),
    #[error("`fields` needs `expected` to be a JSON object of the fields to extract")]
    FieldsNotObject,
    #[error("required field `{field}` is not among the expected fields ({expected})")]
    RequiredField { field: String, expected: String },
    #[error(
        "`tool_call` needs `expected` as {{\"name\": \"…\", \"arguments\": {{…}}}} or a list of them"
    )]
    ToolCallShape,
    #[error(
        "the `arguments` of `{0}` are a string that is not a JSON object: write them as an object, {{\"city\": \"Oslo\"}}"
    )]
    ArgumentsText(String),
    #[error("the `arguments` of `{name}` must be an object, found {found}")]
    ArgumentsNotObject {
        name: String,
        found: serde_json::Value,
    },
}

/// The model calls a scorer makes for one answer, at most (what `--budget` holds back for
/// a job in flight): how many, and their prompt tokens in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub count: u64,
    pub prompt_tokens: u64,
}

impl std::ops::Add for Calls {
    type Output = Calls;
    fn add(self, other: Calls) -> Calls {
        Calls {
            count: self.count + other.count,
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
        }
    }
}

/// Scores answers.
pub trait Scorer: Send + Sync + std::fmt::Debug {
    /// Scores one whole answer to one case.
    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a>;

    /// Checks, before any request, that this case's expected answer can ever score: the
    /// message says what is wrong in the user's terms.
    fn check(&self, case: &Case) -> Result<(), CaseError> {
        let _ = case;
        Ok(())
    }

    /// Whether this scorer (or one it combines) calls a judge model.
    fn uses_judge(&self) -> bool {
        false
    }

    /// The judge calls it makes for one answer to `case` at most, the answer counted at
    /// `answer_tokens` (none for a scorer that asks no model).
    fn calls(&self, case: &Case, messages: &[ChatMessage], answer_tokens: u64) -> Calls {
        let _ = (case, messages, answer_tokens);
        Calls::default()
    }

    /// What the scorer reads out of an answer before comparing (a number, an option
    /// letter, JSON), when it reads something: an answer it finds none in is recorded as
    /// such, and a variant whose answers mostly lack it is named in the reports (a format
    /// mismatch, or an import that compares with the wrong thing). `None` for scorers that
    /// compare the whole answer (`exact`, `contains`, a judge), and where finding nothing
    /// is a right answer for this case (no tool call expected).
    fn looks_for(&self, case: &Case) -> Option<&'static str> {
        let _ = case;
        None
    }
}
