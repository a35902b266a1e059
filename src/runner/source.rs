//! Where a job's answer comes from. The runner asks its sources in order — the response
//! cache (`--cache`), then any others a run adds, then the streamed client — and the first
//! that has an answer gives it; every source then hears the answer, so the cache keeps what
//! the client bought. Whatever its source, an answer is scored and recorded by one function
//! (`scoring.rs`'s `record`). A batch lane (`batch/`) asks the same sources before it buys
//! anything and lets them all hear each batched answer ([`heard`]): its provider's batch
//! stands where the streamed client ([`Live`]) stands in a streaming lane.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use crate::client::cache::{self, Cache};
use crate::client::{Client, JobRequest, JobResult, Outcome};

/// What a source is asked: the request as the client would send it, and what else
/// determines its answer.
pub struct Ask<'a> {
    pub request: &'a JobRequest,
    /// The model the run asks (part of what determines the answer).
    pub model: &'a str,
    /// The job's repeat index: repeats are separate samples, never one answer reused.
    pub repeat: u32,
    /// The cache's key for this job, hashed once (the run's one cache asks for it when it
    /// looks the answer up and again when it keeps the answer another source bought).
    pub(crate) cache_key: std::sync::OnceLock<String>,
}

/// An answer, and whether it was already paid for (cached answers count in no latency
/// figure and cost nothing again).
pub struct Sourced {
    pub result: JobResult,
    pub cached: bool,
}

/// A future a source returns.
pub type SourceFuture<'a> = Pin<Box<dyn Future<Output = Option<Sourced>> + Send + 'a>>;

/// A place answers come from.
pub trait AnswerSource: Send + Sync {
    /// The answer to `ask`, or `None` when this source has none (a cache miss): the next
    /// source is asked. A source that tried and failed answers with the failure.
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a>;

    /// Hears the answer the job got (from whichever source): a source that keeps answers
    /// keeps it here.
    fn heard(&self, ask: &Ask<'_>, answer: &Sourced) {
        let _ = (ask, answer);
    }
}

/// Asks `sources` in order; every source hears the answer.
pub async fn answer(sources: &[Arc<dyn AnswerSource>], ask: &Ask<'_>) -> Option<Sourced> {
    for source in sources {
        if let Some(answer) = source.answer(ask).await {
            heard(sources, ask, &answer);
            return Some(answer);
        }
    }
    None
}

/// Tells every source the answer a job got (from one of them, or from a provider's batch).
pub fn heard(sources: &[Arc<dyn AnswerSource>], ask: &Ask<'_>, answer: &Sourced) {
    for s in sources {
        s.heard(ask, answer);
    }
}

/// The streamed client: it always answers (with the failure, when every attempt failed).
pub struct Live(pub Arc<Client>);

impl AnswerSource for Live {
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a> {
        Box::pin(async move {
            Some(Sourced {
                result: self.0.execute(ask.request).await,
                cached: false,
            })
        })
    }
}

/// `--cache`: complete answers already paid for, keyed on the endpoint as the user named it,
/// the model, the rendered messages, the parameters and the repeat index.
pub struct Cached {
    pub cache: Arc<Mutex<Cache>>,
    /// The endpoint as the user named it (not the simulator's port).
    pub endpoint: String,
}

impl Cached {
    fn key<'a>(&self, ask: &'a Ask<'_>) -> &'a str {
        ask.cache_key.get_or_init(|| {
            cache::key(
                &self.endpoint,
                ask.model,
                &ask.request.messages,
                &ask.request.params,
                ask.repeat,
            )
        })
    }
}

impl Cached {
    /// Whether it holds the answer to `ask` (nothing to buy).
    pub fn holds(&self, ask: &Ask<'_>) -> bool {
        let key = self.key(ask);
        self.cache.lock().is_ok_and(|c| c.get(key).is_some())
    }
}

impl AnswerSource for Cached {
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a> {
        let key = self.key(ask);
        let hit = self.cache.lock().ok().and_then(|c| c.get(key).cloned());
        Box::pin(async move {
            let answer = hit?;
            Some(Sourced {
                result: JobResult {
                    attempts: Vec::new(),
                    refusal: None,
                    text: answer.text,
                    reasoning: answer.reasoning,
                    tool_calls: answer.tool_calls,
                    finish_reason: answer.finish_reason,
                    usage: answer.usage,
                    model: answer.model,
                    answer_ms: None,
                    failure: None,
                    aborted: false,
                },
                cached: true,
            })
        })
    }

    /// Keeps a complete answer bought from elsewhere (never a truncated one, a refusal, nor a
    /// failure).
    fn heard(&self, ask: &Ask<'_>, answer: &Sourced) {
        let r = &answer.result;
        // A refusal is not kept: asked again, the model may answer.
        if answer.cached
            || !r.answered()
            || r.outcome() != Some(Outcome::Complete)
            || r.refusal.is_some()
        {
            return;
        }
        if let Ok(mut cache) = self.cache.lock() {
            // A cache that cannot be written only costs money later; the run goes on.
            let _ = cache.put(cache::CachedAnswer {
                key: self.key(ask).to_string(),
                text: r.text.clone(),
                reasoning: r.reasoning.clone(),
                tool_calls: r.tool_calls.clone(),
                finish_reason: r.finish_reason.clone(),
                usage: r.usage,
                model: r.model.clone(),
            });
        }
    }
}
