//! The runner with the library's client against the in-memory simulator on a paused clock:
//! many jobs, many faults, and the invariant that matters most — no job is ever graded on
//! text the simulator did not finish.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use promptgauge::client::{Client, ClientConfig, JobRequest};
use promptgauge::mock::memory::MemoryTransport;
use promptgauge::mock::{Faults, MockConfig, Provider, RetryAfter};
use promptgauge::report::{Aggregator, AggregatorSettings, ProviderInfo, RunInfo};
use promptgauge::runner::events::{Fanout, OnEvent, RunEvent};
use promptgauge::runner::journal::PlanKeys;
use promptgauge::runner::{self, JobRecord, JobStatus, Journal};
use promptgauge::suite::{Bench, ChatMessage, Plan};
use serde_json::Map;
use tokio_util::sync::CancellationToken;

/// A bench whose cases ask the simulator to echo a long, distinctive text.
fn echo_bench(dir: &Path, cases: usize) -> Bench {
    let lines: String = (0..cases)
        .map(|i| {
            let text = format!("case {i} says héllo → wörld {} end", "word ".repeat(i % 7));
            format!(
                "{{\"id\": \"e-{i:04}\", \"vars\": {{\"text\": {}}}, \"expected\": {}}}\n",
                serde_json::to_string(&text).unwrap(),
                serde_json::to_string(text.trim()).unwrap()
            )
        })
        .collect();
    std::fs::write(dir.join("cases.jsonl"), lines).unwrap();
    std::fs::write(dir.join("echo.txt"), "Echo: {{ text }}").unwrap();
    std::fs::write(
        dir.join("bench.yaml"),
        "name: echo\ncases: cases.jsonl\nvariants: [echo.txt]\ngrade: { kind: exact, case_sensitive: true }\n",
    )
    .unwrap();
    Bench::load(&dir.join("bench.yaml")).unwrap()
}

fn read_journal(path: &Path) -> Vec<JobRecord> {
    let mut records = Vec::new();
    runner::journal::read(path, |r| records.push(r)).unwrap();
    records
}

