//! What a resume keeps whatever its flags say, and the flags and changes it refuses.

use anyhow::Context;

use crate::app::{Failure, Prepared};
use crate::cli::{PlanArgs, RunArgs};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report::ProviderInfo;
use promptgauge_runner::RunDir;
use promptgauge_runner::record::RunRecord;
use promptgauge_suite::Fingerprint;

/// Flags a resume cannot take: another protocol, another judge or endpoint,
/// `--retry-failed` on a run `--until-decided`, another `--max-drop` than its plan's.
pub(super) fn check_resume_flags(
    args: &RunArgs,
    dir: &RunDir,
    record: &RunRecord,
) -> Result<(), Failure> {
    check_same_judge(&args.plan, record)?;
    check_same_endpoint(&args.plan, record)?;
    if args.retry_failed.is_some() && record.plan.sequential.is_some() {
        return Err(UsageError::with_fix(
            "--retry-failed cannot resume a run --until-decided: its sequential tests have already seen which jobs failed, and a resend would change what they tested",
            "resume without --retry-failed, or start a new run",
        )
        .into());
    }
    // The answers of one run come through one protocol.
    if let Some(asked) = args.plan.protocol
        && asked != record.endpoint.protocol
    {
        return Err(UsageError::with_fix(
            format!(
                "{} was answered through the {} protocol, not {asked}: one run's answers come through one protocol",
                dir.path().display(),
                record.endpoint.protocol
            ),
            "resume without --protocol, or start a new run to measure the other protocol",
        )
        .into());
    }
    if let Some(plan) = &record.plan.sequential {
        // The drop check ran (or not) at the plan's --max-drop from the first case; another
        // value could be checked only over the cases already fed, and never settled by going on.
        let asked = args.gates.max_drop.map(|p| p / 100.0);
        if asked.is_some() && asked != plan.max_drop {
            let was = plan.max_drop.map_or("without --max-drop".to_string(), |m| {
                format!("with --max-drop {}", m * 100.0)
            });
            return Err(UsageError::with_fix(
                format!(
                    "{} ran --until-decided {was}: its sequential drop check is part of the plan, and another --max-drop cannot be checked by going on",
                    dir.path().display()
                ),
                "resume with the run's own --max-drop (or none), or start a new run",
            )
            .into());
        }
    }
    Ok(())
}

/// A resume keeps the plan it started with, the endpoint and model it was answered by
/// unless a flag says otherwise, and its judge (where and with which model it judged,
/// whatever the bench or --base-url now say); only where and how fast to send may change.
pub(super) fn resumed_plan(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    if !record.plan.endpoints.is_empty() {
        return resumed_grid(flags, record);
    }
    let e = &record.endpoint;
    // Credentials are never stored: such a URL must come from the flags or the
    // environment again.
    let recorded_urls = e.recorded_urls();
    let usable = recorded_urls.is_some();
    let recorded_urls = recorded_urls.unwrap_or_default();
    PlanArgs {
        base_url: if !flags.base_url.is_empty() || !usable {
            flags.base_url.clone()
        } else {
            recorded_urls
        },
        model: flags.model.clone().or_else(|| Some(e.model.clone())),
        protocol: Some(e.protocol),
        endpoints: e
            .endpoint
            .clone()
            .map_or_else(|| flags.endpoints.clone(), |n| vec![n]),
        // A batched run's rest goes by batch too (its submitted batches are adopted).
        batch: flags.batch || e.batch,
        ..kept_plan(flags, record)
    }
}

/// What a resume keeps whatever its flags say: the bench (unless named again), the plan
/// and the judge.
pub(super) fn kept_plan(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    PlanArgs {
        bench: Some(
            flags
                .bench
                .clone()
                .unwrap_or_else(|| record.bench_path.clone()),
        ),
        limit: record.plan.limit,
        variants: record.plan.variants.clone(),
        repeats: Some(record.plan.repeats),
        shard: record.plan.shard,
        arms_out: record.plan.arms_out.clone(),
        until_decided: record.plan.sequential.is_some(),
        sequential: record.plan.sequential.clone(),
        seed: record.plan.order_seed,
        order_kept: true,
        fetch_urls: record.plan.fetch_urls || flags.fetch_urls,
        prices: if flags.prices.is_empty() {
            recorded_prices(record)
        } else {
            flags.prices.clone()
        },
        ..judged_as_before(flags, record)
    }
}

