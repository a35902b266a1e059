//! The commands: each takes plain settings from [`crate::cli`] and returns an exit code.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cli::{
    CompareArgs, Env, GateArgs, MergeArgs, MockArgs, PlanArgs, ReportArgs, RunArgs,
    resolve_base_url,
};
use crate::client::{ApiKey, Client, ClientConfig, ReqwestTransport};
use crate::error::{BeforeSend, Failure};
use crate::mock::server::MockServer;
use crate::mock::{Faults, MockConfig, Provider, RetryAfter};
use crate::report::Exporter;
use crate::report::compare::{CaseTable, Detectable, RunComparison, RunSide};
use crate::report::{self, ProviderInfo, Summary};
use crate::runner::record::{PlanSettings, RunRecord, Tool};
use crate::runner::{self, Journal, RunEvent, lock};
use crate::suite::{Bench, Fingerprint, Job, Plan, check_base_url};

/// Prints a line to stdout; a closed pipe (`promptgauge run | head`) is not an error.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Prints a line to stderr, ignoring a closed pipe.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// The process exit codes (DESIGN §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    GateFailed = 1,
    Input = 2,
    Incomplete = 3,
    Aborted = 4,
    Interrupted = 130,
}

/// The bench `run` and `check` use when none is named.
pub const DEFAULT_BENCH: &str = "promptgauge.yaml";

/// A flag or its value is wrong (exit 2, nothing sent).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The endpoint a run talks to, resolved from flags, environment and bench.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Empty: the built-in simulator. Several: replicas of one model.
    pub base_urls: Vec<String>,
    pub source: &'static str,
    pub model: String,
    pub api_key: Option<ApiKey>,
    pub api_key_env: String,
}

/// A bench with the flags applied: the jobs to run and where to send them.
pub struct Prepared {
    pub bench: Arc<Bench>,
    pub variants: Vec<usize>,
    pub jobs: Vec<Job>,
    pub endpoint: Endpoint,
    /// Things worth saying before the run (a key that had to be trimmed).
    pub warnings: Vec<String>,
}

impl Prepared {
    pub fn variant_names(&self) -> Vec<String> {
        self.variants
            .iter()
            .map(|&v| self.bench.variants[v].name.clone())
            .collect()
    }
}

/// Loads and checks everything; no network.
pub fn prepare(args: &PlanArgs, env: &Env) -> anyhow::Result<Prepared> {
    let path = args
        .bench
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BENCH));
    let mut bench = Bench::load(&path)?;
    let flag_error = |message: String, fix: &str| -> anyhow::Error {
        UsageError(format!("{message}\n  fix: {fix}")).into()
    };
    if let Some(limit) = args.limit {
        let limit = limit as usize;
        bench.cases.truncate(limit);
        bench.scorers.truncate(limit);
    }
    if let Some(r) = args.repeats {
        bench.repeats = r;
    }
    if let Some(c) = args.concurrency {
        bench.limits.concurrency = c as usize;
    }
    let variants: Vec<usize> = if args.variants.is_empty() {
        (0..bench.variants.len()).collect()
    } else {
        let mut picked = Vec::new();
        for name in &args.variants {
            let Some(i) = bench.variants.iter().position(|v| v.name == name.trim()) else {
                let known: Vec<&str> = bench.variants.iter().map(|v| v.name.as_str()).collect();
                return Err(flag_error(
                    format!("--variants names `{name}`, which is not a variant of this bench"),
                    &format!("known variants: {}", known.join(", ")),
                ));
            };
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        picked
    };
    let bench_urls: Vec<String> = bench
        .endpoint
        .base_url
        .iter()
        .flat_map(|u| u.urls())
        .collect();
    let base = resolve_base_url(&args.base_url, env, &bench_urls);
    for url in &base.urls {
        check_base_url(url).map_err(|m| {
            flag_error(
                format!("{m} (from {})", base.source),
                "write the full URL, e.g. http://127.0.0.1:8000/v1",
            )
        })?;
    }
    let model = match (&args.model, &bench.endpoint.model, base.urls.is_empty()) {
        (Some(m), _, _) | (None, Some(m), _) => m.clone(),
        (None, None, true) => "mock-model".to_string(),
        (None, None, false) => {
            return Err(flag_error(
                "no model is named for this endpoint".into(),
                "set endpoint.model in the bench, or pass --model NAME",
            ));
        }
    };
    let (api_key_env, api_key) = match &bench.endpoint.api_key_env {
        Some(name) => (name.clone(), env.get(name).map(String::from)),
        None => match (env.get("OPENAI_API_KEY"), env.get("LLM_API_KEY")) {
            (Some(k), _) => ("OPENAI_API_KEY".to_string(), Some(k.to_string())),
            (None, Some(k)) => ("LLM_API_KEY".to_string(), Some(k.to_string())),
            (None, None) => ("OPENAI_API_KEY".to_string(), None),
        },
    };
    let mut warnings = Vec::new();
    let api_key = match api_key.filter(|_| !base.urls.is_empty()) {
        Some(key) => {
            let (key, warning) = crate::client::secrets::clean_api_key(&key, &api_key_env)
                .map_err(|m| {
                    flag_error(
                        m,
                        &format!("set ${api_key_env} to the key alone, e.g. export {api_key_env}=\"$(tr -d '[:space:]' < key.txt)\""),
                    )
                })?;
            warnings.extend(warning);
            Some(key)
        }
        None => None,
    };
    let mut plan = Plan::new(bench.cases.len(), &variants, bench.repeats);
    if let Some(shard) = args.shard {
        plan.jobs.retain(|j| shard.holds(j));
    }
    if let Some(tpm) = bench.limits.tokens_per_minute {
        // A request larger than the whole budget would wait forever: refuse it now.
        for job in &plan.jobs {
            let case = &bench.cases[job.case];
            let messages = bench
                .templates
                .render(job.variant, case, &bench.variants[job.variant])
                .map_err(|e| anyhow::anyhow!("template failed: {e}"))?;
            let need = bench.reservation(job.variant, &messages);
            if need > u64::from(tpm) {
                return Err(crate::suite::InputError::new(
                    case.location.clone(),
                    format!(
                        "case `{}` with variant `{}` reserves about {need} tokens (prompt plus max_tokens), more than limits.tokens_per_minute ({tpm}): it could never be sent",
                        case.id, bench.variants[job.variant].name
                    ),
                )
                .fix("raise limits.tokens_per_minute, or lower max_tokens")
                .into());
            }
        }
    }
    Ok(Prepared {
        bench: Arc::new(bench),
        variants,
        jobs: plan.jobs,
        warnings,
        endpoint: Endpoint {
            api_key: api_key.map(ApiKey::new),
            base_urls: base.urls,
            source: base.source,
            model,
            api_key_env,
        },
    })
}

