//! What the run lends its scorers ([`ScoreContext`]): the judge model-graded scorers ask,
//! the services `embedding` scorers get their vectors from (each text's vector kept, and
//! bought once), and the run's stop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value};

use super::call::JudgeCall;
use promptgauge_client::cache::{self, Cache};
use promptgauge_client::{ChatMessage, Client, Usage};

/// What the run lends its scorers.
#[derive(Clone, Default)]
pub struct ScoreContext {
    /// The judge model-graded scorers ask, through its own client.
    pub judge: Option<Arc<JudgeService>>,
    /// Where `embedding` scorers get their vectors, by their `endpoint` and `model`.
    pub embeddings: EmbeddingServices,
    /// Cancelled when the run abandons its work in flight (a second Ctrl-C, the grace
    /// over): a scorer waiting on something of its own stops waiting.
    pub stop: Option<tokio_util::sync::CancellationToken>,
}

/// The judge a run lends its scorers: a client for the judge's endpoint and how to ask.
pub struct JudgeService {
    pub client: Arc<Client>,
    /// Request parameters (the judge block's, over `temperature: 0` and a JSON reply).
    pub params: Map<String, Value>,
    /// The judge's endpoint as the user named it, for cache keys.
    pub endpoint: String,
    /// `--cache`: judge replies already paid for.
    pub cache: Option<Arc<Mutex<Cache>>>,
}

/// Where an `embedding` scorer's vectors come from: an endpoint of the run and a model.
pub struct EmbeddingService {
    pub(crate) client: Arc<Client>,
    pub(crate) model: String,
    /// The endpoint as the user named it, for cache keys.
    pub(crate) endpoint: String,
    /// `--cache`: vectors already paid for.
    pub(crate) cache: Option<Arc<Mutex<Cache>>>,
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
    pub(super) async fn vectors(
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
