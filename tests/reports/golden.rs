//! Golden files: every report of two runs on a paused clock, byte for byte, built live from
//! the run's events and again from its journal. Written once by the code before "One run,
//! one pass" reshaped how reports are built (they re-read the journal then), so the
//! reshaping is proved not to change a number. Regenerate (`GOLDEN=write cargo test --test reports golden`) only
//! when an output is meant to change, and say why in the commit.
//!
//! - `example`: the example bench (64 cases × 4 variants) on the demo simulator.
//! - `soak`: 500 arithmetic cases × 2 variants × 2 repeats = 2,000 jobs under every fault on
//!   a fixed seed, with few attempts so that some jobs fail.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use promptgauge::client::{Client, ClientConfig};
use promptgauge::grade::Shape;
use promptgauge::mock::answers::{Hint, Oracle};
use promptgauge::mock::memory::MemoryTransport;
use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter};
use promptgauge::report::{
    self, Aggregator, AggregatorSettings, Exporter, ProviderInfo, RunResult,
};
use promptgauge::runner::events::Fanout;
use promptgauge::runner::record::{BenchRecord, PlanSettings, RunRecord, Tool};
use promptgauge::runner::{self, RunDir};
use promptgauge::suite::{Bench, Fingerprint, Plan};
use tokio_util::sync::CancellationToken;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Setup {
    name: &'static str,
    bench: PathBuf,
    repeats: u32,
    mock: MockConfig,
    client: fn(&mut ClientConfig),
    /// Also pin what the terminal prints (unlimited and at 80 columns).
    terminal: bool,
    /// Tell the simulator each job's case, as `promptgauge run` does, so it answers a bench
    /// of any shape (JSON for `fields`) rather than only the example's.
    oracle: bool,
}

/// Runs a bench on the simulator in memory, on tokio's paused clock, and writes every
/// report into `out`: summary.json/csv/md, report.html, junit.xml (and, when the setup
/// asks, the terminal's text).
async fn run_and_report(setup: &Setup, out: &Path) {
    let mut bench = Bench::load(&setup.bench).unwrap();
    bench.repeats = setup.repeats;
    let bench = Arc::new(bench);
    let variants: Vec<usize> = (0..bench.variants.len()).collect();
    let names: Vec<String> = bench.variants.iter().map(|v| v.name.clone()).collect();
    let jobs = Plan::new(bench.cases.len(), &variants, bench.repeats).jobs;
    let planned = jobs.len();

    let mut mock = setup.mock.clone();
    if setup.oracle {
        mock.oracle = Some(oracle(&bench, &jobs, &format!("golden-{}", setup.name)));
    }
    let provider = Arc::new(Provider::new(mock));
    let mut config = ClientConfig::new("http://simulator/v1", "mock-model");
    config.limits.concurrency = bench.limits.concurrency;
    config.limits.max_attempts = bench.limits.max_attempts;
    config.seed = Some(7);
    (setup.client)(&mut config);
    let client = Arc::new(Client::new(
        Arc::new(MemoryTransport::new(provider)),
        config,
    ));

    let record = RunRecord {
        tool: Tool {
            name: "promptgauge".into(),
            version: "golden".into(),
        },
        run_id: format!("golden-{}", setup.name),
        started_at: "2026-11-30T00:00:00Z".into(),
        finished_at: Some("2026-11-30T00:10:00Z".into()),
        stopped: None,
        resumed_at: Vec::new(),
        bench_path: PathBuf::from(format!("{}.yaml", setup.name)),
        plan: PlanSettings {
            limit: None,
            variants: names.clone(),
            repeats: bench.repeats,
            shard: None,
            sequential: None,
            endpoints: Vec::new(),
            order_seed: None,
            fetch_urls: false,
            arms_out: Vec::new(),
        },
        fingerprint: Fingerprint::of(&bench, &variants),
        jobs_planned: planned,
        endpoint: ProviderInfo {
            base_url: "simulated".into(),
            model: "mock-model".into(),
            simulated: true,
            api_key_env: None,
            replicas: Vec::new(),
            protocol: Default::default(),
            endpoint: None,
            price: None,
            batch: false,
        },
        endpoints: Vec::new(),
        judge: None,
        bench: BenchRecord::of(&bench, &variants),
        source: None,
        started_unix_ms: None,
        store: None,
        merged_from: Vec::new(),
        merged_shards: Vec::new(),
        allowed_failures: 0,
        budget_usd: None,
    };
    let dir = RunDir::at(out);
    let aggregator = |spool: bool| {
        let mut agg = Aggregator::new(AggregatorSettings {
            run: record.info(),
            variants: record.plan.variants.clone(),
            endpoints: vec![],
            price: record.bench.price.clone(),
            arm_prices: vec![],
            planned: record.plan_keys().planned(),
            junit_spool: Some(dir.junit_spool()),
            judge_price: None,
            labels: Default::default(),
        });
        // The history store's rows: the same live and replayed (`index` replays).
        // Spooled live, in memory replayed: the same rows either way.
        agg.keep_rows(&record.bench.case_ids, spool.then(|| dir.store_spool()));
        // As every run is read: the figures behind the (here absent) sequential tests.
        promptgauge::runner::sequential::Decider::new(None, agg)
    };

    // Live: the journal and the aggregator hear the run.
    let mut journal = dir.append_journal().unwrap();
    let mut live = aggregator(true);
    let tally = runner::run(
        bench.clone(),
        jobs,
        &[runner::Lane::single(client, "simulated")],
        &runner::RunOptions {
            scorers: std::sync::Arc::new(promptgauge::grade::scorers_for(&bench).unwrap()),
            run_id: record.run_id.clone(),
            ..Default::default()
        },
        CancellationToken::new(),
        &mut Fanout(vec![&mut journal, &mut live]),
    )
    .await;
    assert!(tally.journal_error.is_none());
    drop(journal);
    write(out, "", live.finish(), &record, setup.terminal);

    // Replayed, as `report DIR` does: every file the same.
    let mut replayed = aggregator(false);
    let (audit, _) = dir
        .replay(&record.plan_keys(), |r| replayed.add(&r))
        .unwrap();
    replayed.figures().note_audit(&audit);
    write(out, "replayed-", replayed.finish(), &record, setup.terminal);
    for f in files(setup) {
        assert_eq!(
            std::fs::read_to_string(out.join(f)).unwrap(),
            std::fs::read_to_string(out.join(format!("replayed-{f}"))).unwrap(),
            "{f}: live and replayed differ"
        );
    }
}