#[tokio::test(start_paused = true)]
async fn soak_every_job_is_graded_on_finished_text_or_failed_under_every_fault() {
    const JOBS: usize = 2000;
    let dir = tempfile::tempdir().unwrap();
    let bench = Arc::new(echo_bench(dir.path(), JOBS));
    let provider = Arc::new(Provider::new(MockConfig {
        faults: Faults {
            rate_429: 0.08,
            rate_5xx: 0.08,
            hang: 0.05,
            reset: 0.08,
            cut: 0.08,
            stall: 0.08,
            error_event: 0.08,
            failed: 0.04,
            // vLLM's `abort` is no finish (retried); a content filter withholds the answer.
            abort: 0.08,
            content_filter: 0.01,
            ..Faults::default()
        },
        // 429 storms: above 12 in flight everything is refused, on top of random 429s.
        capacity: Some(12),
        retry_after: RetryAfter::Seconds(2),
        keepalive: true,
        crlf: true,
        split_utf8: true,
        token_delay: Duration::from_millis(5),
        seed: 11,
        ..MockConfig::default()
    }));
    let mut config = ClientConfig::new("http://sim/v1", "mock-model");
    config.limits.concurrency = 16;
    config.limits.max_attempts = 8;
    config.limits.first_token_timeout = Duration::from_secs(20);
    config.limits.idle_timeout = Duration::from_secs(10);
    config.seed = Some(3);
    let client = Arc::new(Client::new(
        Arc::new(MemoryTransport::new(provider.clone())),
        config,
    ));
    let jobs = Plan::new(bench.cases.len(), &[0], 1).jobs;
    let journal_path = dir.path().join("results.jsonl");
    let mut journal = Journal::open(&journal_path).unwrap();
    let mut events = 0;
    // Per job: 0 = not started, 1 = started, 2 = finished. Attempts only while 1.
    let mut phase = vec![0u8; JOBS];
    let mut attempts_heard = 0usize;
    let mut out_of_order = Vec::new();
    let run_info = RunInfo {
        bench: "echo".into(),
        run_id: "soak".into(),
        tool_version: "test".into(),
        started_at: "t0".into(),
        finished_at: Some("t1".into()),
        provider: ProviderInfo {
            base_url: "sim".into(),
            model: "mock-model".into(),
            simulated: true,
            api_key_env: None,
            replicas: vec![],
            protocol: Default::default(),
            endpoint: None,
            price: None,
            batch: false,
        },
        confidence: 0.95,
        repeats: 1,
        cases: JOBS,
        jobs_planned: JOBS,
        stopped: None,
        endpoints: vec![],
        judge: None,
        self_judged: false,
        order_seed: None,
        search_shard: None,
        folder: None,
    };
    let settings = || AggregatorSettings {
        run: run_info.clone(),
        variants: vec!["echo".to_string()],
        endpoints: vec![],
        price: None,
        arm_prices: vec![],
        planned: JOBS,
        junit_spool: None,
        judge_price: None,
        labels: Default::default(),
    };
    // Heard live, as a run's reports are built.
    let mut live = promptgauge::runner::sequential::Decider::new(None, Aggregator::new(settings()));
    let started = tokio::time::Instant::now();
    let tally = runner::run(
        bench.clone(),
        jobs,
        &[runner::Lane::single(client, "sim")],
        &runner::RunOptions {
            scorers: Arc::new(promptgauge::grade::scorers_for(&bench).unwrap()),
            run_id: "soak".into(),
            attempts: true,
            ..Default::default()
        },
        CancellationToken::new(),
        &mut Fanout(vec![
            &mut journal,
            &mut live,
            &mut OnEvent(|e: &RunEvent<'_>| match e {
                RunEvent::JobStarted { job } => {
                    if phase[job.index] != 0 {
                        out_of_order.push(format!("{} started twice", job.index));
                    }
                    phase[job.index] = 1;
                }
                RunEvent::AttemptFinished(a) => {
                    attempts_heard += 1;
                    let index: usize = a.idempotency_key["pg-soak-".len()..].parse().unwrap();
                    if phase[index] != 1 {
                        out_of_order.push(format!("attempt of {index} in phase {}", phase[index]));
                    }
                }
                RunEvent::JobFinished { record, .. } => {
                    events += 1;
                    let index = record.job;
                    if phase[index] != 1 {
                        out_of_order.push(format!("{index} finished in phase {}", phase[index]));
                    }
                    phase[index] = 2;
                }
                _ => {}
            }),
        ]),
    )
    .await;
    assert!(tally.journal_error.is_none());
    // A job's attempts are heard after its start and before its end, whatever the faults.
    assert!(
        out_of_order.is_empty(),
        "{:?}",
        &out_of_order[..out_of_order.len().min(5)]
    );

    let virtual_wall = started.elapsed();
    assert_eq!(tally.finished, JOBS);
    assert_eq!(events, JOBS);
    let records = read_journal(&journal_path);
    assert_eq!(records.len(), JOBS);
    let mut graded = 0;
    let mut filtered = 0;
    for r in &records {
        let case = bench.cases.iter().find(|c| c.id == r.case_id).unwrap();
        match r.status {
            JobStatus::Graded => {
                graded += 1;
                // The whole text, exactly: never a prefix from a cut or stalled attempt.
                assert_eq!(r.output, case.expected[0], "{}", r.case_id);
                assert_eq!(r.score, Some(1.0));
                assert!(r.outcome.unwrap().answered());
            }
            JobStatus::Failed => {
                assert_eq!(r.output, "");
                assert_eq!(r.score, None);
                assert_eq!(r.attempts.len(), 8);
            }
            JobStatus::Filtered => {
                filtered += 1;
                // Counted apart: no score, and the attempt that was filtered was the last.
                assert_eq!((r.output.as_str(), r.score), ("", None));
                assert_eq!(r.outcome, Some(promptgauge::client::Outcome::Filtered));
                assert_eq!(r.finish_reason.as_deref(), Some("content_filter"));
            }
        }
    }
    let aborted_then_graded = records
        .iter()
        .filter(|r| {
            r.status == JobStatus::Graded
                && r.attempts.iter().any(|a| {
                    a.error
                        .as_deref()
                        .is_some_and(|e| e.contains("\"abort\", which is not a finish"))
                })
        })
        .count();
    assert!(
        aborted_then_graded > 20,
        "aborted attempts were retried, their value recorded: {aborted_then_graded}"
    );
    let stats = provider.stats();
    let attempts_recorded: usize = records.iter().map(|r| r.attempts.len()).sum();
    assert_eq!(attempts_heard, attempts_recorded);
    // Every finished generation was graded, and nothing else was.
    assert_eq!(stats.generations, graded);
    assert_eq!(
        stats.content_filters, filtered,
        "every filtered answer counted apart"
    );
    assert_eq!(
        (tally.graded, tally.filtered, tally.failed),
        (
            graded as usize,
            filtered as usize,
            JOBS - (graded + filtered) as usize
        )
    );
    let faults = [
        stats.aborts,
        stats.cuts,
        stats.resets,
        stats.stalls,
        stats.hangs,
        stats.error_events,
        stats.status_5xx,
        stats.status_429,
    ];
    assert!(
        faults.iter().all(|&n| n > 20),
        "every fault happened: {stats:?}"
    );
    assert!(stats.max_in_flight <= 16);
    assert!(
        graded as usize > JOBS * 9 / 10,
        "with 8 attempts most jobs get through: {graded}"
    );
    // Bounded: every attempt ends within its deadlines, so the run cannot drag on (about
    // eleven minutes of virtual time when written; about a second of real time).
    eprintln!("soak: {JOBS} jobs, {graded} graded, virtual wall {virtual_wall:?}, {stats:?}");
    assert!(
        virtual_wall < Duration::from_secs(45 * 60),
        "{virtual_wall:?}"
    );

    // Replayed from the journal, as `report DIR` does: the same numbers.
    let mut replayed =
        promptgauge::runner::sequential::Decider::new(None, Aggregator::new(settings()));
    runner::journal::read_planned(
        &journal_path,
        &PlanKeys::new(
            &bench.cases.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
            &["echo".to_string()],
            1,
            None,
        ),
        |r| replayed.add(&r),
    )
    .unwrap();
    let summary = live.finish().summary;
    assert_eq!(summary, replayed.finish().summary);
    let v = &summary.variants[0];
    assert_eq!(v.n, graded);
    assert_eq!(v.correct, graded);
    assert_eq!(v.failed, JOBS as u64 - graded - filtered);
    assert_eq!(v.filtered, filtered);
    assert_eq!(summary.complete, (graded + filtered) as usize == JOBS);
}

