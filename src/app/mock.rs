//! `mock`: serve the simulated provider until Ctrl-C.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;

use super::{Exit, Failure};
use crate::cli::{MockArgs, UsageArg};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_mock::server::MockServer;
use promptgauge_mock::{Faults, MockConfig, Provider, RetryAfter, UsageMode};

/// `mock`: serves the simulated provider until Ctrl-C.
pub async fn mock(args: &MockArgs) -> Result<Exit, Failure> {
    let config = config(args).map_err(UsageError)?;
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| {
            format!(
                "`{}:{}` is not an address to listen on",
                args.host, args.port
            )
        })
        .before_send()?;
    let provider = Arc::new(Provider::new(config));
    let server = MockServer::start(provider, addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
        .before_send()?;
    out!("simulated provider listening on {}", server.base_url());
    out!("  chat:      POST {}/chat/completions", server.base_url());
    out!("  responses: POST {}/responses", server.base_url());
    out!("  messages:  POST {}/messages", server.base_url());
    out!("  stats:     GET http://{}/stats", server.addr);
    let _ = tokio::signal::ctrl_c().await;
    Ok(Exit::Success)
}

/// The simulator's configuration; an error names the flag that is out of range.
fn config(args: &MockArgs) -> Result<MockConfig, String> {
    if !(0.0..=1.0).contains(&args.judge_error) {
        return Err(format!(
            "--judge-error is a probability between 0 and 1, found {}",
            args.judge_error
        ));
    }
    for (flag, p) in [
        ("--agent-wrong-tool", args.agent_wrong_tool),
        ("--agent-bad-json", args.agent_bad_json),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!(
                "{flag} is a probability between 0 and 1, found {p}"
            ));
        }
    }
    let faults = faults(args)?;
    Ok(MockConfig {
        model: args.model.clone(),
        strict_model: args.strict_model,
        api_key: args.api_key.clone(),
        open_models: false,
        capacity: args.capacity,
        retry_after: match (args.retry_after_date, args.retry_after_ms) {
            (Some(s), _) => RetryAfter::Date(s),
            (_, Some(ms)) => RetryAfter::Millis(ms),
            _ => RetryAfter::Seconds(args.retry_after),
        },
        faults,
        fault_attempts: args.fault_attempts,
        keepalive: args.keepalive,
        crlf: args.crlf,
        split_utf8: args.split_utf8,
        usage: match args.usage {
            UsageArg::Separate => UsageMode::Separate,
            UsageArg::LastChunk => UsageMode::InLastChunk,
            UsageArg::None => UsageMode::None,
        },
        no_done: args.no_done,
        reject_stream_options: args.reject_stream_options,
        // A server for runs holds only the request it answers (`GET /stats`: kept_bytes).
        kept_bodies: 0,
        max_image_bytes: args
            .max_image_bytes
            .map(|b| b.min(usize::MAX as u64) as usize),
        agent_steps: args.agent_steps,
        agent_modes: promptgauge_mock::AgentModes {
            parallel: args.agent_parallel,
            wrong_tool: args.agent_wrong_tool,
            bad_json: args.agent_bad_json,
            endless: args.agent_endless,
        },
        reasoning: args.reasoning,
        first_token_delay: args.first_token_delay,
        token_delay: args.token_delay,
        seed: args.seed,
        judge_error: args.judge_error,
        oracle: None,
        outage_after: args.outage_after,
        batch_delay: args.batch_delay,
        batch_expires: args.batch_expires,
        no_batch_api: args.no_batch_api,
        batch_lose_create: args.batch_lose_create,
        batch_create_delay: args.batch_create_delay,
        batch_duplicate: args.batch_duplicate,
        refuse_on: args.refuse_on.clone(),
        report_output_tokens: args.report_output_tokens,
        url_document_pages: args.url_document_pages,
    })
}

/// The fault flags as the simulator's [`Faults`]: each a probability, and together at
/// most 1 (one fault an attempt).
fn faults(args: &MockArgs) -> Result<Faults, String> {
    let rates = [
        ("--rate-429", args.rate_429),
        ("--rate-5xx", args.rate_5xx),
        ("--hang", args.hang),
        ("--reset", args.reset),
        ("--cut", args.cut),
        ("--stall", args.stall),
        ("--error-event", args.error_event),
        ("--failed", args.failed),
        ("--content-filter", args.content_filter),
        ("--abort", args.abort),
        ("--overloaded", args.overloaded),
        ("--cut-before-end", args.cut_before_end),
    ];
    for (flag, p) in rates {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!(
                "{flag} is a probability between 0 and 1, found {p}"
            ));
        }
    }
    let total: f64 = rates.iter().map(|r| r.1).sum();
    if total > 1.0 {
        return Err(format!(
            "the fault probabilities add up to {total}, more than 1"
        ));
    }
    Ok(Faults {
        rate_429: args.rate_429,
        rate_5xx: args.rate_5xx,
        hang: args.hang,
        reset: args.reset,
        cut: args.cut,
        stall: args.stall,
        error_event: args.error_event,
        failed: args.failed,
        content_filter: args.content_filter,
        abort: args.abort,
        overloaded: args.overloaded,
        cut_before_end: args.cut_before_end,
    })
}
