//! The `expr` scorer's cost per answer (run by `bench/run`, or `cargo bench --bench
//! expr_scorer`): each of three expressions people write (words and a length, JSON fields
//! against `expected`, a regex) scores N answers, and this process's CPU time (user +
//! system, from getrusage) is divided by N. Prints one line per expression.

// A benchmark is a script read from top to bottom; it is not split to a length.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use futures_util::FutureExt;
use promptgauge::client::ChatMessage;
use promptgauge::grade::expr::ExprScorer;
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
    let case = Case {
        id: "refund-card".into(),
        vars: promptgauge::suite::cases::Vars(vec![
            ("question".into(), "How long does a refund take?".into()),
            ("topic".into(), "refunds".into()),
        ]),
        expected: vec!["billing".into()],
        expected_json: None,
        messages: vec![],
        files: vec![],
        tool_script: Vec::new(),
        grade: None,
        tags: vec![],
        group: None,
        location: FilePos::line(Path::new("cases.jsonl"), 1),
    };
    let messages = vec![ChatMessage::new("user", "How long does a refund take?")];
    let prose = "Refunds reach your card within 5 business days of our receiving the item; we email you when it is on its way.";
    let json =
        r#"{"category": "billing", "priority": "high", "items": [{"sku": "A-1"}, {"sku": "B-2"}]}"#;
    let checks = [
        (
            "words and a length",
            "'refund' in output|lower and vars.topic|length > 0 and output|length < 400",
            prose,
        ),
        (
            "JSON fields",
            "json.category == expected and json['items']|length >= 2",
            json,
        ),
        (
            "a regex",
            r#"output is matches("\\b5 business days\\b")"#,
            prose,
        ),
    ];
    let context = ScoreContext::default();
    let n = 200_000;
    for (what, expr, text) in checks {
        let scorer = ExprScorer::new(expr).unwrap();
        let answer = Answer {
            text: text.into(),
            finish_reason: Some("stop".into()),
            ..Answer::default()
        };
        let score = || {
            scorer
                .score(
                    ScoreInput {
                        key: "job",
                        repeat: 0,
                        case: &case,
                        messages: &messages,
                        answer: &answer,
                    },
                    &context,
                )
                .now_or_never()
                .unwrap()
                .unwrap()
        };
        assert_eq!(score().value, 1.0, "{expr}");
        let cpu0 = cpu_seconds();
        for _ in 0..n {
            std::hint::black_box(score());
        }
        let cpu = cpu_seconds() - cpu0;
        println!(
            "expr scorer, {what} (`{expr}`): {:.4} ms of CPU per answer ({n} answers, {:.2} s CPU; target ≤ 0.01 ms)",
            cpu / n as f64 * 1e3,
            cpu
        );
    }
}