const SIMULATED_BANNER: &str = "\
================================================================================
  SIMULATED PROVIDER — no base URL is configured, so promptgauge's built-in
  simulator is answering with a deterministic fake model. The numbers below do
  not describe any real model. To measure one, pass --base-url URL (or set
  PROMPTGAUGE_BASE_URL / endpoint.base_url) and --model NAME.
================================================================================";

/// `check`: everything a run would validate, and the plan, without a single request.
pub fn check(args: &PlanArgs, env: &Env) -> anyhow::Result<Exit> {
    let p = prepare(args, env)?;
    let b = &p.bench;
    let mut prompt_tokens = 0u64;
    for job in &p.jobs {
        let case = &b.cases[job.case];
        let messages = b
            .templates
            .render(job.variant, case, &b.variants[job.variant])
            .map_err(|e| anyhow::anyhow!("template failed: {e}"))?;
        prompt_tokens += crate::suite::prompt_tokens(&messages);
    }
    let max_completion: Option<u64> = p.jobs.iter().map(|j| b.max_tokens(j.variant)).sum();
    out!("bench {} ({}): ok", b.name, b.path.display());
    out!(
        "  {} cases × {} variants × {} repeats = {} jobs",
        b.cases.len(),
        p.variants.len(),
        b.repeats,
        p.jobs.len()
    );
    for (i, name) in p.variant_names().iter().enumerate() {
        let v = &b.variants[p.variants[i]];
        out!(
            "  variant {name}{} — {}",
            if i == 0 { " (baseline)" } else { "" },
            v.path.display()
        );
    }
    match p.endpoint.base_urls.as_slice() {
        [] => out!("  endpoint: the built-in SIMULATOR (no base URL configured)"),
        urls => out!(
            "  endpoint {} (from {}), model {}",
            shown_urls(urls).join(", "),
            p.endpoint.source,
            p.endpoint.model
        ),
    }
    out!("  estimated prompt tokens: {prompt_tokens}");
    if let Some(max) = max_completion {
        out!("  completion tokens at most: {max}");
    }
    if let Some(price) = &b.price {
        let low = prompt_tokens as f64 * price.input_per_mtok / 1e6;
        match max_completion {
            Some(max) => out!(
                "  estimated cost: ${low:.4} for input, at most ${:.4} in all",
                low + max as f64 * price.output_per_mtok / 1e6
            ),
            None => out!(
                "  estimated cost: ${low:.4} for input, plus output (set max_tokens to bound it)"
            ),
        }
    }
    let detectable = Detectable::new(b.cases.len() as u64, 0.5, b.confidence);
    out!("  {}", detectable.sentence(b.confidence));
    out!(
        "  limits: concurrency {}, max_attempts {}, timeouts: first token {}, idle {}, total {}",
        b.limits.concurrency,
        b.limits.max_attempts,
        humantime::format_duration(b.limits.first_token_timeout),
        humantime::format_duration(b.limits.idle_timeout),
        humantime::format_duration(b.limits.total_timeout)
    );
    Ok(Exit::Success)
}

/// The simulator a run uses when no base URL is set: mildly unreliable, so the retries show.
pub fn demo_mock_config() -> MockConfig {
    MockConfig {
        retry_after: RetryAfter::Millis(100),
        faults: Faults {
            rate_429: 0.02,
            cut: 0.01,
            ..Faults::default()
        },
        first_token_delay: Duration::from_millis(30),
        token_delay: Duration::from_millis(3),
        ..MockConfig::default()
    }
}