/// The prices the run's answers were costed at, as `--price` flags: a resume costs the
/// rest as the run began (where it sends is the run's own, so its price is too).
fn recorded_prices(record: &RunRecord) -> Vec<promptgauge_suite::endpoints::PriceFlag> {
    if record.plan.endpoints.is_empty() {
        return record
            .bench
            .price
            .iter()
            .map(|price| promptgauge_suite::endpoints::PriceFlag {
                endpoint: None,
                price: price.clone(),
            })
            .collect();
    }
    record
        .endpoints
        .iter()
        .filter_map(|e| {
            Some(promptgauge_suite::endpoints::PriceFlag {
                endpoint: Some(e.endpoint.clone()?),
                price: e.price.clone()?,
            })
        })
        .collect()
}

/// [`resumed_plan`] of a run of several endpoints: the same endpoints, in the same order,
/// each where and with the model and protocol it was answered by (`--endpoint NAME=URL`
/// may move one, as when the run started; its price, parameters and limits stay the
/// bench's).
pub(super) fn resumed_grid(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    let recorded = record.endpoints.iter().filter_map(|e| {
        let name = e.endpoint.clone()?;
        // Credentials are never stored: such an endpoint is found in the bench again.
        let urls = e.recorded_urls()?;
        Some(promptgauge_suite::endpoints::AdHocEndpoint {
            name,
            spec: promptgauge_suite::EndpointSpec {
                base_url: Some(match urls.len() {
                    1 => promptgauge_suite::UrlList::One(urls[0].clone()),
                    _ => promptgauge_suite::UrlList::Many(urls),
                }),
                model: Some(e.model.clone()),
                api_key_env: e.api_key_env.clone(),
                protocol: Some(e.protocol),
                key_header: None,
                batch: e.batch.then_some(true),
            },
        })
    });
    PlanArgs {
        endpoints: record.plan.endpoints.clone(),
        endpoint: recorded.chain(flags.endpoint.iter().cloned()).collect(),
        ..kept_plan(flags, record)
    }
}

/// A resume keeps the run's judge: a flag naming another model, protocol or server is
/// refused (half the run would be graded by one judge, half by another).
pub(super) fn check_same_judge(flags: &PlanArgs, record: &RunRecord) -> Result<(), Failure> {
    let Some(j) = &record.judge else {
        return Ok(());
    };
    let same_url = |u: &str| {
        if u == "mock" {
            return j.simulated;
        }
        let shown = promptgauge_client::secrets::redact_url(u);
        let shown = shown.trim_end_matches('/');
        !j.simulated
            && (j.base_url.trim_end_matches('/') == shown
                || j.replicas.iter().any(|r| r.trim_end_matches('/') == shown)
                || j.base_url
                    .split(", ")
                    .any(|r| r.trim_end_matches('/') == shown))
    };
    let other = flags.judge_model.as_ref().is_some_and(|m| *m != j.model)
        || flags.judge_protocol.is_some_and(|p| p != j.protocol)
        || flags
            .judge_base_url
            .as_deref()
            .is_some_and(|u| !same_url(u));
    if other {
        return Err(UsageError::with_fix(
            format!(
                "a resume keeps the run's judge ({} at {}): the --judge-* flags cannot name another",
                j.model, j.base_url
            ),
            "resume without them (--judge-key-env may change: the key, not the judge), or start a new run",
        )
        .into());
    }
    Ok(())
}

