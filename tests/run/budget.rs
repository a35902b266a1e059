//! `--budget USD`: the run stops sending before it can pass the budget, judge calls
//! counted; a plan whose estimate is over it is refused before anything is sent; a resume
//! may raise it and sends only the rest.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;

/// The arithmetic bench's price is $1 / $2 per million tokens in / out, and each request
/// carries max_tokens 100: a job may cost about $0.00021, and costs about $0.00001.
/// Its price is model m's, the model every run here names (docs/guide/endpoints.md, "Price
/// follows the endpoint").
fn bench(extra: &str) -> tempfile::TempDir {
    arithmetic_bench(40, 2, &format!("endpoint: {{ model: m }}\n{extra}"))
}

fn run(d: &Path, url: &str, args: &[&str]) -> std::process::Output {
    promptgauge(d)
        .args(["run", "--base-url", url, "--model", "m", "--quiet"])
        .args(args)
        .output()
        .unwrap()
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// What the run spent in all: every variant's answers and the judge's calls.
fn spent(s: &Summary) -> f64 {
    s.variants
        .iter()
        .map(|v| v.spent_usd.unwrap_or(0.0) + v.judge_cost_usd.unwrap_or(0.0))
        .sum()
}

#[test]
fn the_run_stops_sending_at_the_budget_and_a_resume_with_more_sends_only_the_rest() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    let budget = 0.0012;
    let o = run(
        d,
        &url,
        &[
            "bench.yaml",
            "--budget",
            "0.0012",
            "--run-to-budget",
            "--concurrency",
            "2",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let kept = journal(&dir).len();
    let seen = server.provider.stats().requests;
    // Every request sent is a finished job: nothing was sent and dropped.
    assert_eq!(seen as usize, kept, "{stderr}");
    assert!(kept > 10 && kept < 80, "{kept} jobs: {stderr}");
    let s = summary(&dir);
    let paid = spent(&s);
    assert!(paid <= budget, "spent {paid} of {budget}");
    // It stopped because the next job could not fit: what was spent and one job's most
    // (0.00021) and what the other request in flight held is past the budget.
    assert!(paid + 2.0 * 0.00021 > budget, "stopped early at {paid}");
    assert!(!s.complete);
    let record = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(record.contains("the budget is reached"), "{record}");
    assert!(record.contains("\"budget_usd\": 0.0012"), "{record}");
    assert!(
        stderr.contains(&format!("{} jobs were not sent", 80 - kept)),
        "{stderr}"
    );
    assert!(
        stderr.contains("promptgauge run --resume") && stderr.contains("--budget USD"),
        "{stderr}"
    );

    // A resume keeps the run's budget: what is left of it cannot pay for the rest.
    let resume = ["run", "--resume", dir.to_str().unwrap()];
    let o = promptgauge(d).args(resume).arg("--quiet").output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("of it spent already"), "{stderr}");
    assert_eq!(server.provider.stats().requests, seen, "nothing sent");

    // A budget below what the run already spent: refused, nothing sent.
    let o = promptgauge(d)
        .args(resume)
        .args(["--quiet", "--budget", "0.00001", "--run-to-budget"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("has spent") && stderr.contains("already"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().requests, seen, "nothing sent");

    // A larger budget sends the rest, each once.
    let o = promptgauge(d)
        .args(resume)
        .args(["--quiet", "--budget", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.provider.stats().requests, 80);
    assert_eq!(journal(&dir).len(), 80);
    let s = summary(&dir);
    assert!(s.complete);
    let record = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(record.contains("\"budget_usd\": 1.0"), "{record}");
}

#[test]
fn a_plan_whose_estimate_is_over_the_budget_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    // 80 jobs of at most about $0.00021: $0.0169.
    let o = run(d, &url, &["bench.yaml", "--budget", "0.01"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("may cost up to $0.0169")
            && stderr.contains("over the budget of $0.0100")
            && stderr.contains("--run-to-budget"),
        "{stderr}"
    );
    assert_eq!(server.provider.stats().requests, 0);
    assert!(run_dirs(&d.join("reports")).is_empty(), "no run folder");

    let check = |args: &[&str]| {
        promptgauge(d)
            .args(["check", "bench.yaml"])
            .args(args)
            .output()
            .unwrap()
    };
    let o = check(&["--budget", "0.01"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("over the budget"));
    let o = check(&["--budget", "0.01", "--run-to-budget"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("sending until the budget is reached"));
    let o = check(&["--budget", "0.02"]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("budget $0.0200: the jobs left may cost up to $0.0169")
    );

    // Within the budget, the whole run is sent.
    let o = run(d, &url, &["bench.yaml", "--budget", "0.02"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.provider.stats().requests, 80);
}

#[test]
fn judge_calls_count_against_the_budget() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    // The judge costs 100× the model: its calls are most of the spending.
    let b = bench(
        "judge: { model: judge-model, params: { max_tokens: 50 }, price: { input_per_mtok: 100, output_per_mtok: 100 } }\n",
    );
    let d = b.path();
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("grade: { kind: number }", "grade: { kind: judge }");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    let o = promptgauge(d)
        .args(["check", "bench.yaml", "--budget", "5"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("for the judge's calls"), "{stdout}");

    let budget = 0.5;
    let o = run(
        d,
        &url,
        &["bench.yaml", "--budget", "0.5", "--run-to-budget"],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&dir);
    let judged: f64 = s.variants.iter().filter_map(|v| v.judge_cost_usd).sum();
    let answers: f64 = s.variants.iter().filter_map(|v| v.spent_usd).sum();
    assert!(judged + answers <= budget, "{judged} + {answers}");
    // Counted without its judge, the run would have had money for every job.
    assert!(answers < budget / 100.0, "{answers}");
    let jobs = journal(&dir).len();
    assert!(jobs < 80, "{jobs}");
    // Each job's answer and its judge's call, nothing more.
    assert_eq!(server.provider.stats().requests as usize, 2 * jobs);

    // Without a price for the judge, --budget cannot count its calls.
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace(", price: { input_per_mtok: 100, output_per_mtok: 100 }", "");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    let o = run(d, &url, &["bench.yaml", "--budget", "1"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the judge has no price"), "{stderr}");
}

#[test]
fn a_budget_needs_a_price_and_run_to_budget_needs_a_budget() {
    let b = bench("");
    let d = b.path();
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("price: { input_per_mtok: 1.0, output_per_mtok: 2.0 }\n", "");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    let o = run(d, "mock", &["bench.yaml", "--budget", "5"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the run's endpoint has no price (the bench has no `price`)")
            && stderr.contains("--price IN,OUT")
            && stderr.contains("a `price:` on the endpoint"),
        "{stderr}"
    );
    let o = run(d, "mock", &["bench.yaml", "--run-to-budget"]);
    assert_eq!(o.status.code(), Some(2));
    for bad in ["0", "-1", "five", "NaN"] {
        let o = run(d, "mock", &["bench.yaml", &format!("--budget={bad}")]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("is not an amount in USD"), "{stderr}");
    }
}

#[test]
fn a_batch_holds_only_the_jobs_the_budget_can_pay_for() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    // Each job may cost about $0.00021: five fit in $0.0012, the sixth does not.
    let batch = ["--batch", "--batch-poll", "10ms"];
    let o = run(
        d,
        &url,
        &[
            &["bench.yaml", "--budget", "0.0012", "--run-to-budget"],
            &batch[..],
        ]
        .concat(),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert_eq!(server.provider.batches_created(), 1);
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let records: Vec<_> = journal(&dir)
        .into_iter()
        .filter(|r| r.get("case_id").is_some())
        .collect();
    assert_eq!(records.len(), 5, "{stderr}");
    assert_eq!(server.provider.batched_requests().len(), 5);
    assert!(stderr.contains("75 jobs were not sent"), "{stderr}");
    let o = promptgauge(d)
        .args([
            "run",
            "--resume",
            dir.to_str().unwrap(),
            "--quiet",
            "--budget",
            "1",
        ])
        .args(batch)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.provider.batches_created(), 2);
    let records = journal(&dir)
        .into_iter()
        .filter(|r| r.get("case_id").is_some())
        .count();
    assert_eq!(records, 80);
    // Each job answered once, in one of the two batches.
    let answered = server.provider.batched_requests();
    assert_eq!(answered.len(), 80);
    assert!(answered.values().all(|n| *n == 1));
}

#[test]
fn embeddings_count_too_and_check_and_run_agree_on_what_a_budget_needs() {
    let b = bench("");
    let d = b.path();
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace(
            "grade: { kind: number }",
            "grade: { kind: embedding, threshold: 0.8 }",
        );
    std::fs::write(d.join("bench.yaml"), &text).unwrap();
    // The embeddings' tokens are costed at the judge's price: without one, both refuse.
    for command in ["check", "run"] {
        let o = promptgauge(d)
            .args([command, "bench.yaml", "--base-url", "mock", "--budget", "5"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("the judge has no price"),
            "{command}: {stderr}"
        );
    }
    std::fs::write(
        d.join("bench.yaml"),
        format!("{text}judge: {{ price: {{ input_per_mtok: 1.0, output_per_mtok: 1.0 }} }}\n"),
    )
    .unwrap();
    for command in ["check", "run"] {
        let o = promptgauge(d)
            .args([command, "bench.yaml", "--base-url", "mock", "--budget", "5"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn answers_the_cache_holds_cost_nothing_to_a_budget() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    let o = run(d, &url, &["bench.yaml", "--cache"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(server.provider.stats().requests, 80);
    // Every answer is in the cache: a budget far below the plan's price starts, and
    // nothing is bought.
    let o = run(d, &url, &["bench.yaml", "--cache", "--budget", "0.0001"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(server.provider.stats().requests, 80);
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    assert_eq!(journal(&dir).len(), 80);
    // Without the cache the same budget refuses the plan.
    let o = run(d, &url, &["bench.yaml", "--budget", "0.0001"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn usage_past_max_tokens_is_flagged_and_every_overspend_is_said_with_its_size() {
    // Every answer billed a billion output tokens, though its request allows 100.
    let (_rt, server) = start_mock(MockConfig {
        report_output_tokens: Some(1_000_000_000),
        ..MockConfig::default()
    });
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    // One job, all of it sent: the run finished, and spent $2,000 of $1. Exit 1: the
    // budget's gate failed, with the amount, the ratio and why.
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .args(["--limit", "1", "--variants", "plain", "--budget", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "gate failed: budget: the run spent $2000.00, over its --budget of $1.00 by $1999.00 (2000.0×)"
        ) && stderr.contains("provider accounting anomaly"),
        "{stderr}"
    );
    assert!(
        stdout.contains("provider accounting anomaly: 1 jobs were billed")
            && stdout
                .contains("billed 1000000000 output tokens for a request capped at max_tokens 100"),
        "{stdout}"
    );
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&dir);
    assert_eq!(s.variants[0].usage_anomalies, 1);
    assert!(s.gates.iter().any(|g| g.gate == "budget" && !g.passed));
    let records = journal(&dir);
    assert!(
        records[0]["usage_anomaly"].as_str().is_some(),
        "{records:?}"
    );

    // Many jobs: the first one's bill stops the sending (exit 3, incomplete), and the
    // overspend is said too.
    let o = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &url,
            "--model",
            "m",
            "--concurrency",
            "1",
        ])
        .args(["--budget", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("the budget is reached")
            && stderr.contains("gate failed: budget: the run spent $2000.00")
            && stderr.contains("(2000.0×)"),
        "{stderr}"
    );
    assert_eq!(
        server.provider.stats().requests,
        2,
        "nothing sent after the bill"
    );
}

#[test]
fn a_run_that_may_stop_at_its_budget_sends_its_cases_in_a_seeded_random_order() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    let o = promptgauge(d)
        .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
        .args([
            "--budget",
            "0.0012",
            "--run-to-budget",
            "--concurrency",
            "1",
        ])
        .args(["--seed", "7"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let s = summary(&dir);
    assert_eq!(s.run.order_seed, Some(7));
    // The cases measured are the first of the seeded order, not of the file.
    let mut seen: Vec<String> = journal(&dir)
        .iter()
        .filter_map(|r| r["case_id"].as_str().map(String::from))
        .collect();
    seen.sort();
    seen.dedup();
    let n = seen.len();
    assert!(n > 2 && n < 40, "{n}");
    assert_eq!(s.cases_measured, Some(n));
    let order = promptgauge::suite::plan::case_order(40, 7);
    let mut drawn: Vec<String> = order[..n]
        .iter()
        .map(|i| format!("add-{:02}", i + 1))
        .collect();
    drawn.sort();
    assert_eq!(seen, drawn);
    let first: Vec<String> = (1..=n).map(|i| format!("add-{i:02}")).collect();
    assert_ne!(seen, first, "not the first cases of the file");
    assert!(
        stdout.contains(&format!("{n} of 40 cases, drawn at random (seed 7)")),
        "{stdout}"
    );
    let record = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(record.contains("\"order_seed\": 7"), "{record}");
    // A run without a budget keeps the file's order, and says nothing of a draw.
    let o = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            &url,
            "--model",
            "m",
            "--limit",
            "3",
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(!String::from_utf8_lossy(&o.stdout).contains("drawn at random"));
}

#[test]
fn a_resume_with_a_budget_keeps_the_order_the_run_was_planned_in() {
    // A run without a budget (its cases in the file's order), cut short as a kill leaves
    // it, resumed with one: the jobs keep their numbers (keys and batch ids depend on
    // them), so each record's job is still its case's.
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    let o = run(d, &url, &["bench.yaml", "--limit", "10"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    let kept: String = text.lines().take(6).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("results.jsonl"), kept).unwrap();
    let o = promptgauge(d)
        .args(["run", "--resume", dir.to_str().unwrap(), "--quiet"])
        .args(["--budget", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let records = journal(&dir);
    let jobs: Vec<_> = records
        .iter()
        .filter(|r| r.get("case_id").is_some())
        .collect();
    assert_eq!(jobs.len(), 20);
    for r in jobs {
        let job = r["job"].as_u64().unwrap();
        let case = format!("add-{:02}", job / 2 + 1);
        assert_eq!(r["case_id"], case.as_str(), "{r}");
    }
    let record = std::fs::read_to_string(dir.join("run.json")).unwrap();
    assert!(!record.contains("order_seed"), "{record}");
}

/// Shards started on their own with a budget and no `--seed` draw one order (from the
/// bench they share), so `merge` takes them as one run; two unsharded runs still draw
/// orders of their own.
#[test]
fn shards_with_a_budget_draw_one_order_and_merge() {
    let (_rt, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let b = bench("");
    let d = b.path();
    let seed_of = |dir: &Path| summary(dir).run.order_seed.expect("a seeded order");
    let mut seeds = Vec::new();
    for shard in ["1/2", "2/2"] {
        let o = run(
            d,
            &url,
            &[
                "bench.yaml",
                "--out",
                "shards",
                "--shard",
                shard,
                "--budget",
                "1",
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        seeds.push(seed_of(&run_dirs(&d.join("shards")).pop().unwrap()));
    }
    assert_eq!(seeds[0], seeds[1], "one order for the shards of one run");
    let shards: Vec<String> = run_dirs(&d.join("shards"))
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let o = promptgauge(d)
        .args(["merge", "--out", "merged"])
        .args(&shards)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let merged = run_dirs(&d.join("merged")).pop().unwrap();
    let s = summary(&merged);
    assert!(s.complete, "{stderr}");
    assert_eq!(s.run.order_seed, Some(seeds[0]));
    assert_eq!(journal(&merged).len(), 80);
    for _ in 0..2 {
        let o = run(d, &url, &["bench.yaml", "--out", "whole", "--budget", "1"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let whole: Vec<u64> = run_dirs(&d.join("whole"))
        .iter()
        .map(|p| seed_of(p))
        .collect();
    assert_ne!(whole[0], whole[1], "unsharded runs draw their own");
}

/// Eight cases, each attaching a PDF by URL (never fetched: the provider is given the
/// URL), sent over the Responses API at $3 / $15 per million tokens, 100 tokens an answer.
fn url_documents(limits: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: String = (1..=8)
        .map(|i| format!("{{\"id\": \"doc-{i}\", \"vars\": {{\"q\": \"What does it say?\"}}, \"files\": [{{\"url\": \"http://127.0.0.1:9/doc-{i}.pdf\"}}], \"expected\": \"5\"}}\n"))
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    std::fs::write(
        d.join("v.yaml"),
        "messages:\n  - { role: user, content: \"{{ q }}\" }\n",
    )
    .unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        format!(
            "name: documents\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: number }}\nendpoint: {{ protocol: openai-responses, model: m }}\nparams: {{ max_tokens: 100 }}\nprice: {{ input_per_mtok: 3.0, output_per_mtok: 15.0 }}\n{limits}"
        ),
    )
    .unwrap();
    dir
}

/// A provider that reads each PDF given by URL as 40 pages: $0.36 a job.
fn reading_forty_pages() -> (
    tokio::runtime::Runtime,
    promptgauge::mock::server::MockServer,
) {
    start_mock(MockConfig {
        url_document_pages: Some(40),
        ..MockConfig::default()
    })
}

#[test]
fn a_pdf_given_by_url_is_held_at_the_pages_a_provider_reads_and_the_budget_keeps() {
    let (_rt, server) = reading_forty_pages();
    let url = server.base_url();
    let b = url_documents("");
    let d = b.path();
    // Before, each was held as ten pages ($0.09) while the provider billed forty ($0.36): a
    // run to its budget passed it. Now each is held at 100 pages ($0.90), the most a
    // provider reads: a plan over the budget is refused, saying why.
    for command in ["check", "run"] {
        let mut cmd = promptgauge(d);
        cmd.args([command, "bench.yaml", "--budget", "0.5"]);
        if command == "run" {
            cmd.args(["--base-url", &url, "--model", "m", "--quiet"]);
        }
        let o = cmd.output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(2), "{command}: {said}");
        assert!(
            said.contains("files given by URL are counted at the most a provider bills")
                && said.contains("--fetch-urls"),
            "{command}: {said}"
        );
    }
    assert_eq!(server.provider.stats().requests, 0);
    // Sent until the budget: never past it, whatever the documents hold.
    let budget = 2.0;
    let o = run(
        d,
        &url,
        &[
            "bench.yaml",
            "--budget",
            "2",
            "--run-to-budget",
            "--concurrency",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    let records = journal(&dir);
    assert_eq!(server.provider.stats().requests as usize, records.len());
    assert!((2..8).contains(&records.len()), "{} sent", records.len());
    // What the provider saw: the URL, not bytes; what it billed: 40 pages a job.
    let body = server.provider.bodies()[0].to_string();
    assert!(body.contains("http://127.0.0.1:9/doc-"), "{body}");
    for r in &records {
        assert!(
            r["usage"]["prompt_tokens"].as_u64().unwrap() > 120_000,
            "{r}"
        );
        assert!(
            r["held"]["prompt_tokens"].as_u64().unwrap() > 300_000,
            "{r}"
        );
    }
    let paid = spent(&summary(&dir));
    assert!(paid <= budget, "spent {paid} of {budget}");
    assert!(!stderr.contains("gate failed: budget"), "{stderr}");
}

#[test]
fn an_overspend_names_what_took_its_bills_past_their_holds() {
    let (_rt, server) = reading_forty_pages();
    let url = server.base_url();
    // The bench says its provider reads 5 pages of a PDF; this one reads 40.
    let b = url_documents("limits: { max_pdf_pages: 5 }\n");
    let d = b.path();
    let o = run(
        d,
        &url,
        &[
            "bench.yaml",
            "--budget",
            "1",
            "--run-to-budget",
            "--concurrency",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    // Held for $0.0465 each, billed $0.36: the third takes the run past $1.
    assert_eq!(server.provider.stats().requests, 3, "{stderr}");
    let gate = stderr
        .lines()
        .find(|l| l.contains("gate failed: budget"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        gate.contains("over its --budget of $1.00")
            && gate
                .contains("3 jobs' prompts were billed for more tokens than their holds counted")
            && gate.contains("prompt tokens billed, 15")
            && gate.contains("limits.max_pdf_pages"),
        "{gate}"
    );
    // Not what did not happen.
    for absent in ["retries", "judge", "command scorer", "max_tokens allows"] {
        assert!(!gate.contains(absent), "{absent}: {gate}");
    }
    let dir = run_dirs(&d.join("reports")).pop().unwrap();
    // summary.json, with what passed the holds, is what its schema says it is.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&written), "{}", written["variants"][0]);
    let s = summary(&dir);
    let past = s.variants[0].past_holds.as_ref().unwrap();
    assert_eq!(past.prompt_jobs, 3);
    assert!(
        past.prompts_usd > 0.9 && past.retries_usd == 0.0,
        "{past:?}"
    );
}