/// Base URLs as they may be shown and stored: without credentials.
fn shown_urls(urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|u| crate::client::secrets::redact_url(u))
        .collect()
}

fn utc_now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// `reports/<name>-<UTC timestamp>`, made unique if two runs start in the same second.
fn run_dir(root: &Path, name: &str, started: &str) -> anyhow::Result<PathBuf> {
    let stamp: String = started
        .chars()
        .filter(|c| !matches!(c, '-' | ':'))
        .collect();
    std::fs::create_dir_all(root)
        .with_context(|| format!("cannot create the report folder {}", root.display()))?;
    for n in 1.. {
        let dir = if n == 1 {
            root.join(format!("{name}-{stamp}"))
        } else {
            root.join(format!("{name}-{stamp}-{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    unreachable!("the loop returns")
}

/// The bench as loaded, for `run.json`'s readers.
fn bench_document(p: &Prepared) -> serde_json::Value {
    let b = &p.bench;
    json!({
        "name": b.name,
        "text": b.text,
        "cases": b.cases.len(),
        "case_ids": b.cases.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        "variants": p.variants.iter().map(|&v| &b.variants[v]).collect::<Vec<_>>(),
        "params": b.params,
        "limits": b.limits,
        "price": b.price,
        "repeats": b.repeats,
        "confidence": b.confidence,
        "grade": b.grade,
    })
}

/// Refuses to resume when the bench no longer measures what the run started measuring.
fn check_resumable(
    record: &RunRecord,
    p: &Prepared,
    provider: &ProviderInfo,
) -> anyhow::Result<()> {
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
        return Err(UsageError(format!(
            "{} changed since this run started: {what} differ; resuming would mix results of two different benches\n  fix: start a new run (without --resume), or restore the bench as it was",
            p.bench.path.display()
        ))
        .into());
    }
    if provider.model != record.endpoint.model || provider.simulated != record.endpoint.simulated {
        return Err(UsageError(format!(
            "this run was answered by `{}`{}; resuming with `{}`{} would mix two models' answers\n  fix: resume with --model {} and the same provider, or start a new run",
            record.endpoint.model,
            if record.endpoint.simulated { " (simulated)" } else { "" },
            provider.model,
            if provider.simulated { " (simulated)" } else { "" },
            record.endpoint.model,
        ))
        .into());
    }
    Ok(())
}

/// Listens for SIGINT and SIGTERM. The first stops dispatch and drains the client: no new
/// attempt starts and waits end at once, while attempts in flight may finish within
/// `grace`; after it (or at a second signal) they are abandoned. The handlers are installed
/// before this returns, so no signal is missed.
fn watch_signals(
    dispatch: CancellationToken,
    abort: CancellationToken,
    grace: Duration,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let first = move || {
        dispatch.cancel();
        note!(
            "\ninterrupted: no new jobs or retries; letting the attempts in flight finish for up to {} (interrupt again to abort them)",
            humantime::format_duration(grace)
        );
    };
    let second = move |why: &str| {
        note!("{why}: aborting the attempts in flight");
        abort.cancel();
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        Ok(tokio::spawn(async move {
            tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
            first();
            tokio::select! {
                _ = int.recv() => second("interrupted again"),
                _ = term.recv() => second("interrupted again"),
                _ = tokio::time::sleep(grace) => second("the grace period is over"),
            }
        }))
    }
    #[cfg(not(unix))]
    {
        Ok(tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                first();
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => second("interrupted again"),
                    _ = tokio::time::sleep(grace) => second("the grace period is over"),
                }
            }
        }))
    }
}

/// The command that continues a run folder.
fn resume_command(dir: &Path) -> String {
    format!("promptgauge run --resume {}", dir.display())
}