/// The case behind each job's idempotency key (`pg-RUN-INDEX…`), answered as JSON.
fn oracle(bench: &Arc<Bench>, jobs: &[promptgauge::suite::plan::Job], run_id: &str) -> Oracle {
    let case_of: std::collections::HashMap<usize, usize> =
        jobs.iter().map(|j| (j.index, j.case)).collect();
    let prefix = format!("pg-{run_id}-");
    let bench = bench.clone();
    Oracle(Arc::new(move |key: &str| {
        let index: usize = key.strip_prefix(&prefix)?.split('-').next()?.parse().ok()?;
        let case = bench.cases.get(*case_of.get(&index)?)?;
        Some(Hint {
            case: case.id.clone(),
            expected: case.expected.clone(),
            expected_json: case.expected_json.clone(),
            shape: Shape::Json,
            others: Arc::new(Vec::new()),
            files: 0,
            tool_script: Vec::new(),
            reading: None,
        })
    }))
}

/// Renders every report of a result into `out`, each file name after `prefix`.
fn write(out: &Path, prefix: &str, mut result: RunResult, record: &RunRecord, terminal: bool) {
    let file = |name: &str| out.join(format!("{prefix}{name}"));
    if terminal {
        for (name, width) in TERMINAL {
            std::fs::write(file(name), report::terminal_text(&result.summary, width)).unwrap();
        }
    }
    for exporter in report::exporters() {
        std::fs::write(
            file(exporter.file_name()),
            exporter.render(&result.summary).unwrap(),
        )
        .unwrap();
    }
    std::fs::write(
        file("report.html"),
        report::html::render_run(&result, &record.bench.text),
    )
    .unwrap();
    let junit = result.junit.take().unwrap();
    std::fs::write(
        file("jobs.csv"),
        store_rows(
            result.jobs.as_ref().unwrap(),
            &record.bench.case_ids,
            record.bench.price.as_ref(),
        ),
    )
    .unwrap();
    std::fs::write(file("junit.xml"), junit.render(&result.summary).unwrap()).unwrap();
    // Markdown is also what --markdown appends.
    assert_eq!(
        std::fs::read_to_string(file("summary.md")).unwrap(),
        report::markdown::Markdown.render(&result.summary).unwrap()
    );
}

