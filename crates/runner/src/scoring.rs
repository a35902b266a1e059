//! An answer, whatever its source, into its job's record: the job's request rendered at
//! its lane, the answer scored (a refusal scores 0, a filtered answer is withheld, a
//! failure is a failed record), and the record marked with its endpoint and round. Every
//! answer — streamed, cached or batched — is recorded by one function, [`record`].

use std::sync::Arc;

use super::job_record::{FileNote, JobRecord, JobStatus};
use super::lane::{Lane, Rendered, RunOptions, job_key};
use super::source;
use promptgauge_client::{ChatMessage, JobRequest, JobResult, Usage};
use promptgauge_grade::{Answer, Score, ScoreContext, ScoreInput};
use promptgauge_suite::{Bench, Job};

/// How a job a worker asked its sources about ended, as far as the worker is concerned.
pub(super) enum JobEnd {
    /// Answered and scored.
    Record(Box<JobRecord>),
    /// A source took it and records it later (a provider batch).
    Later,
    /// The run stopped before it finished.
    Stopped,
}

/// Asks the sources for one job's answer and scores it.
pub(super) async fn run_job(
    bench: &Bench,
    job: &Job,
    request: &Rendered,
    sources: &[Arc<dyn source::AnswerSource>],
    lane: &Lane,
    options: &RunOptions,
) -> JobEnd {
    let ask = request.ask(lane, job);
    match source::answer(sources, &ask).await {
        source::SourceReply::Answer(answer) => score(bench, job, request, answer, lane, options)
            .await
            .map_or(JobEnd::Stopped, |r| JobEnd::Record(Box::new(r))),
        source::SourceReply::Later => JobEnd::Later,
        source::SourceReply::Pass => JobEnd::Stopped,
    }
}

/// Renders a job's request at its lane; a template that fails is the job's failed record.
pub(super) fn request_of(
    bench: &Bench,
    job: &Job,
    lane: &Lane,
    options: &RunOptions,
) -> Result<Rendered, Box<JobRecord>> {
    // A request carries its files' bytes, read now (and checked against the bench's load).
    let rendered = bench
        .render_job(job)
        .map_err(|e| format!("template failed: {e}"))
        .and_then(|mut m| promptgauge_suite::attachments::load_files(&mut m).map(|()| m));
    let messages = match rendered {
        Ok(m) => m,
        Err(e) => {
            let mut r = failed_record(bench, job, e, None);
            r.endpoint = lane.name.clone();
            r.resent = options.resend.get(&job.index).copied().unwrap_or(0);
            return Err(Box::new(r));
        }
    };
    let prompt_chars: usize = messages.iter().map(|m| m.content.chars().count()).sum();
    let reserve_tokens = bench
        .reservation(job.variant, &messages)
        .min(u64::from(u32::MAX)) as u32;
    Ok(Rendered {
        request: JobRequest {
            reserve_tokens,
            messages,
            params: bench.params_at(job.variant, &lane.params),
            idempotency_key: job_key(job, options),
        },
        prompt_chars,
        steps: Vec::new(),
    })
}

/// Scores an answer, whatever its source, into the job's record; `None` when the run was
/// stopped before it was scored (or the answer was aborted).
pub(super) async fn score(
    bench: &Bench,
    job: &Job,
    rendered: &Rendered,
    answer: source::Sourced,
    lane: &Lane,
    options: &RunOptions,
) -> Option<JobRecord> {
    if answer.result.aborted {
        return None;
    }
    let scoring = Scoring {
        scorers: &options.scorers,
        key: &rendered.request.idempotency_key,
        messages: &rendered.request.messages,
        prompt_chars: rendered.prompt_chars,
        context: &options.scoring,
        steps: &rendered.steps,
    };
    let mut r = record(bench, job, answer, &scoring).await?;
    r.steps = rendered.steps.clone();
    r.usage_anomaly = usage_anomaly(&r, bench.max_tokens_at(job.variant, &lane.params));
    // What the budget held for it (an agent loop is held step by step: not one figure).
    r.held = options
        .budget
        .as_ref()
        .filter(|_| r.turns.is_empty())
        .map(|b| {
            b.prices().held(
                bench,
                job,
                &rendered.request.messages,
                options.scorers[job.case].as_ref(),
                r.cached,
            )
        });
    r.files = FileNote::of(&rendered.request.messages);
    r.endpoint = lane.name.clone();
    r.resent = options.resend.get(&job.index).copied().unwrap_or(0);
    Some(r)
}

/// Usage no request of this job could have produced: an attempt billed for more output
/// tokens than its `max_tokens` (reasoning included, as every protocol counts it). The
/// provider's word is what is spent; this says it cannot be right.
fn usage_anomaly(r: &JobRecord, max_tokens: Option<u64>) -> Option<String> {
    let max = max_tokens?;
    // Only what the provider reported: an estimate (no usage sent) is no accounting.
    let most = r
        .billed()
        .iter()
        .filter(|u| !u.estimated)
        .map(|u| u.completion_tokens)
        .max()?;
    (most > max).then(|| {
        format!(
            "the provider billed {most} output tokens for a request capped at max_tokens {max}: a provider accounting anomaly"
        )
    })
}