/// `run`: send every job not yet in the journal, journal each as it finishes, write the
/// reports, return the exit code. With `--resume DIR`, continue that run.
pub async fn run(args: &RunArgs, env: &Env) -> Result<Exit, Failure> {
    // A run folder is written by one process: take it before reading anything in it.
    let resumed = match &args.resume {
        Some(dir) => {
            let lock = lock::acquire(dir).map_err(|m| Failure::Input(UsageError(m).into()))?;
            let record = RunRecord::read(dir)
                .map_err(|e| UsageError(format!("{e:#}")))
                .before_send()?;
            Some((dir.clone(), record, lock))
        }
        None => None,
    };
    // A resume keeps the plan it started with, and the endpoint and model it was answered
    // by unless a flag says otherwise; only where and how fast to send may change.
    let plan_args = match &resumed {
        Some((_, record, _)) => {
            let e = &record.endpoint;
            let recorded_urls = if e.simulated {
                vec!["mock".to_string()]
            } else if e.replicas.is_empty() {
                vec![e.base_url.clone()]
            } else {
                e.replicas.clone()
            };
            // Credentials are never stored: such a URL must come from the flags or the
            // environment again.
            let usable = !recorded_urls
                .iter()
                .any(|u| u.contains(crate::client::secrets::REDACTED));
            PlanArgs {
                bench: Some(
                    args.plan
                        .bench
                        .clone()
                        .unwrap_or_else(|| record.bench_path.clone()),
                ),
                limit: record.plan.limit,
                variants: record.plan.variants.clone(),
                repeats: Some(record.plan.repeats),
                shard: record.plan.shard,
                base_url: if !args.plan.base_url.is_empty() || !usable {
                    args.plan.base_url.clone()
                } else {
                    recorded_urls
                },
                model: args.plan.model.clone().or_else(|| Some(e.model.clone())),
                ..args.plan.clone()
            }
        }
        None => args.plan.clone(),
    };
    let p = prepare(&plan_args, env).before_send()?;
    let bench = p.bench.clone();
    let quiet = args.quiet;
    for w in &p.warnings {
        note!("warning: {w}");
    }
    let simulated = p.endpoint.base_urls.is_empty();
    let shown = shown_urls(&p.endpoint.base_urls);
    let provider = ProviderInfo {
        base_url: if simulated {
            "simulated".into()
        } else {
            shown.join(", ")
        },
        model: p.endpoint.model.clone(),
        simulated,
        api_key_env: (!simulated).then(|| p.endpoint.api_key_env.clone()),
        replicas: if shown.len() > 1 { shown } else { Vec::new() },
    };
    // Every report file must be writable before a single request is paid for.
    for path in [&args.junit, &args.markdown].into_iter().flatten() {
        check_writable(path).before_send()?;
    }

    let (dir, mut record, _lock) = match resumed {
        Some((dir, mut record, lock)) => {
            check_resumable(&record, &p, &provider).before_send()?;
            record.resumed_at.push(utc_now());
            record.finished_at = None;
            record.stopped = None;
            record.endpoint = provider.clone();
            (dir, record, lock)
        }
        None => {
            let started_at = utc_now();
            let name = match args.plan.shard {
                Some(s) => format!("{}-shard{}of{}", bench.name, s.index, s.count),
                None => bench.name.clone(),
            };
            let dir = run_dir(&args.out, &name, &started_at).before_send()?;
            let lock = lock::acquire(&dir).map_err(|m| Failure::Input(UsageError(m).into()))?;
            let record = RunRecord {
                tool: Tool {
                    name: "promptgauge".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                },
                run_id: format!(
                    "{}-{:04x}",
                    dir.file_name().and_then(|n| n.to_str()).unwrap_or("run"),
                    rand::random::<u16>()
                ),
                started_at,
                finished_at: None,
                stopped: None,
                resumed_at: Vec::new(),
                bench_path: std::fs::canonicalize(&bench.path)
                    .unwrap_or_else(|_| bench.path.clone()),
                plan: PlanSettings {
                    limit: args.plan.limit,
                    variants: p.variant_names(),
                    repeats: bench.repeats,
                    shard: args.plan.shard,
                },
                fingerprint: Fingerprint::of(&bench, &p.variants),
                jobs_planned: p.jobs.len(),
                endpoint: provider.clone(),
                bench: bench_document(&p),
            };
            (dir, record, lock)
        }
    };

    let journal_path = dir.join("results.jsonl");
    let keys = record.plan_keys();
    let resumed_journal = Journal::resume(&journal_path, &keys)
        .with_context(|| format!("cannot read the journal {}", journal_path.display()))
        .before_send()?;
    let audit = &resumed_journal.audit;
    if audit.stats.torn_bytes > 0 {
        note!(
            "note: {} ended in a torn line ({} bytes, from a crash); it was not a finished job and was removed",
            journal_path.display(),
            audit.stats.torn_bytes
        );
    }
    if let Some(found) = audit.findings() {
        note!("note: {}: {found}", journal_path.display());
    }
    let mut journal = resumed_journal.journal;
    let done = &resumed_journal.audit.done;
    let jobs: Vec<Job> = p
        .jobs
        .iter()
        .filter(|j| {
            keys.slot(
                &bench.cases[j.case].id,
                &bench.variants[j.variant].name,
                j.repeat,
            )
            .is_none_or(|slot| !done[slot])
        })
        .copied()
        .collect();
    let already = p.jobs.len() - jobs.len();

    let simulator = if provider.simulated {
        note!("{SIMULATED_BANNER}");
        let sim = Arc::new(Provider::new(demo_mock_config()));
        let server = MockServer::start(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .context("cannot start the built-in simulator")
            .before_send()?;
        Some(server)
    } else {
        None
    };
    let base_urls = match &simulator {
        Some(s) => vec![s.base_url()],
        None => p.endpoint.base_urls.clone(),
    };
    if !provider.simulated && p.endpoint.api_key.is_none() && !quiet {
        note!(
            "note: ${} is not set; sending no Authorization header (fine for most self-hosted servers)",
            p.endpoint.api_key_env
        );
    }
    let client = Arc::new(build_client(&p, &base_urls, args.verbose).before_send()?);
    record.write(&dir).before_send()?;
    if !quiet {
        let verb = if record.resumed_at.is_empty() {
            "running"
        } else {
            "resuming:"
        };
        note!(
            "{verb} {} of {} jobs ({} cases × {} variants × {} repeats) against {} — writing {}",
            jobs.len(),
            p.jobs.len(),
            bench.cases.len(),
            p.variants.len(),
            bench.repeats,
            provider.base_url,
            dir.display()
        );
    }

    let dispatch = client.drain_token();
    let signals = watch_signals(dispatch.clone(), client.stop_token(), args.grace).before_send()?;
    let live = !quiet && std::io::stderr().is_terminal() && !env.is_ci();
    let mut progress =
        report::progress::Progress::new(p.jobs.len(), already, record.plan.variants.clone(), live);
    let mut on_event = |event: RunEvent<'_>| progress.update(&event);
    let cache = if args.cache {
        let root = dir.parent().unwrap_or(Path::new("."));
        let path = root.join(".cache").join("responses.jsonl");
        let cache = runner::Cache::open(&path)
            .with_context(|| format!("cannot open the response cache {}", path.display()))
            .before_send()?;
        if !quiet {
            note!("cache: {} ({} answers)", path.display(), cache.len());
        }
        Some(Arc::new(std::sync::Mutex::new(cache)))
    } else {
        None
    };
    let options = runner::RunOptions {
        run_id: record.run_id.clone(),
        cache,
        endpoint: record.endpoint.base_url.clone(),
    };
    let tally = runner::run(
        bench.clone(),
        jobs,
        client.clone(),
        &mut journal,
        &options,
        dispatch.clone(),
        &mut on_event,
    )
    .await;
    signals.abort();
    progress.finish();
    drop(simulator);

    let fatal = client.fatal();
    let interrupted = dispatch.is_cancelled() && tally.journal_error.is_none();
    record.finished_at = Some(utc_now());
    record.stopped = match (&tally.journal_error, &fatal, interrupted) {
        (Some(e), _, _) => Some(format!(
            "the journal {} could not be written: {e}",
            journal_path.display()
        )),
        (None, Some(f), _) => Some(f.to_string()),
        (None, None, true) => Some("interrupted".to_string()),
        _ => None,
    };
    let mut problems = Vec::new();
    if let Err(e) = record.write(&dir) {
        problems.push(e);
    }
    let outputs = Outputs {
        gates: &args.gates,
        junit: args.junit.as_deref(),
        markdown: args.markdown.as_deref(),
        quiet,
        sent: true,
    };
    let ending = Ending {
        fatal: fatal.is_some(),
        interrupted,
        stopped_by_journal: tally.journal_error.is_some(),
    };
    Ok(conclude(&dir, &record, ending, &outputs, problems))
}

/// Fails when a report file cannot be written (its folder is missing or read-only), so the
/// run is refused before anything is sent rather than losing the report after.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(drop)
        .with_context(|| {
            format!(
                "cannot write {}\n  fix: create its folder, or name a file you can write",
                path.display()
            )
        })
}

