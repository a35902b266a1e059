//! A job that drives tools (docs/guide/tools.md): ask; run each call the answer makes
//! against the case's script and give the results back as the protocol expects; ask again
//! — until the model answers without a call, or a limit of `loop:` is reached (a named
//! cause, never a graded answer). Each step is its own logical request with its own
//! idempotency key (the job's, then `-step1`, `-step2`, …), so the cache and a provider's
//! deduplication see steps; the record holds the trajectory, and its usage, attempts and
//! time summed over the steps.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::job_record::{JobRecord, ToolStep};
use super::lane::{Lane, Rendered, RunOptions};
use super::scoring::{JobEnd, failed_record, score};
use super::source;
use crate::client::{ChatMessage, JobResult, ToolCall, Usage};
use crate::suite::tools::{ToolReply, reply};
use crate::suite::{Bench, Job};

/// What the steps so far add up to.
#[derive(Default)]
struct Trail {
    steps: Vec<ToolStep>,
    attempts: Vec<crate::client::Attempt>,
    usage: Option<Usage>,
    answer_ms: Option<f64>,
    calls: u32,
}

impl Trail {
    /// Adds one step's answer.
    fn add(&mut self, result: &mut JobResult) {
        self.attempts.append(&mut result.attempts);
        if let Some(u) = result.usage {
            let sum = self.usage.get_or_insert_with(Usage::default);
            sum.add_tokens(&u);
            sum.estimated |= u.estimated;
        }
        if let Some(ms) = result.answer_ms {
            *self.answer_ms.get_or_insert(0.0) += ms;
        }
    }

    /// `result` (the last step's) carrying the whole loop's attempts, usage and time.
    fn onto(&mut self, mut result: JobResult) -> JobResult {
        self.add(&mut result);
        result.attempts = std::mem::take(&mut self.attempts);
        result.usage = self.usage;
        result.answer_ms = self.answer_ms;
        result
    }
}

/// Runs `job`'s loop; its first request is `first`.
pub(super) async fn run_loop(
    bench: &Bench,
    job: &Job,
    first: &Rendered,
    sources: &[Arc<dyn source::AnswerSource>],
    lane: &Lane,
    options: &RunOptions,
) -> JobEnd {
    let limits = bench.loop_limits;
    let mut trail = Trail::default();
    let mut step = Rendered {
        request: first.request.clone(),
        prompt_chars: first.prompt_chars,
        steps: Vec::new(),
    };
    for turn in 0..limits.max_turns {
        if turn > 0 {
            step.request.idempotency_key = format!("{}-step{turn}", first.request.idempotency_key);
        }
        let ask = step.ask(lane, job);
        let mut answer = match source::answer(sources, &ask).await {
            source::SourceReply::Answer(a) => a,
            // A batch never answers a loop (refused before the run); nothing else waits.
            source::SourceReply::Later | source::SourceReply::Pass => return JobEnd::Stopped,
        };
        if answer.result.aborted {
            return JobEnd::Stopped;
        }
        if !answer.result.answered() || answer.result.tool_calls.is_empty() {
            // The answer, or the failure, that ends the loop.
            answer.result = trail.onto(answer.result);
            step.steps = std::mem::take(&mut trail.steps);
            let scored = score(bench, job, &step, answer, lane, options).await;
            return scored.map_or(JobEnd::Stopped, |r| JobEnd::Record(Box::new(r)));
        }
        let mut result = answer.result;
        trail.add(&mut result);
        let calls = named(&result.tool_calls, turn);
        step.request
            .messages
            .push(assistant_turn(&result.text, &calls));
        if let Err(cause) = run_calls(bench, job, &mut trail, &mut step, &calls, turn).await {
            return ended(bench, job, lane, options, trail, cause, result);
        }
    }
    let cause = format!(
        "turn limit reached ({} requests, loop.max_turns)",
        limits.max_turns
    );
    ended(
        bench,
        job,
        lane,
        options,
        trail,
        cause,
        JobResult::default(),
    )
}

/// Runs one answer's `calls` against the case's script, each result added to the
/// conversation and the trajectory; the cause that ends the loop, if one does (the call
/// limit, an unscripted call).
async fn run_calls(
    bench: &Bench,
    job: &Job,
    trail: &mut Trail,
    step: &mut Rendered,
    calls: &[ToolCall],
    turn: u32,
) -> Result<(), String> {
    let case = &bench.cases[job.case];
    let most = bench.loop_limits.max_tool_calls;
    for call in calls {
        trail.calls += 1;
        if trail.calls > most {
            return Err(format!(
                "tool call limit reached ({most} calls, loop.max_tool_calls)"
            ));
        }
        let program = bench
            .tools
            .iter()
            .find(|t| t.name == call.name && !t.run.is_empty());
        let answered = match program {
            Some(tool) => {
                let dir = bench.path.parent().unwrap_or(std::path::Path::new("."));
                super::tool_program::call(tool, dir, case, &call.arguments).await
            }
            None => reply(&bench.tools, &case.tool_script, &call.name, &call.arguments),
        };
        let (text, error) = match answered {
            ToolReply::Result(t) => (t, false),
            ToolReply::Error(e) => (e, true),
            ToolReply::Failed(cause) => return Err(cause),
        };
        trail.steps.push(ToolStep {
            turn,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            result: text.clone(),
            error,
        });
        step.request.messages.push(tool_turn(&call.id, &text));
    }
    Ok(())
}

/// The failed record of a loop a limit or an unscripted call ended: its cause, and what
/// its steps cost.
fn ended(
    bench: &Bench,
    job: &Job,
    lane: &Lane,
    options: &RunOptions,
    mut trail: Trail,
    cause: String,
    last: JobResult,
) -> JobEnd {
    let usage = trail.usage;
    let result = trail.onto(JobResult {
        attempts: Vec::new(),
        usage: None,
        answer_ms: None,
        ..last
    });
    let mut r: JobRecord = failed_record(bench, job, cause, Some(result));
    r.usage = usage.unwrap_or_default();
    r.steps = trail.steps;
    r.endpoint = lane.name.clone();
    r.resent = options.resend.get(&job.index).copied().unwrap_or(0);
    JobEnd::Record(Box::new(r))
}

/// The calls with an id each (a server that gave none gets `call_TURN_I`, which the tool
/// results then answer).
fn named(calls: &[ToolCall], turn: u32) -> Vec<ToolCall> {
    calls
        .iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: if c.id.is_empty() {
                format!("call_{turn}_{i}")
            } else {
                c.id.clone()
            },
            ..c.clone()
        })
        .collect()
}

/// The assistant's turn that made `calls`, as a case's history writes one (each protocol
/// sends it in its own form).
fn assistant_turn(text: &str, calls: &[ToolCall]) -> ChatMessage {
    let calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
        .collect();
    let mut extra = Map::new();
    extra.insert("tool_calls".into(), Value::Array(calls));
    ChatMessage {
        role: "assistant".into(),
        content: text.to_string(),
        files: Vec::new(),
        extra,
    }
}

/// A tool's result for the call `id`.
fn tool_turn(id: &str, text: &str) -> ChatMessage {
    let mut extra = Map::new();
    extra.insert("tool_call_id".into(), json!(id));
    ChatMessage {
        role: "tool".into(),
        content: text.to_string(),
        files: Vec::new(),
        extra,
    }
}
