//! A job that drives tools (docs/guide/tools.md): ask; run each call the answer makes
//! against the case's script and give the results back as the protocol expects; ask again
//! — until the model answers without a call, or a limit of `loop:` is reached (a named
//! cause, never a graded answer). Each step is its own logical request with its own
//! idempotency key (the job's, then `-step1`, `-step2`, …), so the cache and a provider's
//! deduplication see steps; the record holds the trajectory, and its usage, attempts and
//! time summed over the steps.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::job_record::{JobRecord, LoopTurn, StepLine, ToolStep};
use super::lane::{Lane, Message, Rendered, RunOptions};
use super::scoring::{JobEnd, failed_record, score};
use super::source;
use promptgauge_client::{ChatMessage, JobResult, ToolCall, Usage};
use promptgauge_suite::tools::{ToolReply, reply};
use promptgauge_suite::{Bench, Job};

/// What the steps so far add up to.
#[derive(Default)]
struct Trail {
    steps: Vec<ToolStep>,
    turns: Vec<LoopTurn>,
    attempts: Vec<promptgauge_client::Attempt>,
    usage: Option<Usage>,
    answer_ms: Option<f64>,
    calls: u32,
}

impl Trail {
    /// Adds one request's answer (`cached`: the response cache's; `resumed`: the journal's).
    fn add(&mut self, result: &mut JobResult, cached: bool, resumed: bool) {
        self.turns.push(LoopTurn {
            usage: result.usage,
            answer_ms: result.answer_ms,
            attempts: u32::try_from(result.attempts.len()).unwrap_or(u32::MAX),
            cached,
            resumed,
        });
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

    /// `result` (the last step's, already added) carrying the whole loop's attempts, usage
    /// and time.
    fn onto(&mut self, mut result: JobResult) -> JobResult {
        result.attempts = std::mem::take(&mut self.attempts);
        result.usage = self.usage;
        result.answer_ms = self.answer_ms;
        result
    }

    /// Takes a step the journal kept before the run was stopped: its answer and what its
    /// calls got back go into the conversation as they did then, nothing sent and no tool
    /// run. `false` when the line does not hold a result for each call: the step is sent.
    fn resume(&mut self, line: &StepLine, step: &mut Rendered) -> bool {
        if line.tool_calls.is_empty() || line.tool_calls.len() != line.results.len() {
            return false;
        }
        let mut result = JobResult {
            text: line.text.clone(),
            reasoning: line.reasoning.clone(),
            finish_reason: line.finish_reason.clone(),
            usage: line.usage,
            model: line.model.clone(),
            answer_ms: line.answer_ms,
            attempts: line.attempts.clone(),
            ..JobResult::default()
        };
        self.add(&mut result, false, true);
        self.calls += u32::try_from(line.tool_calls.len()).unwrap_or(u32::MAX);
        step.request
            .messages
            .push(assistant_turn(&line.text, &line.tool_calls));
        for (call, done) in line.tool_calls.iter().zip(&line.results) {
            self.steps.push(done.clone());
            step.request
                .messages
                .push(tool_turn(&call.id, &done.result));
        }
        true
    }
}

/// A job run as an agent loop, and what its steps go through: the lane's answer sources,
/// the lane, the run's options, and the channel to the journal.
pub(super) struct AgentLoop<'a> {
    pub(super) bench: &'a Bench,
    pub(super) job: &'a Job,
    pub(super) sources: &'a [Arc<dyn source::AnswerSource>],
    pub(super) lane: &'a Lane,
    pub(super) options: &'a RunOptions,
    pub(super) tx: &'a mpsc::UnboundedSender<Message>,
}