/// The rows the history store records for a run, one line per job, sorted (jobs finish
/// in any order).
fn store_rows(
    jobs: &promptgauge::store::JobRows,
    ids: &[String],
    price: Option<&promptgauge::suite::Price>,
) -> String {
    let mut lines = Vec::new();
    let opt = |x: Option<f64>| x.map(|v| format!("{v}")).unwrap_or_default();
    for r in &jobs.reader().unwrap().next_chunk(usize::MAX).unwrap() {
        lines.push(format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            ids[r.case as usize],
            jobs.group(r.case).unwrap_or(""),
            r.variant,
            r.repeat,
            r.graded,
            r.outcome
                .map(promptgauge::client::Outcome::as_str)
                .unwrap_or(""),
            opt(r.score()),
            r.tokens_in,
            r.tokens_out,
            opt(r.latency_ms().map(|_| 0.0)),
            opt(r.ttft_ms().map(|_| 0.0)),
            opt(r.cost_usd(price)),
            r.cached,
            r.attempts
        ));
    }
    lines.sort();
    let header = "case,group,variant,repeat,graded,outcome,score,tokens_in,tokens_out,latency_ms,ttft_ms,cost_usd,cached,attempts\n";
    format!("{header}{}", lines.concat())
}

const FILES: [&str; 6] = [
    "jobs.csv",
    "summary.json",
    "summary.csv",
    "summary.md",
    "report.html",
    "junit.xml",
];

/// The terminal's text, unlimited and at 80 columns.
const TERMINAL: [(&str, Option<usize>); 2] =
    [("terminal.txt", None), ("terminal-80.txt", Some(80))];

/// The files a setup pins.
fn files(setup: &Setup) -> Vec<&'static str> {
    let mut files = FILES.to_vec();
    if setup.terminal {
        files.extend(TERMINAL.iter().map(|(name, _)| *name));
    }
    files
}