#[tokio::test(start_paused = true)]
async fn a_completed_key_is_replayed_not_generated_again() {
    let provider = Arc::new(Provider::new(MockConfig::default()));
    let client = Client::new(
        Arc::new(MemoryTransport::new(provider.clone())),
        ClientConfig::new("http://sim/v1", "m"),
    );
    let job = JobRequest {
        messages: vec![ChatMessage::new("user", "Echo: once only")],
        params: Map::new(),
        idempotency_key: "same".into(),
        reserve_tokens: 0,
    };
    let first = client.execute(&job).await;
    let second = client.execute(&job).await;
    assert_eq!(first.text, "once only");
    assert_eq!(second.text, "once only");
    let stats = provider.stats();
    assert_eq!(
        (stats.requests, stats.generations, stats.replays),
        (2, 1, 1)
    );
}

/// Runs 20 jobs against `replicas` simulators that all answer 500, on a paused clock;
/// returns the virtual time the run took and how many jobs failed.
async fn all_failing(replicas: usize) -> (Duration, usize) {
    let dir = tempfile::tempdir().unwrap();
    let bench = Arc::new(echo_bench(dir.path(), 20));
    let broken = || {
        Arc::new(Provider::new(MockConfig {
            faults: Faults {
                rate_5xx: 1.0,
                ..Faults::default()
            },
            ..MockConfig::default()
        }))
    };
    let urls: Vec<String> = (0..replicas).map(|i| format!("http://r{i}/v1")).collect();
    let transport = MemoryTransport::routes(urls.iter().map(|u| (u.clone(), broken())).collect());
    let mut config = ClientConfig::new(&urls[0], "mock-model");
    config.replicas = urls[1..].to_vec();
    config.limits.concurrency = 4;
    config.seed = Some(5);
    let client = Arc::new(Client::new(Arc::new(transport), config));
    let path = dir.path().join("results.jsonl");
    let mut journal = Journal::open(&path).unwrap();
    let started = tokio::time::Instant::now();
    let tally = runner::run(
        bench.clone(),
        Plan::new(20, &[0], 1).jobs,
        &[runner::Lane::single(client, "sim")],
        &runner::RunOptions::default(),
        CancellationToken::new(),
        &mut journal,
    )
    .await;
    (started.elapsed(), tally.failed)
}