/// Runs the job's loop; its first request is `first`. Each step that ends is journaled
/// (through `tx`) before the next is sent; a step a resumed run's journal holds is taken
/// from there. `loop.deadline` bounds the steps (the request in flight then is cancelled),
/// not the scoring of the answer.
pub(super) async fn run_loop(agent: &AgentLoop<'_>, first: &Rendered) -> JobEnd {
    let bench = agent.bench;
    let mut trail = Trail::default();
    let looped = {
        let steps = steps(agent, first, &mut trail);
        match bench.loop_limits.deadline() {
            None => steps.await,
            Some(d) => tokio::time::timeout(d, steps).await.unwrap_or_else(|_| {
                let d = bench.loop_limits.deadline.as_deref().unwrap_or_default();
                Looped::Ended(
                    format!("loop deadline reached ({d}, loop.deadline)"),
                    JobResult::default(),
                )
            }),
        }
    };
    match looped {
        Looped::Last(step, answer) => last_step(agent, step, answer, trail).await,
        Looped::Ended(cause, last) => ended(agent, trail, cause, last),
        Looped::Stopped => JobEnd::Stopped,
    }
}

/// How a loop's steps ended.
#[allow(
    clippy::large_enum_variant,
    reason = "one a job, moved once: boxing would cost an allocation each"
)]
enum Looped {
    /// The answer (or the failure) that ends it, to be scored: the request it answered.
    Last(Rendered, source::Sourced),
    /// A limit or an unscripted call ended it: its cause, and the last answer.
    Ended(String, JobResult),
    /// The run stopped.
    Stopped,
}

/// The loop's steps, each added to `trail`, until an answer without a call, a limit, or a
/// stop.
async fn steps(agent: &AgentLoop<'_>, first: &Rendered, trail: &mut Trail) -> Looped {
    let AgentLoop {
        bench,
        job,
        sources,
        lane,
        options,
        tx,
    } = *agent;
    let limits = &bench.loop_limits;
    let mut step = Rendered {
        request: first.request.clone(),
        prompt_chars: first.prompt_chars,
        steps: Vec::new(),
    };
    for turn in 0..limits.max_turns {
        if turn > 0 {
            step.request.idempotency_key = format!("{}-step{turn}", first.request.idempotency_key);
        }
        if let Some(done) = options.loop_steps.get(&step.request.idempotency_key)
            && trail.resume(done, &mut step)
        {
            if let Some(b) = &options.budget {
                b.step_paid(job.index, usize::from(job.endpoint), &done.attempts, true);
            }
            continue;
        }
        if turn > 0 && !may_send(bench, job, &step, lane, options) {
            return Looped::Stopped;
        }
        let ask = step.ask(lane, job);
        let answer = match source::answer(sources, &ask).await {
            source::SourceReply::Answer(a) => a,
            // A batch never answers a loop (refused before the run); nothing else waits.
            source::SourceReply::Later | source::SourceReply::Pass => return Looped::Stopped,
        };
        if answer.result.aborted {
            return Looped::Stopped;
        }
        // The cache keeps only complete answers (with no attempt of this run's).
        let answered = answer.cached || answer.result.answered();
        if !answered || answer.result.tool_calls.is_empty() {
            return Looped::Last(step, answer);
        }
        let cached = answer.cached;
        let mut result = answer.result;
        result.tool_calls = named(&result.tool_calls, turn);
        let mut line = step_line(&step.request.idempotency_key, turn, &result);
        trail.add(&mut result, cached, false);
        step.request
            .messages
            .push(assistant_turn(&result.text, &result.tool_calls));
        let before = trail.steps.len();
        let calls = std::mem::take(&mut result.tool_calls);
        // A run that stops (its grace over) waits for no tool: a program's group is killed,
        // an MCP call cancelled.
        let stop = lane.client.stop_token();
        let ran = tokio::select! {
            ran = run_calls(agent, trail, &mut step, &calls, turn) => ran,
            () = stop.cancelled() => return Looped::Stopped,
        };
        if let Err(cause) = ran {
            result.tool_calls = calls;
            return Looped::Ended(cause, result);
        }
        line.results = trail.steps[before..].to_vec();
        if !step_done(job, options, tx, line).await {
            return Looped::Stopped;
        }
    }
    let cause = format!(
        "turn limit reached ({} requests, loop.max_turns)",
        limits.max_turns
    );
    Looped::Ended(cause, JobResult::default())
}

