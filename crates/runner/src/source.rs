//! Where a job's answer comes from. A lane's workers ask its sources in order — the
//! response cache (`--cache`), then any others a run adds, then the one that buys: the
//! streamed client ([`Live`]), or in a batch lane the provider's batch
//! (`batch::BatchSource`) — and the first that has an answer gives it; every source then
//! hears the answer, so the cache keeps what the client bought. A source may also take a
//! job and answer it later ([`SourceReply::Later`]: a provider batch, which answers when the batch
//! ends); it then records the answer itself, through the same function. Whatever its
//! source, an answer is scored and recorded by one function (`scoring.rs`'s `record`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use promptgauge_client::cache::{self, Cache};
use promptgauge_client::{Client, JobRequest, JobResult, Outcome};
use promptgauge_suite::Job;

/// What a source is asked: the request as the client would send it, and what else
/// determines its answer.
pub struct Ask<'a> {
    /// The job asking: a source that answers later says which job the answer is for, and
    /// its repeat index keeps repeats separate samples, never one answer reused.
    pub job: Job,
    pub request: &'a JobRequest,
    /// The model the run asks (part of what determines the answer).
    pub model: &'a str,
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

/// What a source says when asked.
#[allow(
    clippy::large_enum_variant,
    reason = "one lives for a moment per job, moved once: boxing would cost an allocation each"
)]
pub enum SourceReply {
    /// Its answer (a source that tried and failed answers with the failure).
    Answer(Sourced),
    /// It has none (a cache miss): the next source is asked.
    Pass,
    /// It took the job and will record its answer itself, later (a provider's batch,
    /// when the batch ends): the worker goes on to its next job.
    Later,
}

impl From<Option<Sourced>> for SourceReply {
    fn from(answer: Option<Sourced>) -> SourceReply {
        answer.map_or(SourceReply::Pass, SourceReply::Answer)
    }
}

/// A future a source returns.
pub type SourceFuture<'a> = Pin<Box<dyn Future<Output = SourceReply> + Send + 'a>>;

/// A place answers come from.
pub trait AnswerSource: Send + Sync {
    /// What this source says to `ask`: its answer, none (the next source is asked), or
    /// that it took the job and answers later.
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a>;

    /// Hears the answer the job got (from whichever source): a source that keeps answers
    /// keeps it here.
    fn heard(&self, ask: &Ask<'_>, answer: &Sourced) {
        let _ = (ask, answer);
    }

    /// Told when every worker of the lane waits (on the sequential tests, or has no job
    /// left): nothing more is coming until something is answered, so a source that
    /// gathers jobs (a provider batch) sends what it holds.
    fn idle(&self) {}
}

/// Asks `sources` in order; every source hears an answer given now. `Pass` when none
/// answered (nor took the job).
pub(crate) async fn answer(sources: &[Arc<dyn AnswerSource>], ask: &Ask<'_>) -> SourceReply {
    for source in sources {
        match source.answer(ask).await {
            SourceReply::Pass => continue,
            SourceReply::Answer(answer) => {
                heard(sources, ask, &answer);
                return SourceReply::Answer(answer);
            }
            SourceReply::Later => return SourceReply::Later,
        }
    }
    SourceReply::Pass
}

/// Tells every source the answer a job got (from one of them, or from a provider's batch).
pub(crate) fn heard(sources: &[Arc<dyn AnswerSource>], ask: &Ask<'_>, answer: &Sourced) {
    for s in sources {
        s.heard(ask, answer);
    }
}

/// The streamed client: it always answers (with the failure, when every attempt failed).
pub(crate) struct Live(pub Arc<Client>);

impl AnswerSource for Live {
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a> {
        Box::pin(async move {
            SourceReply::Answer(Sourced {
                result: self.0.execute(ask.request).await,
                cached: false,
            })
        })
    }
}

/// `--cache`: complete answers already paid for, keyed on the endpoint as the user named it,
/// the model, the rendered messages, the parameters and the repeat index.
pub(crate) struct Cached {
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
                ask.job.repeat,
            )
        })
    }
}

impl Cached {
    /// Whether it holds the answer to `ask` (nothing to buy).
    pub(crate) fn holds(&self, ask: &Ask<'_>) -> bool {
        let key = self.key(ask);
        self.cache.lock().is_ok_and(|c| c.get(key).is_some())
    }
}

impl AnswerSource for Cached {
    fn answer<'a>(&'a self, ask: &'a Ask<'a>) -> SourceFuture<'a> {
        let key = self.key(ask);
        let hit = self.cache.lock().ok().and_then(|c| c.get(key).cloned());
        Box::pin(async move {
            let Some(answer) = hit else {
                return SourceReply::Pass;
            };
            SourceReply::Answer(Sourced {
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