/// What scoring a job needs besides its answer.
struct Scoring<'a> {
    scorers: &'a promptgauge_grade::Scorers,
    key: &'a str,
    messages: &'a [ChatMessage],
    prompt_chars: usize,
    context: &'a ScoreContext,
    steps: &'a [promptgauge_suite::tools::ToolStep],
}

pub(super) fn failed_record(
    bench: &Bench,
    job: &Job,
    error: String,
    result: Option<JobResult>,
) -> JobRecord {
    let case = &bench.cases[job.case];
    let (attempts, partial, model, answer_ms) = match result {
        Some(r) => (
            r.attempts,
            Some(r.text).filter(|t| !t.is_empty()),
            r.model,
            r.answer_ms,
        ),
        None => (Vec::new(), None, None, None),
    };
    JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        endpoint: None,
        repeat: job.repeat,
        status: JobStatus::Failed,
        outcome: attempts.last().map(|a| a.outcome),
        output: String::new(),
        partial_output: partial,
        reasoning: String::new(),
        finish_reason: None,
        tool_calls: Vec::new(),
        expected: case.expected.clone(),
        read: None,
        extracted: None,
        not_found: None,
        correct: None,
        score: None,
        score_detail: None,
        parts: Vec::new(),
        judge: Vec::new(),
        judge_usage: None,
        error: Some(error),
        attempts,
        ttft_ms: None,
        latency_ms: None,
        answer_ms,
        usage: Usage::default(),
        model,
        tags: case.tags.clone(),
        group: case.group.clone(),
        cached: false,
        resent: 0,
        batch: None,
        refused: false,
        usage_anomaly: None,
        held: None,
        files: Vec::new(),
        steps: Vec::new(),
        turns: Vec::new(),
    }
}

/// The record of a finished job, whatever source answered it; `None` when the run stopped
/// before it was scored.
async fn record(
    bench: &Bench,
    job: &Job,
    answer: source::Sourced,
    s: &Scoring<'_>,
) -> Option<JobRecord> {
    let result = answer.result;
    if answer.cached {
        // Kept only when it came whole: it is scored as the complete answer it was.
        let mut r = graded_record(bench, job, result, s).await?;
        r.cached = true;
        r.outcome = Some(promptgauge_client::Outcome::Complete);
        return Some(r);
    }
    if result.filtered() {
        let error = result
            .attempts
            .last()
            .and_then(|a| a.error.clone())
            .unwrap_or_else(|| "the provider withheld the answer".to_string());
        let finish = result.finish_reason.clone();
        let mut r = failed_record(bench, job, error, Some(result));
        r.status = JobStatus::Filtered;
        r.finish_reason = finish;
        return Some(r);
    }
    if !result.answered() {
        let error = result
            .failure
            .clone()
            .unwrap_or_else(|| "no answer".to_string());
        return Some(failed_record(bench, job, error, Some(result)));
    }
    graded_record(bench, job, result, s).await
}

/// Scores an answer known to be whole (streamed to its finish_reason, or cached); `None`
/// when the run stopped while a judge was being asked.
///
/// A refusal, on any protocol, is an answer that failed with the cause `refused`: score 0,
/// never passed to the scorer (a refusal that happens to contain the expected words is no
/// pass), its words the output. It stays in every figure, so a variant that makes the
/// model refuse scores lower; leaving it out, as a filtered answer is, would raise it
/// (docs/dev/design-notes.md, "Client", on refusals).
async fn graded_record(
    bench: &Bench,
    job: &Job,
    result: JobResult,
    s: &Scoring<'_>,
) -> Option<JobRecord> {
    let case = &bench.cases[job.case];
    let refused = result.refusal.is_some();
    let answer = Answer {
        text: match result.refusal {
            Some(said) if !said.is_empty() => said,
            _ => result.text,
        },
        raw: None,
        reasoning: result.reasoning,
        finish_reason: result.finish_reason,
        tool_calls: result.tool_calls,
        steps: s.steps.to_vec(),
    };
    // The variant's reading (`extract:`) comes first: the scorer sees what it read, and an
    // answer it finds nothing in is wrong, never scored on its raw text.
    let reading = bench.variants[job.variant]
        .extract
        .as_ref()
        .filter(|_| !refused);
    let read = reading.map(|x| promptgauge_grade::read::read(x, &answer.text, &case.vars));
    let scored = match &read {
        _ if refused => Ok(refusal_score()),
        Some(Err(nothing)) => Ok(nothing_read_score(nothing, bench, case)),
        Some(Ok(text)) => {
            let seen = Answer {
                text: text.clone(),
                raw: Some(answer.text.clone()),
                ..answer.clone()
            };
            score_one(job, case, &seen, s).await
        }
        None => score_one(job, case, &answer, s).await,
    };
    let answered = Answered {
        usage: result.usage,
        attempts: result.attempts,
        answer_ms: result.answer_ms,
        model: result.model,
    };
    let mut r = match scored {
        Ok(score) => graded_of(bench, job, answer, answered, score, refused, s),
        Err(e) if e.stopped => return None,
        Err(e) => unscored_record(bench, job, answer, answered, e, s),
    };
    match read {
        Some(Ok(text)) => r.read = Some(text),
        Some(Err(_)) => r.not_found = reading.map(|x| x.looks_for()),
        None => {}
    }
    Some(r)
}

