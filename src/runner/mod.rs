//! Dispatch: workers pull jobs from one queue, send them through the client, grade the
//! answers and hand records to the journal. The reporter only listens to events.

pub mod journal;
pub mod record;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use journal::{JobRecord, JobStatus, Journal};

use crate::client::{Client, JobRequest, JobResult, Usage};
use crate::suite::{Bench, Job};

/// What the reporter hears while a run goes on.
#[derive(Debug)]
pub enum RunEvent<'a> {
    JobFinished {
        record: &'a JobRecord,
        done: usize,
        total: usize,
    },
}

/// How a run ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunTally {
    pub finished: usize,
    pub graded: usize,
    pub failed: usize,
    /// Jobs never finished (stopped by Ctrl-C or a fatal provider error).
    pub not_run: usize,
}

/// Runs `jobs` with `workers` concurrent workers. `dispatch` stops new jobs from starting
/// (first Ctrl-C); the client's stop token aborts in-flight ones.
pub async fn run(
    bench: Arc<Bench>,
    jobs: Vec<Job>,
    client: Arc<Client>,
    journal: &mut Journal,
    run_id: &str,
    dispatch: CancellationToken,
    on_event: &mut dyn FnMut(RunEvent<'_>),
) -> std::io::Result<RunTally> {
    let total = jobs.len();
    let jobs = Arc::new(jobs);
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = mpsc::channel::<JobRecord>(256);
    let workers = client.config().concurrency.max(1).min(total.max(1));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (bench, jobs, next, client, tx, dispatch) = (
            bench.clone(),
            jobs.clone(),
            next.clone(),
            client.clone(),
            tx.clone(),
            dispatch.clone(),
        );
        let run_id = run_id.to_string();
        tasks.spawn(async move {
            let stop = client.stop_token();
            while !dispatch.is_cancelled() && !stop.is_cancelled() {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(i) else { break };
                let Some(record) = run_job(&bench, job, &client, &run_id).await else {
                    break;
                };
                if tx.send(record).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut tally = RunTally::default();
    while let Some(record) = rx.recv().await {
        journal.append(&record)?;
        tally.finished += 1;
        match record.status {
            JobStatus::Graded => tally.graded += 1,
            JobStatus::Failed => tally.failed += 1,
        }
        on_event(RunEvent::JobFinished {
            record: &record,
            done: tally.finished,
            total,
        });
    }
    while tasks.join_next().await.is_some() {}
    tally.not_run = total - tally.finished;
    Ok(tally)
}

/// Sends one job and grades its answer; `None` when the run was stopped before it finished.
async fn run_job(bench: &Bench, job: &Job, client: &Client, run_id: &str) -> Option<JobRecord> {
    let case = &bench.cases[job.case];
    let variant = &bench.variants[job.variant];
    let messages = match bench.templates.render(job.variant, case, variant) {
        Ok(m) => m,
        Err(e) => {
            return Some(failed_record(
                bench,
                job,
                format!("template failed: {e}"),
                None,
            ));
        }
    };
    let prompt_chars: usize = messages.iter().map(|m| m.content.chars().count()).sum();
    let reserve_tokens = bench
        .reservation(job.variant, &messages)
        .min(u64::from(u32::MAX)) as u32;
    let request = JobRequest {
        reserve_tokens,
        messages,
        params: bench.params_for(job.variant),
        idempotency_key: format!("pg-{run_id}-{}", job.index),
    };
    let result = client.execute(&request).await;
    if result.aborted {
        return None;
    }
    Some(record(bench, job, result, prompt_chars))
}

fn failed_record(bench: &Bench, job: &Job, error: String, result: Option<JobResult>) -> JobRecord {
    let case = &bench.cases[job.case];
    let (attempts, partial, model) = match result {
        Some(r) => (r.attempts, Some(r.text).filter(|t| !t.is_empty()), r.model),
        None => (Vec::new(), None, None),
    };
    JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        repeat: job.repeat,
        status: JobStatus::Failed,
        outcome: attempts.last().map(|a| a.outcome),
        output: String::new(),
        partial_output: partial,
        reasoning: String::new(),
        finish_reason: None,
        expected: case.expected.clone(),
        extracted: None,
        correct: None,
        error: Some(error),
        attempts,
        ttft_ms: None,
        latency_ms: None,
        usage: Usage::default(),
        model,
        tags: case.tags.clone(),
    }
}

fn record(bench: &Bench, job: &Job, result: JobResult, prompt_chars: usize) -> JobRecord {
    if !result.answered() {
        let error = result
            .failure
            .clone()
            .unwrap_or_else(|| "no answer".to_string());
        return failed_record(bench, job, error, Some(result));
    }
    let case = &bench.cases[job.case];
    let grade = bench.graders[job.case].grade(&result.text, &case.expected);
    let last = result.attempts.last();
    let usage = result
        .usage
        .unwrap_or_else(|| Usage::estimate(prompt_chars, &result.text, &result.reasoning));
    JobRecord {
        job: job.index,
        case_id: case.id.clone(),
        variant: bench.variants[job.variant].name.clone(),
        repeat: job.repeat,
        status: JobStatus::Graded,
        outcome: last.map(|a| a.outcome),
        ttft_ms: last.and_then(|a| a.ttft_ms),
        latency_ms: last.map(|a| a.latency_ms),
        output: result.text,
        partial_output: None,
        reasoning: result.reasoning,
        finish_reason: result.finish_reason,
        expected: case.expected.clone(),
        extracted: grade.extracted,
        correct: Some(grade.correct),
        error: None,
        attempts: result.attempts,
        usage,
        model: result.model,
        tags: case.tags.clone(),
    }
}
