//! The `embedding` scorer: the cosine similarity of the answer and the expected answer
//! through an OpenAI-compatible `/v1/embeddings`, passing at a threshold (docs/guide/scorers.md).
//! Each call is journaled with the job as a judge's is (what was embedded, the similarity,
//! its tokens) and, with `--cache`, each text's vector is kept and never bought twice; an
//! expected answer is embedded once per run however many variants are scored against it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::scorer::{
    Calls, CaseError, JudgeCall, Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer,
};
use crate::client::cache::{self, Cache};
use crate::client::{ChatMessage, Client, Usage};
use crate::suite::Case;

/// Where an `embedding` scorer's vectors come from: an endpoint of the run and a model.
pub struct EmbeddingService {
    pub client: Arc<Client>,
    pub model: String,
    /// The endpoint as the user named it, for cache keys.
    pub endpoint: String,
    /// `--cache`: vectors already paid for.
    pub cache: Option<Arc<Mutex<Cache>>>,
    /// Expected answers' vectors, this run.
    references: Mutex<HashMap<String, Arc<Vec<f64>>>>,
    /// Requests in flight at once: the endpoint's capacity.
    gate: tokio::sync::Semaphore,
}

/// The services of a run, by the scorer's `endpoint` and `model` as written (`None`: the
/// run's endpoint, its model).
pub type EmbeddingServices = HashMap<(Option<String>, Option<String>), Arc<EmbeddingService>>;

impl EmbeddingService {
    pub fn new(
        client: Arc<Client>,
        model: String,
        endpoint: String,
        cache: Option<Arc<Mutex<Cache>>>,
    ) -> EmbeddingService {
        let gate = tokio::sync::Semaphore::new(client.capacity().max(1));
        EmbeddingService {
            client,
            model,
            endpoint,
            cache,
            references: Mutex::new(HashMap::new()),
            gate,
        }
    }

    fn cache_key(&self, text: &str) -> String {
        cache::key(
            &self.endpoint,
            &self.model,
            &[ChatMessage::new("embedding", text)],
            &serde_json::Map::new(),
            0,
        )
    }

    fn cached(&self, text: &str) -> Option<Vec<f64>> {
        let c = self.cache.as_ref()?.lock().ok()?;
        let hit = c.get(&self.cache_key(text))?;
        serde_json::from_str(&hit.text).ok()
    }

    fn keep(&self, text: &str, vector: &[f64], usage: Option<Usage>) {
        if let Some(c) = &self.cache
            && let Ok(mut c) = c.lock()
        {
            let _ = c.put(cache::CachedAnswer {
                key: self.cache_key(text),
                text: serde_json::to_string(vector).unwrap_or_default(),
                reasoning: String::new(),
                tool_calls: Vec::new(),
                finish_reason: Some("embedding".into()),
                usage,
                model: Some(self.model.clone()),
            });
        }
    }

    /// The vectors of `answer` and of each of `references`, and the call that fetched what
    /// was not known (its usage, attempts and latency; `cached` when nothing was sent).
    async fn vectors(
        &self,
        answer: &str,
        references: &[String],
    ) -> Result<(Vec<Arc<Vec<f64>>>, JudgeCall), JudgeCall> {
        let texts: Vec<&str> = std::iter::once(answer)
            .chain(references.iter().map(String::as_str))
            .collect();
        let mut known: Vec<Option<Arc<Vec<f64>>>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let memo = (i > 0)
                    .then(|| self.references.lock().ok()?.get(*t).cloned())
                    .flatten();
                memo.or_else(|| self.cached(t).map(Arc::new))
            })
            .collect();
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| known[i].is_none()).collect();
        let mut call = JudgeCall {
            cached: missing.is_empty(),
            ..JudgeCall::new(
                0,
                texts
                    .iter()
                    .map(|t| ChatMessage::new("embedding", *t))
                    .collect(),
            )
        };
        if !missing.is_empty() {
            // Each text once (an answer that is its expected answer word for word).
            let mut asked: Vec<String> = Vec::new();
            for &i in &missing {
                if !asked.iter().any(|a| a == texts[i]) {
                    asked.push(texts[i].to_string());
                }
            }
            let _permit = self.gate.acquire().await;
            match self.client.embed(&self.model, &asked).await {
                Ok(got) => {
                    call.usage = got.usage;
                    call.attempts = got.attempts;
                    call.latency_ms = Some(got.latency_ms);
                    for (text, v) in asked.iter().zip(got.vectors) {
                        self.keep(text, &v, None);
                        let v = Arc::new(v);
                        for &i in &missing {
                            if texts[i] == text {
                                known[i] = Some(v.clone());
                            }
                        }
                    }
                }
                Err(e) => {
                    call.attempts = e.attempts;
                    call.status = e.status;
                    call.error = Some(if e.stopped {
                        "the run stopped".to_string()
                    } else {
                        e.message
                    });
                    return Err(call);
                }
            }
        }
        let vectors: Vec<Arc<Vec<f64>>> = known.into_iter().flatten().collect();
        if let Ok(mut memo) = self.references.lock() {
            for (t, v) in texts.iter().zip(&vectors).skip(1) {
                memo.entry((*t).to_string()).or_insert_with(|| v.clone());
            }
        }
        Ok((vectors, call))
    }
}

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
pub struct Embedding {
    pub threshold: f64,
    /// The spec's `endpoint` and `model`, as written: which service it asks.
    pub service: (Option<String>, Option<String>),
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