/// One answer (the whole, or what the variant read of it) through the case's scorer.
async fn score_one(
    job: &Job,
    case: &promptgauge_suite::Case,
    answer: &Answer,
    s: &Scoring<'_>,
) -> Result<Score, promptgauge_grade::ScoreError> {
    let input = ScoreInput {
        key: s.key,
        repeat: job.repeat,
        case,
        messages: s.messages,
        answer,
    };
    s.scorers[job.case].score(input, s.context).await
}

/// The score of an answer the variant's reading found nothing in: 0, each of the score's
/// parts 0, the scorer never asked (a judge is not paid to judge a format mismatch), and
/// why in its detail.
fn nothing_read_score(
    nothing: &promptgauge_grade::read::NothingRead,
    bench: &Bench,
    case: &promptgauge_suite::Case,
) -> Score {
    use promptgauge_grade::SpecExt;
    let spec = case.grade.as_ref().unwrap_or(&bench.grade);
    Score {
        value: 0.0,
        extracted: None,
        usage: None,
        detail: Some(serde_json::json!({
            "error": format!("the variant's extract: found nothing: {}", nothing.0)
        })),
        judge: Vec::new(),
        parts: spec
            .part_names(case)
            .into_iter()
            .map(|name| (name, 0.0))
            .collect(),
    }
}

/// The record of a whole answer and its score.
fn graded_of(
    bench: &Bench,
    job: &Job,
    answer: Answer,
    answered: Answered,
    score: Score,
    refused: bool,
    s: &Scoring<'_>,
) -> JobRecord {
    let case = &bench.cases[job.case];
    let last = answered.attempts.last();
    let usage = answered
        .usage
        .unwrap_or_else(|| Usage::estimate(s.prompt_chars, &answer.text, &answer.reasoning));
    JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        endpoint: None,
        repeat: job.repeat,
        status: JobStatus::Graded,
        outcome: last.map(|a| a.outcome),
        ttft_ms: last.and_then(|a| a.ttft_ms),
        latency_ms: last.map(|a| a.latency_ms),
        answer_ms: answered.answer_ms,
        output: answer.text,
        partial_output: None,
        reasoning: answer.reasoning,
        finish_reason: answer.finish_reason,
        tool_calls: answer.tool_calls,
        expected: case.expected.clone(),
        correct: None,
        score: Some(score.value),
        score_detail: score.detail,
        parts: score
            .parts
            .into_iter()
            .map(|(name, score)| crate::job_record::PartScore { name, score })
            .collect(),
        judge: score.judge,
        judge_usage: score.usage,
        not_found: s.scorers[job.case]
            .looks_for(case)
            .filter(|_| score.extracted.is_none() && !refused)
            .map(String::from),
        read: None,
        extracted: score.extracted,
        error: None,
        attempts: answered.attempts,
        usage,
        model: answered.model,
        tags: case.tags.clone(),
        group: case.group.clone(),
        cached: false,
        resent: 0,
        batch: None,
        refused,
        usage_anomaly: None,
        held: None,
        files: Vec::new(),
        steps: Vec::new(),
        turns: Vec::new(),
    }
}

/// A refusal's score: 0, never asked of the scorer.
fn refusal_score() -> Score {
    Score {
        value: 0.0,
        extracted: None,
        usage: None,
        detail: Some(serde_json::json!({"refused": true})),
        judge: Vec::new(),
        parts: Vec::new(),
    }
}

/// What a whole answer came with besides its words.
struct Answered {
    usage: Option<Usage>,
    attempts: Vec<promptgauge_client::Attempt>,
    answer_ms: Option<f64>,
    model: Option<String>,
}

/// The failed record of an answer that arrived whole but could not be scored: it keeps
/// what the answer cost and took, and the judge's calls.
fn unscored_record(
    bench: &Bench,
    job: &Job,
    answer: Answer,
    answered: Answered,
    e: promptgauge_grade::ScoreError,
    s: &Scoring<'_>,
) -> JobRecord {
    let mut failed = failed_record(bench, job, format!("could not be scored: {e}"), None);
    failed.usage = answered
        .usage
        .unwrap_or_else(|| Usage::estimate(s.prompt_chars, &answer.text, &answer.reasoning));
    failed.ttft_ms = answered.attempts.last().and_then(|a| a.ttft_ms);
    failed.latency_ms = answered.attempts.last().map(|a| a.latency_ms);
    failed.answer_ms = answered.answer_ms;
    failed.model = answered.model;
    failed.attempts = answered.attempts;
    failed.partial_output = Some(answer.text).filter(|t| !t.is_empty());
    failed.judge = e.judge;
    failed.judge_usage = e.usage;
    failed
}