/// Where a finished run's results go besides its folder, and what it must pass.
pub struct Outputs<'a> {
    pub gates: &'a GateArgs,
    pub junit: Option<&'a Path>,
    pub markdown: Option<&'a Path>,
    pub quiet: bool,
    /// Whether this command sent requests: a report it cannot write is then exit 3 (the
    /// answers are paid for and journaled), else exit 2.
    pub sent: bool,
}

/// How the sending ended.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ending {
    /// The provider stopped the run (401/403/402).
    pub fatal: bool,
    /// Ctrl-C or SIGTERM.
    pub interrupted: bool,
    /// The journal could not be written (a full disk).
    pub stopped_by_journal: bool,
}

/// Summarises a run folder from its journal, checks the gates, writes every report it can,
/// prints the table, and decides the exit code: 4 aborted by the provider, 130 interrupted,
/// 3 incomplete (or a report or the journal could not be written), 1 a gate failed, else 0.
/// A report that cannot be written does not stop the others, nor hide a failed gate.
fn conclude(
    dir: &Path,
    record: &RunRecord,
    ending: Ending,
    outputs: &Outputs<'_>,
    mut problems: Vec<anyhow::Error>,
) -> Exit {
    let journal_path = dir.join("results.jsonl");
    let keys = record.plan_keys();
    let summary = Summary::from_journal(
        record.info(),
        &record.plan.variants,
        record.price().as_ref(),
        &journal_path,
        &keys,
    )
    .with_context(|| format!("cannot read the journal {}", journal_path.display()));
    let mut summary = match summary {
        Ok(s) => s,
        Err(e) => {
            note!("error: {e:#}");
            if outputs.sent {
                note!("resume with: {}", resume_command(dir));
                return Exit::Incomplete;
            }
            return Exit::Input;
        }
    };
    let baseline = match &outputs.gates.baseline {
        Some(base) => match lock::check_idle(base)
            .map_err(|m| anyhow::Error::from(UsageError(m)))
            .and_then(|()| compare_dirs(base, dir))
        {
            Ok(b) => Some(b),
            Err(e) => {
                problems.push(e.context("cannot compare with the baseline run"));
                None
            }
        },
        None => None,
    };
    let gates = outputs.gates.gates();
    summary.gates = report::gates::evaluate(&gates, &summary, baseline.as_ref());
    if let Err(e) = report::write_all(dir, &summary) {
        problems.push(e);
    }
    if let Err(e) = write_html(dir, record, &summary) {
        problems.push(e);
    }
    out!("{}", report::terminal::render(&summary));
    if let Some(b) = &baseline {
        out!("against the baseline run {}:", b.run_a.dir);
        out!("{}", report::terminal::render_comparison(b));
        let path = dir.join("baseline.json");
        if let Err(e) = serde_json::to_string_pretty(b)
            .map_err(anyhow::Error::from)
            .and_then(|text| Ok(std::fs::write(&path, text + "\n")?))
        {
            problems.push(e.context(format!("cannot write {}", path.display())));
        }
    }
    if let Some(path) = outputs.junit {
        let written = report::junit::render(&summary, &journal_path, &keys)
            .with_context(|| format!("cannot read the journal {}", journal_path.display()))
            .and_then(|xml| {
                std::fs::write(path, xml)
                    .with_context(|| format!("cannot write {}", path.display()))
            });
        if let Err(e) = written {
            problems.push(e);
        }
    }
    if let Some(path) = outputs.markdown {
        let written = report::markdown::Markdown
            .render(&summary)
            .and_then(|mut md| {
                if let Some(b) = &baseline {
                    md.push_str("\n## Against the baseline run\n\n");
                    md.push_str(&report::markdown::render_comparison(b));
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                file.write_all(md.as_bytes())
                    .with_context(|| format!("cannot write {}", path.display()))
            });
        if let Err(e) = written {
            problems.push(e);
        }
    }
    for g in summary.gates.iter().filter(|g| !g.passed) {
        note!("gate failed: {}: {}", g.gate, g.reason);
    }
    if !outputs.quiet {
        note!("reports: {}", dir.display());
    }
    for e in &problems {
        note!("error: {e:#}");
    }
    if ending.fatal {
        note!("error: {}", record.stopped.clone().unwrap_or_default());
        return Exit::Aborted;
    }
    if ending.interrupted {
        note!("resume with: {}", resume_command(dir));
        return Exit::Interrupted;
    }
    if ending.stopped_by_journal {
        note!(
            "error: {}; the jobs in the journal are kept",
            record.stopped.clone().unwrap_or_default()
        );
        note!("free some space, then resume with: {}", resume_command(dir));
        return Exit::Incomplete;
    }
    let missing = summary
        .run
        .jobs_planned
        .saturating_sub(summary.jobs_finished);
    if summary.jobs_failed as u64 > gates.allow_failures || missing > 0 {
        note!(
            "incomplete: {} jobs failed ({} allowed) and {missing} did not run; see {}",
            summary.jobs_failed,
            gates.allow_failures,
            journal_path.display()
        );
        return Exit::Incomplete;
    }
    if !problems.is_empty() {
        if outputs.sent {
            note!(
                "the answers are in the journal; rewrite the reports with: promptgauge report {} (or {})",
                dir.display(),
                resume_command(dir)
            );
            return Exit::Incomplete;
        }
        return Exit::Input;
    }
    if summary.gates.iter().any(|g| !g.passed) {
        return Exit::GateFailed;
    }
    Exit::Success
}

fn build_client(p: &Prepared, base_urls: &[String], verbose: bool) -> anyhow::Result<Client> {
    let limits = &p.bench.limits;
    let first = base_urls.first().map_or("", String::as_str);
    let mut config = ClientConfig::new(first, &p.endpoint.model);
    config.replicas = base_urls.iter().skip(1).cloned().collect();
    config.adaptive = limits.adaptive;
    config.api_key = p.endpoint.api_key.clone();
    config.api_key_env = p.endpoint.api_key_env.clone();
    config.concurrency = limits.concurrency;
    config.max_attempts = limits.max_attempts;
    config.first_token_timeout = limits.first_token_timeout;
    config.idle_timeout = limits.idle_timeout;
    config.total_timeout = limits.total_timeout;
    config.max_response_bytes = limits.max_response_bytes;
    config.max_retry_after = limits.max_retry_after;
    config.requests_per_minute = limits.requests_per_minute;
    config.tokens_per_minute = limits.tokens_per_minute;
    let transport = ReqwestTransport::new(
        limits.connect_timeout,
        limits.concurrency * base_urls.len().max(1),
    )
    .map_err(|e| anyhow::anyhow!(e))?;
    let mut client = Client::new(Arc::new(transport), config);
    if verbose {
        client = client.with_observer(Arc::new(|log| {
            let a = log.attempt;
            let headers: Vec<String> = log
                .headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            note!(
                "[{}] attempt {}: POST {} ({}) → {}{} {:.0} ms{}{}",
                log.idempotency_key,
                log.number,
                log.url,
                headers.join(", "),
                serde_json::to_value(a.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                a.status.map(|s| format!(" HTTP {s}")).unwrap_or_default(),
                a.latency_ms,
                a.error
                    .as_deref()
                    .map(|e| format!(" — {e}"))
                    .unwrap_or_default(),
                a.wait_ms
                    .map(|w| format!("; retry in {w:.0} ms"))
                    .unwrap_or_default(),
            );
        }));
    }
    Ok(client)
}

/// Writes `report.html` beside the other reports.
fn write_html(dir: &Path, record: &RunRecord, summary: &Summary) -> anyhow::Result<()> {
    let html = report::html::render_run(
        summary,
        &dir.join("results.jsonl"),
        &record.plan_keys(),
        &serde_json::to_value(record)?,
    )
    .with_context(|| format!("cannot read the journal in {}", dir.display()))?;
    let path = dir.join("report.html");
    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))
}