#[tokio::test(start_paused = true)]
async fn with_every_replica_failing_jobs_fail_as_fast_as_with_one_endpoint() {
    let (one, failed_one) = all_failing(1).await;
    let (three, failed_three) = all_failing(3).await;
    assert_eq!((failed_one, failed_three), (20, 20));
    // Each job fails on its own deadlines and backoff (six attempts, about 8 s at most);
    // benched replicas never park it (before: 240 s benches, jobs waiting without end).
    assert!(one < Duration::from_secs(60), "{one:?}");
    assert!(
        three <= one + Duration::from_secs(10),
        "three replicas {three:?}, one {one:?}"
    );
}

/// An answer source that is not the client: it answers every other job itself (as a
/// provider's batch results would) and leaves the rest to the next source.
struct EveryOther {
    asked: std::sync::Mutex<Vec<String>>,
    heard: std::sync::atomic::AtomicUsize,
}

impl runner::source::AnswerSource for EveryOther {
    fn answer<'a>(&'a self, ask: &'a runner::source::Ask<'a>) -> runner::source::SourceFuture<'a> {
        let key = ask.request.idempotency_key.clone();
        self.asked.lock().unwrap().push(key.clone());
        let job: usize = key.rsplit('-').next().unwrap().parse().unwrap();
        let text = ask.request.messages[0]
            .content
            .trim_start_matches("Echo: ")
            .to_string();
        Box::pin(async move {
            job.is_multiple_of(2)
                .then(|| runner::source::Sourced {
                    result: promptgauge::client::JobResult {
                        attempts: Vec::new(),
                        refusal: None,
                        // Wrong on purpose for job 0: scored like any answer.
                        text: if job == 0 {
                            "nope".into()
                        } else {
                            text.trim().to_string()
                        },
                        reasoning: String::new(),
                        tool_calls: Vec::new(),
                        finish_reason: Some("stop".into()),
                        usage: None,
                        model: Some("batch".into()),
                        answer_ms: None,
                        failure: None,
                        aborted: false,
                    },
                    cached: true,
                })
                .into()
        })
    }

    fn heard(&self, _: &runner::source::Ask<'_>, _: &runner::source::Sourced) {
        self.heard.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_source_beside_the_client_answers_jobs_that_are_scored_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let bench = Arc::new(echo_bench(dir.path(), 10));
    let provider = Arc::new(Provider::new(MockConfig::default()));
    let client = Arc::new(Client::new(
        Arc::new(MemoryTransport::new(provider.clone())),
        ClientConfig::new("http://sim/v1", "mock-model"),
    ));
    let source = Arc::new(EveryOther {
        asked: Default::default(),
        heard: Default::default(),
    });
    let mut records = Vec::new();
    let tally = runner::run(
        bench.clone(),
        Plan::new(bench.cases.len(), &[0], 1).jobs,
        &[runner::Lane::single(client, "sim")],
        &runner::RunOptions {
            scorers: Arc::new(promptgauge::grade::scorers_for(&bench).unwrap()),
            run_id: "src".into(),
            sources: vec![source.clone()],
            ..Default::default()
        },
        CancellationToken::new(),
        &mut OnEvent(|e: &RunEvent<'_>| {
            if let RunEvent::JobFinished { record, .. } = e {
                records.push((*record).clone());
            }
        }),
    )
    .await;
    assert_eq!(tally.finished, 10);
    records.sort_by_key(|r| r.job);
    // Asked for every job; it answered five, the client the other five.
    assert_eq!(source.asked.lock().unwrap().len(), 10);
    assert_eq!(source.heard.load(std::sync::atomic::Ordering::SeqCst), 10);
    assert_eq!(provider.stats().requests, 5);
    for r in &records {
        assert_eq!(r.status, JobStatus::Graded, "{r:?}");
        assert_eq!(r.cached, r.job.is_multiple_of(2));
        let want = if r.job == 0 { 0.0 } else { 1.0 };
        assert_eq!(r.score, Some(want), "{r:?}");
    }
    assert_eq!(records[2].model.as_deref(), Some("batch"));
}

