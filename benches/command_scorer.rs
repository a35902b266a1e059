//! The `command` scorer's own cost per answer (run by `bench/run`, or `cargo bench --bench
//! command_scorer`): a trivial scorer process (it replies `{"score": 1}` to each line) is
//! asked N answers, and promptgauge's CPU time (user + system of this process alone, from
//! getrusage: the scorer's own time is another process's) is divided by N. Prints one line.
//! The scorer parses each request for its id, as every scorer does.

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use std::path::Path;
use std::time::Instant;

use promptgauge::client::ChatMessage;
use promptgauge::grade::command::CommandScorer;
use promptgauge::grade::{Answer, ScoreContext, ScoreInput, Scorer};
use promptgauge::suite::{Case, FilePos};

/// CPU seconds this process has used (all its threads).
fn cpu_seconds() -> f64 {
    // SAFETY: a zeroed `rusage` is a valid one (integers and timevals).
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("trivial.py"),
        "import json, sys\nfor line in sys.stdin:\n    sys.stdout.write('{\"id\": %d, \"score\": 1}\\n' % json.loads(line)[\"id\"])\n    sys.stdout.flush()\n",
    )
    .unwrap();
    let case = Case {
        id: "c-001".into(),
        vars: promptgauge::suite::cases::Vars(vec![(
            "question".into(),
            "What is the capital of France, and why?".into(),
        )]),
        expected: vec!["Paris".into()],
        expected_json: None,
        messages: vec![],
        files: vec![],
        tool_script: Vec::new(),
        grade: None,
        tags: vec!["geo".into()],
        group: None,
        location: FilePos::line(Path::new("cases.jsonl"), 1),
    };
    let messages = vec![
        ChatMessage::new("system", "Answer in one sentence."),
        ChatMessage::new("user", "What is the capital of France, and why?"),
    ];
    let answer = Answer {
        text: "Paris is the capital of France: the seat of its government since the 10th century, more or less.".into(),
        finish_reason: Some("stop".into()),
        ..Answer::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let context = ScoreContext::default();
    let n = 20_000;
    for workers in [1u32, 4] {
        let scorer = CommandScorer::new(
            &["python3".into(), "trivial.py".into()],
            &[],
            dir.path(),
            workers,
            std::time::Duration::from_secs(30),
            true,
        )
        .unwrap();
        let (wall, cpu) = rt.block_on(async {
            // Warm: the processes started (Python's start-up is not the per-answer cost).
            let ask = |key: &'static str| {
                scorer.score(
                    ScoreInput {
                        key,
                        repeat: 0,
                        case: &case,
                        messages: &messages,
                        answer: &answer,
                    },
                    &context,
                )
            };
            futures_util::future::join_all((0..workers).map(|_| ask("warm"))).await;
            let (cpu0, t0) = (cpu_seconds(), Instant::now());
            let mut pending = futures_util::stream::FuturesUnordered::new();
            let mut sent = 0;
            use futures_util::StreamExt;
            while sent < n || !pending.is_empty() {
                while sent < n && pending.len() < 2 * workers as usize {
                    pending.push(ask("job"));
                    sent += 1;
                }
                let s = pending.next().await.unwrap().unwrap();
                assert_eq!(s.value, 1.0);
            }
            (t0.elapsed().as_secs_f64(), cpu_seconds() - cpu0)
        });
        println!(
            "command scorer, {workers} worker{}: {:.3} ms of promptgauge's CPU per answer ({n} answers, {:.2} s CPU), {:.0} answers/s (a trivial Python scorer; target < 0.1 ms)",
            if workers == 1 { "" } else { "s" },
            cpu / n as f64 * 1e3,
            cpu,
            n as f64 / wall
        );
        assert_eq!(scorer.started(), u64::from(workers));
    }
}