/// `report`: rebuilds a run folder's reports from its journal (gates are not re-checked).
pub fn rebuild_report(args: &ReportArgs) -> Result<Exit, Failure> {
    // Its reports are rewritten: the folder must not be in the middle of a run.
    let _lock = lock::acquire(&args.run).map_err(|m| Failure::Input(UsageError(m).into()))?;
    let record = RunRecord::read(&args.run)
        .map_err(|e| UsageError(format!("{e:#}")))
        .before_send()?;
    let journal = args.run.join("results.jsonl");
    let keys = record.plan_keys();
    let (summary, audit) = Summary::audited(
        record.info(),
        &record.plan.variants,
        record.price().as_ref(),
        &journal,
        &keys,
    )
    .with_context(|| format!("cannot read {}", journal.display()))
    .before_send()?;
    report::write_all(&args.run, &summary).before_send()?;
    write_html(&args.run, &record, &summary).before_send()?;
    out!("{}", report::terminal::render(&summary));
    note!(
        "journal: {} of {} planned jobs recorded{}",
        audit.finished,
        keys.planned(),
        if audit.stats.torn > 0 {
            "; a torn last line (from a crash) was skipped"
        } else {
            ""
        }
    );
    if let Some(found) = audit.findings() {
        note!("note: {found}");
    }
    note!(
        "reports rebuilt in {} (report.html, summary.json, summary.csv, summary.md)",
        args.run.display()
    );
    Ok(Exit::Success)
}