/// A run of two endpoints: the slow one's jobs wait on its own gate, and the fast one's
/// are sent by their own workers meanwhile — every fast job is answered while the slow
/// server has finished none (with one queue for both, the slow jobs would hold every
/// worker).
#[tokio::test(start_paused = true)]
async fn a_slow_endpoint_holds_back_none_of_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let bench = Arc::new(echo_bench(dir.path(), 24));
    let fast = Arc::new(Provider::new(MockConfig {
        first_token_delay: Duration::from_millis(20),
        ..MockConfig::default()
    }));
    let slow = Arc::new(Provider::new(MockConfig {
        first_token_delay: Duration::from_secs(50),
        ..MockConfig::default()
    }));
    let lane = |name: &str, provider: &Arc<Provider>, gate: usize| {
        let url = format!("http://{name}/v1");
        let mut config = ClientConfig::new(&url, "mock-model");
        config.limits.concurrency = gate;
        config.limits.first_token_timeout = Duration::from_secs(120);
        config.limits.total_timeout = Duration::from_secs(600);
        let transport = MemoryTransport::new(provider.clone());
        runner::Lane {
            client: Arc::new(Client::new(Arc::new(transport), config)),
            name: Some(name.to_string()),
            params: Default::default(),
            cache_key: url,
            dispatch: CancellationToken::new(),
            batch: false,
        }
    };
    let lanes = [lane("slow", &slow, 2), lane("fast", &fast, 4)];
    // Every case on both endpoints, the slow one's jobs first in each case.
    let jobs = Plan::grid(&(0..24).collect::<Vec<_>>(), &[0], 2, 1).jobs;
    let mut seen_when_fast_done = None;
    let mut fast_done = 0;
    let mut records = Vec::new();
    let mut listener = OnEvent(|e: &RunEvent<'_>| {
        if let RunEvent::JobFinished { record, .. } = e {
            if record.endpoint.as_deref() == Some("fast") {
                fast_done += 1;
                if fast_done == 24 {
                    seen_when_fast_done = Some(slow.stats());
                }
            }
            records.push((
                record.endpoint.clone(),
                record.arm().into_owned(),
                record.status,
            ));
        }
    });
    let options = runner::RunOptions {
        scorers: Arc::new(promptgauge::grade::scorers_for(&bench).unwrap()),
        ..Default::default()
    };
    let tally = runner::run(
        bench,
        jobs,
        &lanes,
        &options,
        CancellationToken::new(),
        &mut listener,
    )
    .await;
    assert_eq!((tally.finished, tally.graded), (48, 48));
    let slow_then = seen_when_fast_done.expect("every fast job finished");
    assert_eq!(
        slow_then.generations, 0,
        "the slow server had finished nothing when the fast one was done"
    );
    assert!(slow_then.in_flight <= 2, "{slow_then:?}");
    // Each server saw its own jobs, within its own gate.
    let (f, s) = (fast.stats(), slow.stats());
    assert_eq!((f.requests, s.requests), (24, 24));
    assert_eq!(f.max_in_flight, 4, "the fast gate was used in full");
    assert_eq!(s.max_in_flight, 2);
    // Records name their endpoint, and their arm is ENDPOINT/VARIANT.
    assert!(
        records
            .iter()
            .all(|(e, arm, _)| arm == &format!("{}/echo", e.as_deref().unwrap()))
    );
}