/// The answer, or the failure, that ends the loop, scored into its record.
async fn last_step(
    agent: &AgentLoop<'_>,
    mut step: Rendered,
    mut answer: source::Sourced,
    mut trail: Trail,
) -> JobEnd {
    let AgentLoop {
        bench,
        job,
        lane,
        options,
        ..
    } = *agent;
    trail.add(&mut answer.result, answer.cached, false);
    answer.result = trail.onto(answer.result);
    step.steps = std::mem::take(&mut trail.steps);
    match score(bench, job, &step, answer, lane, options).await {
        Some(mut r) => {
            r.turns = trail.turns;
            JobEnd::Record(Box::new(r))
        }
        None => JobEnd::Stopped,
    }
}

/// A step's journal line, its calls' results still to come.
fn step_line(key: &str, turn: u32, result: &JobResult) -> StepLine {
    StepLine {
        event: "step".into(),
        key: key.to_string(),
        turn,
        text: result.text.clone(),
        reasoning: result.reasoning.clone(),
        tool_calls: result.tool_calls.clone(),
        finish_reason: result.finish_reason.clone(),
        usage: result.usage,
        model: result.model.clone(),
        answer_ms: result.answer_ms,
        attempts: result.attempts.clone(),
        results: Vec::new(),
    }
}

/// Whether a loop's later step may be sent: not by a run winding down (the first Ctrl-C;
/// the loop resumes from its last journaled step), nor past the budget. The first step
/// was held for when the job was taken; each later one is held as its request now stands
/// (longer by every result so far).
fn may_send(bench: &Bench, job: &Job, step: &Rendered, lane: &Lane, options: &RunOptions) -> bool {
    !lane.client.drain_token().is_cancelled() && options.afford_step(bench, job, step, lane)
}

/// Ends a step whose calls have their results: what it was billed is spent, and its line
/// journaled; `false` when the journal could not keep it.
async fn step_done(
    job: &Job,
    options: &RunOptions,
    tx: &mpsc::UnboundedSender<Message>,
    line: StepLine,
) -> bool {
    if let Some(b) = &options.budget {
        b.step_paid(job.index, usize::from(job.endpoint), &line.attempts, false);
    }
    journaled(tx, line).await
}

/// Hands a finished step to the journal and waits until it is kept: `false` when it could
/// not be (the run is stopping), and the loop must not go on from a step a resume would
/// not find.
async fn journaled(tx: &mpsc::UnboundedSender<Message>, line: StepLine) -> bool {
    let (ack, kept) = oneshot::channel();
    tx.send(Message::Step(Box::new(line), ack)).is_ok() && kept.await.unwrap_or(false)
}

/// Runs one answer's `calls` against the case's script, each result added to the
/// conversation and the trajectory; the cause that ends the loop, if one does (the call
/// limit, an unscripted call).
async fn run_calls(
    agent: &AgentLoop<'_>,
    trail: &mut Trail,
    step: &mut Rendered,
    calls: &[ToolCall],
    turn: u32,
) -> Result<(), String> {
    let (bench, options) = (agent.bench, agent.options);
    let case = &bench.cases[agent.job.case];
    let most = bench.loop_limits.max_tool_calls;
    for (index, call) in calls.iter().enumerate() {
        trail.calls += 1;
        if trail.calls > most {
            return Err(format!(
                "tool call limit reached ({most} calls, loop.max_tool_calls)"
            ));
        }
        let id = call_id(&step.request.idempotency_key, index, call);
        let (answered, call_id) = answer_call(bench, case, call, &id, options).await;
        let (text, error) = match answered {
            ToolReply::Result(t) => (t, false),
            ToolReply::Error(e) => (e, true),
            ToolReply::Failed(cause) => {
                // The call was made: it is in the trajectory, with why it ended the loop.
                trail.steps.push(ToolStep {
                    turn,
                    tool: call.name.clone(),
                    arguments: call.arguments.clone(),
                    result: cause.clone(),
                    error: true,
                    call_id,
                });
                return Err(cause);
            }
        };
        trail.steps.push(ToolStep {
            turn,
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            result: text.clone(),
            error,
            call_id,
        });
        step.request.messages.push(tool_turn(&call.id, &text));
    }
    Ok(())
}