/// A resume runs on the run's endpoint: `--endpoints` or `--endpoint` naming another is
/// refused.
pub(super) fn check_same_endpoint(flags: &PlanArgs, record: &RunRecord) -> Result<(), Failure> {
    let recorded: Vec<&str> = if record.plan.endpoints.is_empty() {
        record.endpoint.endpoint.as_deref().into_iter().collect()
    } else {
        record.plan.endpoints.iter().map(String::as_str).collect()
    };
    let named = flags
        .endpoints
        .iter()
        .map(String::as_str)
        .chain(flags.endpoint.iter().map(|e| e.name.as_str()));
    for name in named {
        if !recorded.contains(&name.trim()) {
            return Err(UsageError::with_fix(
                format!(
                    "a resume runs on the run's {} ({}): --endpoints and --endpoint cannot name `{name}`",
                    if recorded.len() > 1 {
                        "endpoints"
                    } else {
                        "endpoint"
                    },
                    if recorded.is_empty() {
                        "the bench's `endpoint:`".to_string()
                    } else {
                        recorded.join(", ")
                    }
                ),
                "resume without them, or start a new run on that endpoint",
            )
            .into());
        }
    }
    // A run of several endpoints resumes on all of them, in their order (the first is
    // the baseline): --endpoints cannot narrow or reorder it.
    if record.plan.endpoints.len() > 1
        && !flags.endpoints.is_empty()
        && !flags.endpoints.iter().map(|n| n.trim()).eq(record
            .plan
            .endpoints
            .iter()
            .map(String::as_str))
    {
        return Err(UsageError::with_fix(
            format!(
                "a resume runs on every endpoint of the run, in its order ({}): --endpoints cannot leave some out or reorder them",
                recorded.join(", ")
            ),
            "resume without --endpoints",
        )
        .into());
    }
    Ok(())
}

/// The `--judge-*` flags of a resume: the run's own judge where a flag does not say
/// otherwise (a judge that moved would grade half the run differently).
pub(super) fn judged_as_before(flags: &PlanArgs, record: &RunRecord) -> PlanArgs {
    let Some(j) = &record.judge else {
        return flags.clone();
    };
    let url = if j.simulated {
        Some("mock".to_string())
    } else if j.base_url == record.endpoint.base_url {
        // It judged at the run's endpoint (its replicas too): it still does.
        None
    } else {
        // Credentials are never stored: such a URL must come from the flags again.
        Some(j.base_url.clone()).filter(|u| !u.contains(promptgauge_client::secrets::REDACTED))
    };
    PlanArgs {
        judge_base_url: flags.judge_base_url.clone().or(url),
        judge_model: flags.judge_model.clone().or_else(|| Some(j.model.clone())),
        judge_key_env: flags
            .judge_key_env
            .clone()
            .or_else(|| j.api_key_env.clone()),
        judge_protocol: flags.judge_protocol.or(Some(j.protocol)),
        ..flags.clone()
    }
}

/// Refuses to resume when the bench no longer measures what the run started measuring, or
/// an endpoint (`provider`, or each of `grid` in a run of several) another model.
pub(super) fn check_resumable(
    record: &RunRecord,
    p: &Prepared,
    provider: &ProviderInfo,
    grid: &[ProviderInfo],
) -> Result<(), UsageError> {
    let now = Fingerprint::of(&p.bench, &p.variants);
    let was = &record.fingerprint;
    let changed = if now.cases != was.cases {
        Some("its cases (ids, variables, expected answers, graders or tags)")
    } else if now.variants != was.variants {
        Some("its variants (names, messages or parameters)")
    } else if now.settings != was.settings {
        Some("its request parameters, default grader or repeats")
    } else {
        None
    };
    if let Some(what) = changed {
        return Err(UsageError::with_fix(
            format!(
                "{} changed since this run started: {what} differ; resuming would mix results of two different benches",
                p.bench.path.display()
            ),
            "start a new run (without --resume), or restore the bench as it was",
        ));
    }
    if record.plan.endpoints != p.endpoint_names() {
        return Err(UsageError::with_fix(
            format!(
                "this run was answered by {}; resuming on {} would mix two grids",
                describe_endpoints(&record.plan.endpoints),
                describe_endpoints(&p.endpoint_names())
            ),
            "resume without --endpoints, or start a new run",
        ));
    }
    if record.plan.endpoints.is_empty() {
        return check_same_provider(&record.endpoint, provider);
    }
    for (was, now) in record.endpoints.iter().zip(grid) {
        check_same_provider(was, now).map_err(|e| {
            UsageError(format!(
                "endpoint {}: {}",
                now.endpoint.as_deref().unwrap_or("?"),
                e.0
            ))
        })?;
    }
    Ok(())
}

