//! A bench's `gates:` (docs/guide/ci.md, "Gates the bench carries"): `run` applies each
//! as if its flag were given (a failed gate exits 1), a flag given overrides the bench's
//! value of the same gate, `check` lists them, and an unknown key is refused with its file,
//! line and the nearest name.

use std::path::Path;

use crate::common::*;
use promptgauge::mock::MockConfig;

/// Runs bench.yaml in `d` against `url`: the exit code and what it said.
fn run(d: &Path, url: &str, flags: &[&str]) -> (i32, String) {
    let o = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            url,
            "--model",
            "m",
            "--price",
            "1,2",
        ])
        .args(["--no-store", "--out"])
        .arg(d.join("reports"))
        .args(flags)
        .output()
        .unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn a_bench_s_gates_apply_and_a_flag_overrides_each() {
    // Every answer takes at least 20 ms.
    let (_rt, server) = start_mock(MockConfig {
        first_token_delay: std::time::Duration::from_millis(20),
        ..MockConfig::default()
    });
    let url = server.base_url();
    let b = bench_dir("gates:\n  max_latency: 5ms\n  max_cost_per_job: 0.0000001\n");
    let d = b.path();
    let check = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    assert!(
        said.contains("gates the bench carries (`gates:`, each unless its flag is given): max_cost_per_job $0.0000001, max_latency 5ms"),
        "{said}"
    );
    // The bench's gates fail the run: exit 1.
    let (code, said) = run(d, &url, &[]);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("gate failed: max-latency 5ms: plain: 12 of 12 jobs took over 5 ms"),
        "{said}"
    );
    assert!(
        said.contains("gate failed: max-cost-per-job $0.0000001: plain: $"),
        "{said}"
    );
    // A flag overrides the bench's value of its gate; the other still applies.
    let (code, said) = run(d, &url, &["--max-latency", "60s"]);
    assert_eq!(code, 1, "{said}");
    assert!(!said.contains("gate failed: max-latency"), "{said}");
    assert!(said.contains("gate failed: max-cost-per-job"), "{said}");
    let (code, said) = run(
        d,
        &url,
        &["--max-latency", "60s", "--max-cost-per-job", "1"],
    );
    assert_eq!(code, 0, "{said}");
    // A cost gate needs a price: refused before anything is sent, as --max-cost is.
    let b = bench_dir("gates:\n  max_cost_per_job: 0.01\n");
    let d = b.path();
    let text = std::fs::read_to_string(d.join("bench.yaml"))
        .unwrap()
        .replace("price: { input_per_mtok: 1.0, output_per_mtok: 2.0 }\n", "");
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    let check = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--max-cost-per-job needs each job's cost"),
        "{said}"
    );
}

#[test]
fn an_unknown_gate_is_refused_with_its_line_and_the_nearest_name() {
    let b = bench_dir("gates:\n  max_latncy: 5s\n");
    let check = promptgauge(b.path())
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr);
    assert_eq!(check.status.code(), Some(2), "{said}");
    assert!(
        said.contains("bench.yaml:8:3: unknown key `max_latncy`")
            && said.contains("did you mean `max_latency`?"),
        "{said}"
    );
}
