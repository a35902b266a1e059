//! The `Scorer` shape: a scorer sees the case (its variables and expected answers), the
//! messages the variant rendered for it, and the whole answer, and returns a score in
//! [0, 1] with what it extracted. It is async and gets a [`ScoreContext`], so a scorer may
//! call a model (a judge) through the same client as the run; today's graders
//! ([`super::Grader`]) are scorers that return 0 or 1 at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::client::{Client, Usage};
use crate::suite::{Case, ChatMessage};

/// What a scorer returns: a score, later.
pub type ScoreFuture<'a> = Pin<Box<dyn Future<Output = Result<Score, ScoreError>> + Send + 'a>>;

/// A whole answer: streamed to its finish (or taken from the cache).
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub text: String,
    pub reasoning: String,
    pub finish_reason: Option<String>,
}

/// What a scorer is given for one job.
#[derive(Debug, Clone, Copy)]
pub struct ScoreInput<'a> {
    pub case: &'a Case,
    /// The messages the variant rendered for this case, as sent.
    pub messages: &'a [ChatMessage],
    pub answer: &'a Answer,
}

/// What the run lends its scorers.
#[derive(Clone, Default)]
pub struct ScoreContext {
    /// The client model-graded scorers send their requests through.
    pub judge: Option<Arc<Client>>,
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
}

impl Score {
    /// A pass/fail verdict as a score.
    pub fn binary(pass: bool, extracted: Option<String>) -> Score {
        Score {
            value: if pass { 1.0 } else { 0.0 },
            extracted,
            usage: None,
        }
    }

    /// `Some(pass)` when the score is exactly 0 or 1.
    pub(crate) fn as_bool(&self) -> Option<bool> {
        is_binary(self.value).then_some(self.value == 1.0)
    }
}

/// Whether a score is exactly 0 or 1.
pub(crate) fn is_binary(value: f64) -> bool {
    value == 0.0 || value == 1.0
}

/// A scorer could not score this answer (a judge that replied nonsense, or timed out): the
/// job fails; it is never scored 0.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ScoreError(pub String);

/// Scores answers.
pub trait Scorer: Send + Sync + std::fmt::Debug {
    /// Scores one whole answer to one case.
    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a>;
}

impl Scorer for super::Grader {
    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let grade = self.grade(&input.answer.text, &input.case.expected);
        Box::pin(std::future::ready(Ok(Score::binary(
            grade.correct,
            grade.extracted,
        ))))
    }
}
