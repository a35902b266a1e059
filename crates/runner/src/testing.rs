//! Builders the tests of this crate and of the layers above start from (compiled for tests,
//! and for other crates' tests through the `test-support` feature).

use promptgauge_client::{Outcome, Usage};

use crate::{JobRecord, JobStatus};

/// A graded job of variant `v` on `case` whose answer `x` was right: the record tests
/// start from and change.
pub fn record(case: &str) -> JobRecord {
    JobRecord {
        job: 0,
        case_id: case.into(),
        variant: "v".into(),
        endpoint: None,
        repeat: 0,
        status: JobStatus::Graded,
        outcome: Some(Outcome::Complete),
        output: "x".into(),
        partial_output: None,
        reasoning: String::new(),
        finish_reason: Some("stop".into()),
        tool_calls: vec![],
        expected: vec!["x".into()],
        read: None,
        extracted: Some("x".into()),
        not_found: None,
        correct: Some(true),
        score: Some(1.0),
        score_detail: None,
        parts: Vec::new(),
        judge: vec![],
        judge_usage: None,
        error: None,
        attempts: vec![],
        ttft_ms: None,
        latency_ms: None,
        answer_ms: None,
        usage: Usage::default(),
        model: None,
        tags: vec![],
        group: None,
        cached: false,
        resent: 0,
        batch: None,
        refused: false,
        usage_anomaly: None,
        held: None,
        files: Vec::new(),
        steps: Vec::new(),
        turns: Vec::new(),
    }
}
