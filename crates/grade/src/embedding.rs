//! The `embedding` scorer: the cosine similarity of the answer and the expected answer
//! through an OpenAI-compatible `/v1/embeddings`, passing at a threshold (docs/guide/scorers.md).
//! Each call is journaled with the job as a judge's is (what was embedded, the similarity,
//! its tokens) and, with `--cache`, each text's vector is kept and never bought twice; an
//! expected answer is embedded once per run however many variants are scored against it.

use serde_json::json;

pub use super::context::{EmbeddingService, EmbeddingServices};
use super::scorer::{
    Calls, CaseError, Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer,
};
use super::spec_error::SpecError;
use promptgauge_client::ChatMessage;
use promptgauge_suite::Case;

/// Why two vectors have no cosine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCosine {
    /// Their lengths differ.
    Lengths(usize, usize),
    /// The first (0) or the second (1) is all zeros (or not a number): it has no
    /// direction, so no angle to measure — a failed answer, never a similarity of 0.
    Zero(usize),
}

/// The cosine similarity of two vectors, to 12 decimals.
pub fn cosine(a: &[f64], b: &[f64]) -> Result<f64, NoCosine> {
    if a.len() != b.len() {
        return Err(NoCosine::Lengths(a.len(), b.len()));
    }
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let (na, nb) = (norm(a), norm(b));
    if !(na > 0.0 && na.is_finite()) {
        return Err(NoCosine::Zero(0));
    }
    if !(nb > 0.0 && nb.is_finite()) {
        return Err(NoCosine::Zero(1));
    }
    // Rounded at 1e-12: a text against itself is 1, not 0.9999999999999998 (a threshold
    // of 1 then means "the same meaning", as written).
    Ok(((dot / (na * nb)).clamp(-1.0, 1.0) * 1e12).round() / 1e12)
}

/// The scorer: passes when the answer's similarity to an expected answer reaches
/// `threshold`.
#[derive(Debug)]
pub(crate) struct Embedding {
    pub(crate) threshold: f64,
    /// The spec's `endpoint` and `model`, as written: which service it asks.
    pub(crate) service: (Option<String>, Option<String>),
}

impl Embedding {
    /// An `embedding` scorer: `threshold` a cosine similarity, `endpoint` and `model` (when
    /// given) naming something.
    pub(crate) fn new(
        threshold: f64,
        endpoint: Option<&str>,
        model: Option<&str>,
    ) -> Result<Embedding, SpecError> {
        if !threshold.is_finite() || !(-1.0..=1.0).contains(&threshold) {
            return Err(SpecError::Threshold(threshold));
        }
        if model.is_some_and(|m| m.trim().is_empty())
            || endpoint.is_some_and(|e| e.trim().is_empty())
        {
            return Err(SpecError::Reading(
                "`model` and `endpoint` name something when given: leave them out to use the run's endpoint and its model".into(),
            ));
        }
        Ok(Embedding {
            threshold,
            service: (endpoint.map(String::from), model.map(String::from)),
        })
    }
}

impl Scorer for Embedding {
    fn check(&self, case: &Case) -> Result<(), CaseError> {
        if case.expected.iter().all(|e| e.trim().is_empty()) {
            return Err(CaseError::NothingToEmbed);
        }
        Ok(())
    }

    fn calls(&self, case: &Case, _: &[ChatMessage], answer_tokens: u64) -> Calls {
        let expected: u64 = case
            .expected
            .iter()
            .map(|e| e.chars().count().div_ceil(4) as u64)
            .sum();
        Calls {
            count: 0,
            prompt_tokens: answer_tokens + expected,
        }
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a> {
        Box::pin(async move {
            let Some(service) = context.embeddings.get(&self.service) else {
                return Err(ScoreError::new(
                    "no embeddings endpoint is configured for this run",
                ));
            };
            let (vectors, mut call) = service
                .vectors(&input.answer.text, &input.case.expected)
                .await
                .map_err(|call| {
                    let stopped = call.error.as_deref() == Some("the run stopped");
                    ScoreError {
                        message: format!(
                            "the embeddings call failed: {}",
                            call.error.clone().unwrap_or_default()
                        ),
                        usage: call.usage,
                        judge: vec![call],
                        stopped,
                    }
                })?;
            let answer = &vectors[0];
            let mut best: Option<(usize, f64)> = None;
            for (i, v) in vectors[1..].iter().enumerate() {
                let s = match cosine(answer, v) {
                    Ok(s) => s,
                    Err(NoCosine::Lengths(a, b)) => {
                        return Err(ScoreError::new(format!(
                            "the embeddings have different lengths ({a} and {b}): the model changed mid-run, or the cache holds another model's"
                        )));
                    }
                    Err(NoCosine::Zero(which)) => {
                        let whose = if which == 0 {
                            "the answer's".to_string()
                        } else {
                            format!("expected answer {}'s", i + 1)
                        };
                        return Err(ScoreError {
                            message: format!(
                                "{whose} embedding is all zeros: it has no direction, so no similarity (an answer with no words, or an embeddings server that returned no vector); the answer is failed, not scored 0"
                            ),
                            usage: call.usage,
                            judge: vec![call],
                            stopped: false,
                        });
                    }
                };
                if best.is_none_or(|(_, b)| s > b) {
                    best = Some((i, s));
                }
            }
            let (closest, similarity) = best.unwrap_or((0, 0.0));
            let pass = similarity >= self.threshold;
            call.score = Some(if pass { 1.0 } else { 0.0 });
            call.reply = format!(
                "cosine similarity {similarity:.4} (threshold {})",
                self.threshold
            );
            let usage = call.usage;
            Ok(Score {
                value: if pass { 1.0 } else { 0.0 },
                extracted: None,
                usage,
                detail: Some(json!({
                    "similarity": similarity,
                    "threshold": self.threshold,
                    "closest": input.case.expected.get(closest),
                    "model": service.model,
                })),
                judge: vec![call],
                parts: Vec::new(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_is_the_angle_and_refuses_vectors_of_different_lengths() {
        assert_eq!(cosine(&[1.0, 0.0], &[2.0, 0.0]), Ok(1.0));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), Ok(0.0));
        assert_eq!(cosine(&[1.0, 1.0], &[-1.0, -1.0]), Ok(-1.0));
        assert!((cosine(&[1.0, 1.0], &[1.0, 0.0]).unwrap() - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), Err(NoCosine::Zero(0)));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 0.0]), Err(NoCosine::Zero(1)));
        assert_eq!(
            cosine(&[f64::NAN, 0.0], &[1.0, 0.0]),
            Err(NoCosine::Zero(0))
        );
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), Err(NoCosine::Lengths(1, 2)));
    }
}