/// `endpoints hosted, local`, or `its one endpoint`.
pub(super) fn describe_endpoints(names: &[String]) -> String {
    if names.is_empty() {
        "its one endpoint".to_string()
    } else {
        format!("endpoints {}", names.join(", "))
    }
}

/// Refuses to resume an endpoint on another model, or one whose credentials in its URL
/// would be lost.
pub(super) fn check_same_provider(
    was: &ProviderInfo,
    provider: &ProviderInfo,
) -> Result<(), UsageError> {
    let record_endpoint = was;
    let redacted = promptgauge_client::secrets::REDACTED;
    if record_endpoint.base_url.contains(redacted) && provider.base_url != record_endpoint.base_url
    {
        return Err(UsageError::with_fix(
            format!(
                "this run was sent to {}, whose credentials are never stored; resuming would send to {}",
                record_endpoint.base_url, provider.base_url
            ),
            "resume with --base-url and the URL with its credentials (or set them in the environment as before)",
        ));
    }
    if provider.model != record_endpoint.model || provider.simulated != record_endpoint.simulated {
        return Err(UsageError::with_fix(
            format!(
                "this run was answered by `{}`{}; resuming with `{}`{} would mix two models' answers",
                record_endpoint.model,
                if record_endpoint.simulated {
                    " (simulated)"
                } else {
                    ""
                },
                provider.model,
                if provider.simulated {
                    " (simulated)"
                } else {
                    ""
                },
            ),
            match &record_endpoint.endpoint {
                Some(name) => format!(
                    "resume with --endpoint {name}=URL,model={} (or the bench's endpoint as it was), or start a new run",
                    record_endpoint.model
                ),
                None => format!(
                    "resume with --model {} and the same provider, or start a new run",
                    record_endpoint.model
                ),
            },
        ));
    }
    Ok(())
}

/// A resume may not move an endpoint whose batches are still open at the provider: they
/// are collected where they were submitted (elsewhere they could not be, and their jobs
/// would be paid for again).
pub(super) fn check_batches_stay(
    dir: &RunDir,
    record: &RunRecord,
    provider: &ProviderInfo,
    grid: &[ProviderInfo],
) -> Result<(), Failure> {
    let moved: Vec<(Option<String>, String, String)> = if record.endpoints.is_empty() {
        vec![(
            None,
            record.endpoint.base_url.clone(),
            provider.base_url.clone(),
        )]
    } else {
        record
            .endpoints
            .iter()
            .filter_map(|was| {
                let now = grid.iter().find(|g| g.endpoint == was.endpoint)?;
                Some((
                    was.endpoint.clone(),
                    was.base_url.clone(),
                    now.base_url.clone(),
                ))
            })
            .collect()
    };
    let moved: Vec<_> = moved
        .into_iter()
        .filter(|(_, was, now)| was != now)
        .collect();
    if moved.is_empty() || !dir.journal_path().exists() {
        return Ok(());
    }
    let stats = promptgauge_runner::journal::read(&dir.journal_path(), |_| {})
        .with_context(|| format!("cannot read the journal {}", dir.journal_path().display()))
        .before_send()?;
    for (endpoint, was, now) in moved {
        let open: Vec<&str> = promptgauge_runner::batch::open_batches(&stats.batches)
            .filter(|b| b.endpoint == endpoint)
            .map(|b| b.name.as_str())
            .collect();
        if open.is_empty() {
            continue;
        }
        let who = endpoint.map_or_else(|| "the run".to_string(), |e| format!("endpoint {e}"));
        return Err(UsageError::with_fix(
            format!(
                "{who} has {} still open at {was}: a resume at {now} could not collect {}, and would pay for {} jobs again; nothing was sent",
                crate::app::count(open.len() as u64, "batch", "batches"),
                if open.len() == 1 { "it" } else { "them" },
                if open.len() == 1 { "its" } else { "their" },
            ),
            format!(
                "resume where the batches were submitted (without --base-url or --endpoint for {who}); once they have ended, a later resume may move"
            ),
        )
        .into());
    }
    Ok(())
}