/// A batch lane on the simulator's batch API, on a paused clock: a batch that takes three
/// hours is polled with a doubling wait (10 s, 20 s, … up to 5 min), so it is looked at a
/// few dozen times, not a thousand; its answers are the records, each with its batch and
/// no latency.
#[tokio::test(start_paused = true)]
async fn a_batch_lane_polls_a_slow_batch_with_a_growing_wait() {
    let dir = tempfile::tempdir().unwrap();
    let bench = Arc::new(echo_bench(dir.path(), 30));
    let provider = Arc::new(Provider::new(MockConfig {
        batch_delay: Duration::from_secs(3 * 3600),
        ..MockConfig::default()
    }));
    let url = "http://batch/v1";
    let transport = MemoryTransport::new(provider.clone());
    let lane = runner::Lane {
        batch: true,
        ..runner::Lane::single(
            Arc::new(Client::new(
                Arc::new(transport),
                ClientConfig::new(url, "mock-model"),
            )),
            url,
        )
    };
    let jobs = Plan::new(30, &[0], 1).jobs;
    let options = runner::RunOptions {
        scorers: Arc::new(promptgauge::grade::scorers_for(&bench).unwrap()),
        batch: Some(runner::batch::BatchSettings {
            poll: Duration::from_secs(10),
            poll_max: Duration::from_secs(300),
            max_requests: Some(10),
            ..Default::default()
        }),
        ..Default::default()
    };
    let started = tokio::time::Instant::now();
    let mut records = Vec::new();
    let tally = runner::run(
        bench,
        jobs,
        std::slice::from_ref(&lane),
        &options,
        CancellationToken::new(),
        &mut OnEvent(|e: &RunEvent<'_>| {
            if let RunEvent::JobFinished { record, .. } = e {
                records.push((*record).clone());
            }
        }),
    )
    .await;
    let waited = started.elapsed();
    assert_eq!((tally.finished, tally.graded), (30, 30));
    assert_eq!(provider.batches_created(), 3);
    assert!(waited >= Duration::from_secs(3 * 3600), "{waited:?}");
    // Done within one longest wait of the batches' end.
    assert!(waited <= Duration::from_secs(3 * 3600 + 300), "{waited:?}");
    // Three batches looked at together, each round: 10+20+40+80+160 s, then every 5 min.
    let rounds = 5 + (3 * 3600 - 310) / 300 + 2;
    assert!(
        provider.batch_polls() <= 3 * rounds,
        "{} looks",
        provider.batch_polls()
    );
    assert_eq!(provider.stats().generations, 30);
    for r in &records {
        assert!(r.batch.is_some() && r.latency_ms.is_none(), "{r:?}");
    }
}