/// Compares run B with run A (both folders), variant by variant, paired by case.
fn compare_dirs(run_a: &Path, run_b: &Path) -> anyhow::Result<RunComparison> {
    let load = |dir: &Path| -> anyhow::Result<(RunRecord, Summary)> {
        let record = RunRecord::read(dir).map_err(|e| UsageError(format!("{e:#}")))?;
        let journal = dir.join("results.jsonl");
        let summary = Summary::from_journal(
            record.info(),
            &record.plan.variants,
            record.price().as_ref(),
            &journal,
            &record.plan_keys(),
        )
        .with_context(|| format!("cannot read {}", journal.display()))?;
        Ok((record, summary))
    };
    let (ra, sa) = load(run_a)?;
    let (rb, sb) = load(run_b)?;
    let mut cases: BTreeMap<String, CaseTable> = BTreeMap::new();
    for (arm, dir, record) in [(0, run_a, &ra), (1, run_b, &rb)] {
        runner::journal::read_planned(&dir.join("results.jsonl"), &record.plan_keys(), |r| {
            if let Some(score) = r.score() {
                cases
                    .entry(r.variant.clone())
                    .or_insert_with(|| CaseTable::new(2))
                    .add(&r.case_id, &r.tags, arm, score);
            }
        })
        .with_context(|| format!("cannot read the journal in {}", dir.display()))?;
    }
    let side = |dir: &Path, r: &RunRecord| RunSide {
        dir: dir.display().to_string(),
        bench: r.bench["name"].as_str().unwrap_or("bench").to_string(),
        model: r.endpoint.model.clone(),
        base_url: r.endpoint.base_url.clone(),
        simulated: r.endpoint.simulated,
        started_at: r.started_at.clone(),
    };
    let comparison = RunComparison::build(
        side(run_a, &ra),
        side(run_b, &rb),
        (&sa, &sb),
        &cases,
        (&ra.case_ids(), &rb.case_ids()),
    );
    if comparison.variants.is_empty() {
        return Err(UsageError(format!(
            "the two runs share no variant (A: {}; B: {})\n  fix: compare runs of the same bench",
            ra.plan.variants.join(", "),
            rb.plan.variants.join(", ")
        ))
        .into());
    }
    Ok(comparison)
}

/// `compare`: two runs over the same cases, variant by variant, paired by case.
pub fn compare_runs(args: &CompareArgs) -> anyhow::Result<Exit> {
    for dir in [&args.run_a, &args.run_b] {
        lock::check_idle(dir).map_err(UsageError)?;
    }
    let comparison = compare_dirs(&args.run_a, &args.run_b)?;
    out!("{}", report::terminal::render_comparison(&comparison));
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => {
            let root = args.run_a.parent().unwrap_or(Path::new("."));
            run_dir(root, "compare", &utc_now())?
        }
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    std::fs::write(
        out.join("compare.json"),
        serde_json::to_string_pretty(&comparison)? + "\n",
    )
    .with_context(|| format!("cannot write {}", out.join("compare.json").display()))?;
    std::fs::write(
        out.join("compare.md"),
        report::markdown::render_comparison(&comparison),
    )
    .with_context(|| format!("cannot write {}", out.join("compare.md").display()))?;
    std::fs::write(
        out.join("compare.html"),
        report::html::render_compare(&comparison),
    )
    .with_context(|| format!("cannot write {}", out.join("compare.html").display()))?;
    note!("comparison written to {}", out.display());
    Ok(Exit::Success)
}