/// The id of the call `index` (0 the first) of the answer to the request `step_key`: the
/// step's key (the job's, run and repeat, and the step), the call's place among the
/// answer's, and a hash of the tool and its arguments. A resumed run that sends the step
/// again gets the same id for the same call; a model that answers with another call gets
/// another id, and that call runs.
fn call_id(step_key: &str, index: usize, call: &ToolCall) -> String {
    // The arguments as JSON, not as written: spaces or key order do not make another call.
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .map_or_else(|_| call.arguments.clone(), |v| v.to_string());
    let hash = promptgauge_base::hash::hash_parts(&[&call.name, &arguments]);
    format!("{step_key}-call{index}-{:08x}", hash >> 32)
}

/// What one call gets back, and the call id the tool was given (none for a script): refused
/// when the tool is not offered or its arguments do not fit its schema; else what answers
/// it says — the tool's program, its MCP server, or the case's script.
async fn answer_call(
    bench: &Bench,
    case: &promptgauge_suite::Case,
    call: &ToolCall,
    id: &str,
    options: &RunOptions,
) -> (ToolReply, String) {
    let arguments = match checked(bench, call).await {
        Ok(arguments) => arguments,
        Err(refused) => return (refused, String::new()),
    };
    let Some(tool) = bench.tools.iter().find(|t| t.name == call.name) else {
        let scripted = reply(&bench.tools, &case.tool_script, &call.name, &call.arguments);
        return (scripted, String::new());
    };
    if let Some(server) = tool.served_by {
        let reply = match &options.mcp {
            Some(servers) => servers.call(server, &call.name, arguments, id).await,
            None => ToolReply::Failed(format!("the MCP server of `{}` is not running", call.name)),
        };
        return (reply, id.to_string());
    }
    if !tool.run.is_empty() {
        let dir = bench.path.parent().unwrap_or(std::path::Path::new("."));
        let reply = super::tool_program::call(super::tool_program::ProgramCall {
            tool,
            dir,
            case,
            arguments: &call.arguments,
            call_id: id,
        })
        .await;
        return (reply, id.to_string());
    }
    let scripted = reply(&bench.tools, &case.tool_script, &call.name, &call.arguments);
    (scripted, String::new())
}

/// The call's arguments once checked against its tool's schema; the error the model is
/// given back otherwise. The check runs on a thread of its own, so the loop's deadline and
/// a stopped run end the loop whatever it costs (a schema's size is bounded when it is
/// loaded; what recursion in it costs grows with the arguments).
async fn checked(bench: &Bench, call: &ToolCall) -> Result<Value, ToolReply> {
    let check = bench
        .argument_checks
        .check_of(&bench.tools, &call.name, &call.arguments)
        .map_err(ToolReply::Error)?;
    match tokio::task::spawn_blocking(move || check.run()).await {
        Ok(checked) => checked.map_err(ToolReply::Error),
        Err(e) => Err(ToolReply::Failed(format!(
            "checking the arguments of `{}` failed: {e}",
            call.name
        ))),
    }
}

/// The failed record of a loop a limit or an unscripted call ended: its cause, and what
/// its steps cost.
fn ended(agent: &AgentLoop<'_>, mut trail: Trail, cause: String, last: JobResult) -> JobEnd {
    let AgentLoop {
        bench,
        job,
        lane,
        options,
        ..
    } = *agent;
    let usage = trail.usage;
    let result = trail.onto(last);
    let mut r: JobRecord = failed_record(bench, job, cause, Some(result));
    r.usage = usage.unwrap_or_default();
    r.steps = trail.steps;
    r.turns = trail.turns;
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
