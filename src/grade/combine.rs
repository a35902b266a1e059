//! Scorers made of scorers: `all` (every one passes: the lowest score), `any` (one passes:
//! the highest) and `mean` (a weighted mean).

use std::sync::Arc;

use super::scorer::{CaseError, Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer};
use super::spec_error::SpecError;
use crate::client::Usage;
use crate::suite::Case;

/// How the parts' scores become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combine {
    All,
    Any,
    Mean,
}

/// Several scorers on one answer.
#[derive(Debug)]
pub(super) struct Combined {
    pub(crate) how: Combine,
    pub(crate) parts: Vec<Arc<dyn Scorer>>,
    /// For `mean`: one weight per part (all 1 when not given).
    pub(crate) weights: Vec<f64>,
}

/// `mean`'s weights: one per part of `parts` (all 1 when not `given`), none negative nor
/// all 0.
pub(crate) fn weights(given: Option<&[f64]>, parts: usize) -> Result<Vec<f64>, SpecError> {
    match given {
        None => Ok(vec![1.0; parts]),
        Some(w) if w.len() != parts => Err(SpecError::WeightCount {
            weights: w.len(),
            parts,
        }),
        Some(w) if w.iter().any(|x| !x.is_finite() || *x < 0.0) || w.iter().sum::<f64>() <= 0.0 => {
            Err(SpecError::Weights)
        }
        Some(w) => Ok(w.to_vec()),
    }
}

fn add_usage(total: &mut Option<Usage>, more: Option<Usage>) {
    if let Some(u) = more {
        let t = total.get_or_insert_with(Usage::default);
        t.prompt_tokens = t.prompt_tokens.saturating_add(u.prompt_tokens);
        t.completion_tokens = t.completion_tokens.saturating_add(u.completion_tokens);
        t.cached_tokens = t.cached_tokens.saturating_add(u.cached_tokens);
        t.reasoning_tokens = t.reasoning_tokens.saturating_add(u.reasoning_tokens);
        t.estimated |= u.estimated;
    }
}

impl Scorer for Combined {
    fn calls(
        &self,
        case: &Case,
        messages: &[crate::client::ChatMessage],
        answer_tokens: u64,
    ) -> super::scorer::Calls {
        self.parts
            .iter()
            .map(|p| p.calls(case, messages, answer_tokens))
            .fold(Default::default(), |a, b| a + b)
    }

    fn looks_for(&self, case: &Case) -> Option<&'static str> {
        // Its answer yields nothing only when every part's does: name what the parts look
        // for only when every part looks for the same thing.
        let wanted: Vec<Option<&'static str>> =
            self.parts.iter().map(|p| p.looks_for(case)).collect();
        match wanted.first() {
            Some(Some(first)) if wanted.iter().all(|w| *w == Some(*first)) => Some(first),
            _ => None,
        }
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a> {
        Box::pin(async move {
            let mut scores = Vec::with_capacity(self.parts.len());
            let mut judge = Vec::new();
            let mut usage = None;
            for part in &self.parts {
                match part.score(input, context).await {
                    Ok(s) => scores.push(s),
                    Err(mut e) => {
                        // One part could not score: neither can the whole.
                        judge.append(&mut e.judge);
                        add_usage(&mut usage, e.usage);
                        return Err(ScoreError {
                            message: e.message,
                            judge,
                            usage,
                            stopped: e.stopped,
                        });
                    }
                }
            }
            let values: Vec<f64> = scores.iter().map(|s| s.value).collect();
            let value = match self.how {
                Combine::All => values.iter().copied().fold(1.0, f64::min),
                Combine::Any => values.iter().copied().fold(0.0, f64::max),
                Combine::Mean => {
                    let total: f64 = self.weights.iter().sum();
                    values
                        .iter()
                        .zip(&self.weights)
                        .map(|(v, w)| v * w)
                        .sum::<f64>()
                        / total
                }
            };
            let extracted: Vec<String> =
                scores.iter().filter_map(|s| s.extracted.clone()).collect();
            let detail = serde_json::json!({
                "of": scores.iter().map(|s| serde_json::json!({
                    "score": s.value,
                    "extracted": s.extracted,
                    "detail": s.detail,
                })).collect::<Vec<_>>()
            });
            for s in scores {
                judge.extend(s.judge);
                add_usage(&mut usage, s.usage);
            }
            Ok(Score {
                value,
                extracted: (!extracted.is_empty()).then(|| extracted.join(" | ")),
                usage,
                detail: Some(detail),
                judge,
            })
        })
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        self.parts.iter().try_for_each(|p| p.check(case))
    }

    fn uses_judge(&self) -> bool {
        self.parts.iter().any(|p| p.uses_judge())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grade::{Answer, GradeSpec, SpecExt};
    use crate::suite::FilePos;

    #[test]
    fn all_any_and_mean_combine_the_parts() {
        let case = Case {
            id: "c".into(),
            vars: Default::default(),
            expected: vec!["42".into()],
            expected_json: None,
            messages: vec![],
            files: Vec::new(),
            tool_script: Vec::new(),
            grade: None,
            tags: vec![],
            group: None,
            location: FilePos::line(std::path::Path::new("c.jsonl"), 1),
        };
        let number: Arc<dyn Scorer> =
            Arc::new(GradeSpec::Number { tolerance: 0.0 }.compile().unwrap());
        let exact: Arc<dyn Scorer> = Arc::new(GradeSpec::default().compile().unwrap());
        let answer = Answer {
            text: "It is 42.".into(),
            ..Answer::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let run = |how, weights: Vec<f64>| {
            let c = Combined {
                how,
                parts: vec![number.clone(), exact.clone()],
                weights,
            };
            rt.block_on(c.score(
                ScoreInput {
                    key: "k",
                    repeat: 0,
                    case: &case,
                    messages: &[],
                    answer: &answer,
                },
                &ScoreContext::default(),
            ))
            .unwrap()
        };
        assert_eq!(run(Combine::All, vec![1.0, 1.0]).value, 0.0);
        assert_eq!(run(Combine::Any, vec![1.0, 1.0]).value, 1.0);
        assert_eq!(run(Combine::Mean, vec![3.0, 1.0]).value, 0.75);
        let s = run(Combine::Mean, vec![1.0, 1.0]);
        assert_eq!(s.extracted.as_deref(), Some("42 | It is 42."));
        assert_eq!(s.detail.unwrap()["of"][0]["score"], 1.0);
    }
}