async fn check(setup: Setup) {
    let tmp = tempfile::tempdir().unwrap();
    run_and_report(&setup, tmp.path()).await;
    let golden = repo().join("tests/golden").join(setup.name);
    if std::env::var("GOLDEN").as_deref() == Ok("write") {
        std::fs::create_dir_all(&golden).unwrap();
        for f in files(&setup) {
            std::fs::copy(tmp.path().join(f), golden.join(f)).unwrap();
        }
        return;
    }
    for f in files(&setup) {
        let want = std::fs::read_to_string(golden.join(f))
            .unwrap_or_else(|e| panic!("{}: {e}", golden.join(f).display()));
        let got = std::fs::read_to_string(tmp.path().join(f)).unwrap();
        if want != got {
            let line = want
                .lines()
                .zip(got.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(got.lines().count()));
            panic!(
                "{}/{f} differs from its golden file at line {}:\n  golden: {:?}\n  now:    {:?}",
                setup.name,
                line + 1,
                want.lines().nth(line),
                got.lines().nth(line)
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_example_bench_reports_match_their_golden_files() {
    check(Setup {
        name: "example",
        bench: repo().join("promptgauge.yaml"),
        repeats: 1,
        mock: promptgauge::mock::MockConfig::demo(),
        client: |_| {},
        terminal: false,
        oracle: false,
    })
    .await;
}

/// 500 arithmetic cases with tags, two variants, a price.
fn soak_bench() -> PathBuf {
    let dir = repo().join("target/golden-soak");
    std::fs::create_dir_all(&dir).unwrap();
    let lines: String = (1..=500)
        .map(|i| {
            let tag = ["add", "carry", "large"][i % 3];
            format!(
                "{{\"id\": \"sum-{i:03}\", \"vars\": {{\"question\": \"What is {i} + {}?\"}}, \"expected\": \"{}\", \"tags\": [\"{tag}\"]}}\n",
                i * 7,
                i * 8
            )
        })
        .collect();
    std::fs::write(dir.join("cases.jsonl"), lines).unwrap();
    std::fs::write(dir.join("plain.txt"), "{{ question }}").unwrap();
    std::fs::write(
        dir.join("careful.yaml"),
        "name: careful\nmessages:\n  - { role: system, content: \"Think step by step.\" }\n  - { role: user, content: \"{{ question }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("soak.yaml"),
        "name: soak\ncases: cases.jsonl\nvariants: [plain.txt, careful.yaml]\ngrade: { kind: number }\nparams: { temperature: 0.7, max_tokens: 100 }\nprice: { input_per_mtok: 1.0, output_per_mtok: 2.0 }\nlimits: { concurrency: 16, max_attempts: 3 }\n",
    )
    .unwrap();
    dir.join("soak.yaml")
}

#[tokio::test(start_paused = true)]
async fn a_2000_job_run_under_faults_reports_match_their_golden_files() {
    check(Setup {
        name: "soak",
        bench: soak_bench(),
        repeats: 2,
        mock: MockConfig {
            faults: Faults {
                rate_429: 0.05,
                rate_5xx: 0.05,
                hang: 0.02,
                reset: 0.04,
                cut: 0.04,
                stall: 0.04,
                error_event: 0.04,
                ..Faults::default()
            },
            retry_after: RetryAfter::Millis(500),
            usage: promptgauge::mock::UsageMode::InLastChunk,
            first_token_delay: Duration::from_millis(40),
            token_delay: Duration::from_millis(4),
            seed: 42,
            ..MockConfig::default()
        },
        client: |c| {
            c.limits.first_token_timeout = Duration::from_secs(5);
            c.limits.idle_timeout = Duration::from_secs(2);
        },
        terminal: false,
        oracle: false,
    })
    .await;
}

/// A triage bench graded field by field (`fields`), whose parts are the fields: 120 tickets,
/// each answer a category, a priority and two labels (a list, so its part is a share, not
/// 0 or 1), and three variants of different accuracy.
fn parts_bench() -> PathBuf {
    let dir = repo().join("target/golden-parts");
    std::fs::create_dir_all(&dir).unwrap();
    let categories = ["billing", "login", "bug", "feature"];
    let priorities = ["low", "normal", "high"];
    let labels = ["refund", "mobile", "web", "api", "urgent"];
    let lines: String = (1..=120)
        .map(|i| {
            let expected = serde_json::json!({
                "category": categories[i % 4],
                "priority": priorities[i % 3],
                "labels": [labels[i % 5], labels[(i + 2) % 5]],
            });
            let case = serde_json::json!({
                "id": format!("ticket-{i:03}"),
                "vars": {"ticket": format!("Ticket {i}: something about {} ({})", categories[i % 4], priorities[i % 3])},
                "expected": expected,
            });
            format!("{case}\n")
        })
        .collect();
    std::fs::write(dir.join("cases.jsonl"), lines).unwrap();
    std::fs::write(dir.join("plain.txt"), "Triage as JSON: {{ ticket }}").unwrap();
    std::fs::write(
        dir.join("careful.yaml"),
        "name: careful\nmessages:\n  - { role: system, content: \"Think step by step, then answer as JSON.\" }\n  - { role: user, content: \"{{ ticket }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("hasty.yaml"),
        "name: hasty\nmessages:\n  - { role: system, content: \"Answer as JSON (simulated accuracy 40%).\" }\n  - { role: user, content: \"{{ ticket }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("triage.yaml"),
        "name: triage\ncases: cases.jsonl\nvariants: [plain.txt, careful.yaml, hasty.yaml]\ngrade: { kind: fields }\nparams: { temperature: 0, max_tokens: 100, response_format: { type: json_object } }\n",
    )
    .unwrap();
    dir.join("triage.yaml")
}

/// A score with parts: summary.md and report.html show each part's figures and verdicts,
/// and so, compactly, does the terminal (at 80 columns too).
#[tokio::test(start_paused = true)]
async fn a_bench_with_parts_reports_match_their_golden_files() {
    check(Setup {
        name: "parts",
        bench: parts_bench(),
        repeats: 1,
        mock: MockConfig::default(),
        client: |_| {},
        terminal: true,
        oracle: true,
    })
    .await;
}