/// `merge`: shard run folders of one plan combined into one run folder.
pub fn merge(args: &MergeArgs) -> anyhow::Result<Exit> {
    for dir in &args.runs {
        lock::check_idle(dir).map_err(UsageError)?;
    }
    let records: Vec<RunRecord> = args
        .runs
        .iter()
        .map(|d| RunRecord::read(d).map_err(|e| anyhow::Error::new(UsageError(format!("{e:#}")))))
        .collect::<anyhow::Result<_>>()?;
    let first = &records[0];
    let Some(count) = first.plan.shard.map(|s| s.count) else {
        return Err(UsageError(format!(
            "{} is not a shard (it was not run with --shard i/n)\n  fix: merge the folders of `run --shard i/n`",
            args.runs[0].display()
        ))
        .into());
    };
    let mut seen = vec![false; count as usize];
    for (dir, r) in args.runs.iter().zip(&records) {
        let refuse = |why: String| -> anyhow::Error {
            UsageError(format!(
                "cannot merge {}: {why}\n  fix: merge the shards of one run of one bench",
                dir.display()
            ))
            .into()
        };
        if r.fingerprint != first.fingerprint {
            return Err(refuse(format!(
                "its bench differs from {}'s",
                args.runs[0].display()
            )));
        }
        let (mut plan, mut first_plan) = (r.plan.clone(), first.plan.clone());
        plan.shard = None;
        first_plan.shard = None;
        if plan != first_plan || r.endpoint.model != first.endpoint.model {
            return Err(refuse(
                "its plan (limit, variants, repeats) or model differs".into(),
            ));
        }
        let Some(shard) = r.plan.shard.filter(|s| s.count == count) else {
            return Err(refuse(format!("it is not one of {count} shards")));
        };
        if std::mem::replace(&mut seen[shard.index as usize - 1], true) {
            return Err(refuse(format!(
                "shard {shard} is given twice; shards must not overlap"
            )));
        }
    }
    let root = match &args.out {
        Some(d) => d.clone(),
        None => args.runs[0]
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf(),
    };
    let name = first.bench["name"].as_str().unwrap_or("bench").to_string();
    let dir = run_dir(&root, &format!("{name}-merged"), &utc_now())?;
    let mut journal = Journal::open(&dir.join("results.jsonl"))
        .with_context(|| format!("cannot create the journal in {}", dir.display()))?;
    let mut keys = std::collections::HashSet::new();
    for (run, shard) in args.runs.iter().zip(&records) {
        let mut overlap = None;
        let mut write_error = None;
        let audit =
            runner::journal::read_planned(&run.join("results.jsonl"), &shard.plan_keys(), |r| {
                if !keys.insert(r.key()) {
                    overlap = Some(r.key());
                } else if let Err(e) = journal.append(&r) {
                    write_error = Some(e);
                }
            })
            .with_context(|| format!("cannot read the journal in {}", run.display()))?;
        if let Some(found) = audit.findings() {
            note!("note: {}: {found}", run.display());
        }
        if let Some(e) = write_error {
            return Err(e).context("cannot write the merged journal");
        }
        if let Some((case, variant, repeat)) = overlap {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(UsageError(format!(
                "cannot merge {}: job ({case}, {variant}, repeat {repeat}) is in two shards",
                run.display()
            ))
            .into());
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| !seen[*i as usize - 1])
        .map(|i| format!("{i}/{count}"))
        .collect();
    let mut record = first.clone();
    record.plan.shard = None;
    record.jobs_planned = records.iter().map(|r| r.jobs_planned).sum();
    record.started_at = records
        .iter()
        .map(|r| r.started_at.clone())
        .min()
        .unwrap_or_default();
    record.finished_at = records.iter().filter_map(|r| r.finished_at.clone()).max();
    record.resumed_at = Vec::new();
    record.stopped = if missing.is_empty() {
        records.iter().find_map(|r| r.stopped.clone())
    } else {
        Some(format!(
            "shards missing from the merge: {}",
            missing.join(", ")
        ))
    };
    record.write(&dir)?;
    if !missing.is_empty() {
        note!(
            "warning: shards {} were not given; the merged run is incomplete",
            missing.join(", ")
        );
    }
    let outputs = Outputs {
        gates: &args.gates,
        junit: args.junit.as_deref(),
        markdown: args.markdown.as_deref(),
        quiet: false,
        sent: false,
    };
    let exit = conclude(&dir, &record, Ending::default(), &outputs, Vec::new());
    // A missing shard is an incomplete run, whatever the jobs that ran did.
    Ok(if missing.is_empty() || exit != Exit::Success {
        exit
    } else {
        Exit::Incomplete
    })
}

/// `mock`: serve the simulator until Ctrl-C.
pub async fn mock(args: &MockArgs) -> anyhow::Result<Exit> {
    let config = args.config().map_err(UsageError)?;
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .with_context(|| {
            format!(
                "`{}:{}` is not an address to listen on",
                args.host, args.port
            )
        })?;
    let provider = Arc::new(Provider::new(config));
    let server = MockServer::start(provider, addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    out!("simulated provider listening on {}", server.base_url());
    out!("  chat:  POST {}/chat/completions", server.base_url());
    out!("  stats: GET http://{}/stats", server.addr);
    let _ = tokio::signal::ctrl_c().await;
    Ok(Exit::Success)
}
