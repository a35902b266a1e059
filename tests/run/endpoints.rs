//! Named endpoints (`endpoints:` in a bench, `--endpoints`, `--endpoint`): each with its own
//! server, key, price, parameters, limits and headers.

use promptgauge::mock::MockConfig;
use promptgauge::report::Summary;

use crate::common::*;

const ENDPOINTS: &str = r#"endpoints:
  - name: hosted
    base_url: "@HOSTED@"
    model: big-model
    api_key_env: HOSTED_KEY
    price: { input_per_mtok: 10.0, output_per_mtok: 30.0 }
    headers: { OpenAI-Organization: org-42, X-Team-Token: "${TEAM_TOKEN}" }
  - name: local
    base_url: "@LOCAL@"
    model: small-model
    price: { input_per_mtok: 0.0, output_per_mtok: 0.0 }
    params: { max_tokens: 50 }
    limits: { concurrency: 2 }
"#;

fn summary(run: &std::path::Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

#[test]
fn a_named_endpoint_runs_with_its_own_server_key_price_params_limits_and_headers() {
    let strict = |model: &str, key: Option<&str>| MockConfig {
        model: model.into(),
        strict_model: true,
        api_key: key.map(String::from),
        ..MockConfig::default()
    };
    let (_rt, hosted) = start_mock(strict("big-model", Some("hosted-secret-key")));
    let (_rt2, local) = start_mock(strict("small-model", None));
    let extra = ENDPOINTS
        .replace("@HOSTED@", &hosted.base_url())
        .replace("@LOCAL@", &local.base_url());
    let bench = arithmetic_bench(6, 2, &extra);
    let d = bench.path();
    let run = |args: &[&str]| {
        promptgauge(d)
            .args(["run", "bench.yaml", "--no-store", "--quiet"])
            .args(args)
            .env("HOSTED_KEY", "hosted-secret-key")
            .env("TEAM_TOKEN", "team-token-value-1234")
            // A named endpoint's URL is its own: the environment's does not move it.
            .env("PROMPTGAUGE_BASE_URL", "http://127.0.0.1:9/v1")
            .output()
            .unwrap()
    };

    // The hosted one alone: its key and its headers.
    let out = run(&["--endpoints", "hosted"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(local.provider.bodies().len(), 0);
    let sent = hosted.provider.headers();
    assert_eq!(sent.len(), 12);
    for h in &sent {
        assert_eq!(header(h, "openai-organization"), Some("org-42"));
        assert_eq!(header(h, "x-team-token"), Some("team-token-value-1234"));
    }
    let hosted_run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&hosted_run);
    assert_eq!(s.run.provider.endpoint.as_deref(), Some("hosted"));
    assert_eq!(s.run.provider.model, "big-model");
    let hosted_cost = s.variants[0].cost_usd.unwrap();
    assert!(hosted_cost > 0.0);
    // A header read from a variable is a secret: never written anywhere.
    for f in [
        "run.json",
        "summary.json",
        "results.jsonl",
        "summary.md",
        "report.html",
    ] {
        let text = std::fs::read_to_string(hosted_run.join(f)).unwrap();
        assert!(!text.contains("team-token-value-1234"), "{f}");
        assert!(!text.contains("hosted-secret-key"), "{f}");
    }

    // --endpoints local: its server, its price (free), its params and its gate.
    let out = run(&["--endpoints", "local"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bodies = local.provider.bodies();
    assert_eq!(bodies.len(), 12);
    assert!(
        bodies
            .iter()
            .all(|b| b["model"] == "small-model" && b["max_tokens"] == 50)
    );
    assert!(
        local
            .provider
            .headers()
            .iter()
            .all(|h| header(h, "x-team-token").is_none())
    );
    assert!(local.provider.stats().max_in_flight <= 2);
    let local_run = run_dirs(&d.join("reports"))
        .into_iter()
        .find(|r| r != &hosted_run)
        .unwrap();
    let s = summary(&local_run);
    assert_eq!(s.run.provider.endpoint.as_deref(), Some("local"));
    assert_eq!(
        s.variants[0].cost_usd,
        Some(0.0),
        "the local price, not the bench's"
    );

    // An endpoint added on the command line runs (alone, as --endpoints names it),
    // unpriced: the bench's price is for the endpoints it writes.
    let out = run(&[
        "--endpoint",
        &format!("again={},model=small-model", local.base_url()),
        "--endpoints",
        "again",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(local.provider.bodies().len(), 24);

    // Naming a bench's endpoint moves it for the run: its headers stay, and its price
    // only where --price gives it (another server and model are another endpoint).
    let out = run(&[
        "--endpoint",
        &format!("hosted={},model=small-model", local.base_url()),
        "--endpoints",
        "hosted",
        "--price",
        "hosted=10,30",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved = &local.provider.headers()[24..];
    assert_eq!(moved.len(), 12);
    assert!(
        moved
            .iter()
            .all(|h| header(h, "openai-organization") == Some("org-42"))
    );
    let newest = run_dirs(&d.join("reports"))
        .into_iter()
        .max_by_key(|r| {
            std::fs::metadata(r.join("summary.json"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .unwrap();
    let s = summary(&newest);
    assert_eq!(s.run.provider.endpoint.as_deref(), Some("hosted"));
    assert!(
        s.variants[0].cost_usd.unwrap() > 0.0,
        "the price --price gives"
    );

    // -v shows each attempt's headers: a value read from a variable is scrubbed there too.
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--no-store",
            "-v",
            "--limit",
            "1",
            "--endpoints",
            "hosted",
        ])
        .env("HOSTED_KEY", "hosted-secret-key")
        .env("TEAM_TOKEN", "team-token-value-1234")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("OpenAI-Organization: org-42"), "{stderr}");
    assert!(!stderr.contains("team-token-value-1234"), "{stderr}");

    // A resume runs on the run's endpoint: naming another is refused.
    let out = run(&[
        "--resume",
        hosted_run.to_str().unwrap(),
        "--endpoints",
        "local",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a resume runs on the run's endpoint"));

    // An empty model name is refused, not sent.
    let out = run(&["--endpoint", &format!("x={},model=", local.base_url())]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("model name of endpoint x is empty"));

    // Bad selections are refused before anything is sent.
    let out = run(&["--endpoints", "nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("known endpoints: hosted, local"),
        "{stderr}"
    );
    // --model moves one endpoint: with two, which? Refused, with the way to move one.
    let out = run(&["--endpoints", "hosted,local", "--model", "other"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--model moves the run's one endpoint, and this run has 2 (hosted, local)")
            && stderr.contains("--endpoint NAME=URL,model=M"),
        "{stderr}"
    );
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store", "--quiet"])
        .env("HOSTED_KEY", "hosted-secret-key")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "TEAM_TOKEN is not set");
    assert!(String::from_utf8_lossy(&out.stderr).contains("$TEAM_TOKEN"));
    assert_eq!(hosted.provider.bodies().len(), 14, "nothing more was sent");
}

#[test]
fn a_bench_with_endpoint_and_endpoints_or_a_bad_header_is_refused_where_it_is_written() {
    for (extra, says) in [
        (
            "endpoint: { model: m }\nendpoints:\n  - { name: a, model: m }\n",
            "both `endpoint:` and `endpoints:`",
        ),
        (
            "endpoints:\n  - { name: a, model: m }\n  - { name: a, model: n }\n",
            "`a` is named twice",
        ),
        (
            "endpoints:\n  - { name: \"a b\", model: m }\n",
            "not a usable name",
        ),
        (
            "endpoints:\n  - { name: a, model: m, headers: { Authorization: x } }\n",
            "set by promptgauge",
        ),
        (
            "endpoints:\n  - { name: a, model: m, headers: { X-N: 3 } }\n",
            "must be text",
        ),
        ("endpoints: []\n", "`endpoints:` lists no endpoint"),
        (
            "endpoints:\n  - { name: plain, base_url: mock, model: m }\n",
            "endpoint `plain` has the name of a variant",
        ),
        (
            "endpoints:\n  - { name: a, base_url: \"http://127.0.0.1:9/v1\" }\n  - { name: b, base_url: mock, model: m }\n",
            "endpoint a names no model",
        ),
        (
            "endpoints:\n  - { name: a, base_url: mock, model: m }\n  - { name: b, base_url: mock, model: m, headers: { X-P: \"${PG_UNSET_VARIABLE}\" } }\n",
            "PG_UNSET_VARIABLE",
        ),
    ] {
        let bench = arithmetic_bench(2, 1, extra);
        let out = promptgauge(bench.path())
            .args(["check", "bench.yaml"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {stderr}");
        assert!(
            stderr.contains(says) && stderr.contains("bench.yaml"),
            "{extra}: {stderr}"
        );
    }
}

#[test]
fn a_judge_named_by_endpoint_judges_there_with_its_model_key_price_and_headers() {
    let (_rt, hosted) = start_mock(MockConfig {
        model: "judge-m".into(),
        strict_model: true,
        api_key: Some("judge-secret-key".into()),
        ..MockConfig::default()
    });
    let (_rt2, local) = start_mock(MockConfig {
        model: "small-model".into(),
        strict_model: true,
        ..MockConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: String = (1..=4)
        .map(|i| format!("{{\"id\": \"q{i}\", \"vars\": {{\"q\": \"Is shipping free ({i})?\"}}, \"expected\": \"Free over $50\"}}\n"))
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    std::fs::write(d.join("p.txt"), "{{ q }}").unwrap();
    let bench = format!(
        r#"name: judged
cases: cases.jsonl
variants: [p.txt]
grade: {{ kind: judge, rubric: "Right and polite." }}
endpoints:
  - name: hosted
    base_url: "{}"
    model: judge-m
    api_key_env: HOSTED_KEY
    price: {{ input_per_mtok: 100.0, output_per_mtok: 100.0 }}
    headers: {{ X-Team: team-a }}
  - name: local
    base_url: "{}"
    model: small-model
judge: {{ endpoint: hosted }}
"#,
        hosted.base_url(),
        local.base_url()
    );
    std::fs::write(d.join("bench.yaml"), bench).unwrap();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store", "--endpoints", "local"])
        .env("HOSTED_KEY", "judge-secret-key")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Answers at local, verdicts at hosted: with the judge's model, key and headers.
    assert!(
        local
            .provider
            .bodies()
            .iter()
            .all(|b| b["model"] == "small-model")
    );
    let judged = hosted.provider.headers();
    assert_eq!(judged.len(), 4);
    for h in &judged {
        assert_eq!(header(h, "x-team"), Some("team-a"));
        assert_eq!(header(h, "authorization"), Some("Bearer judge-secret-key"));
    }
    assert!(
        hosted
            .provider
            .bodies()
            .iter()
            .all(|b| b["model"] == "judge-m")
    );
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    let judge = s.run.judge.clone().unwrap();
    assert_eq!(
        (judge.endpoint.as_deref(), judge.model.as_str()),
        (Some("hosted"), "judge-m")
    );
    assert!(!s.run.self_judged);
    assert!(
        s.variants[0].judge_cost_usd.unwrap() > 0.0,
        "the hosted price"
    );

    // A judge naming no such endpoint is refused where it is written.
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        text.replace(
            "judge: { endpoint: hosted }",
            "judge: { endpoint: nowhere }",
        ),
    )
    .unwrap();
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("judge.endpoint names `nowhere`") && stderr.contains("hosted, local"),
        "{stderr}"
    );
}

#[test]
fn an_azure_style_key_goes_in_the_api_key_header_and_nowhere_else() {
    let (_rt, azure) = start_mock(MockConfig {
        api_key: Some("azure-key-0123456789".into()),
        ..MockConfig::default()
    });
    let bench = arithmetic_bench(
        2,
        1,
        &format!(
            "endpoints:\n  - {{ name: azure, base_url: \"{}\", model: mock-model, api_key_env: AZURE_KEY, key_header: api-key }}\n",
            azure.base_url()
        ),
    );
    let out = promptgauge(bench.path())
        .args(["run", "bench.yaml", "--no-store", "--quiet"])
        .env("AZURE_KEY", "azure-key-0123456789")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = azure.provider.headers();
    assert_eq!(sent.len(), 2);
    for h in &sent {
        assert_eq!(header(h, "api-key"), Some("azure-key-0123456789"));
        assert_eq!(header(h, "authorization"), None);
    }
}

/// Three endpoints, one per protocol, each with its price and gate.
const GRID: &str = r#"endpoints:
  - name: hosted
    base_url: "@CHAT@"
    model: big-model
    price: { input_per_mtok: 10.0, output_per_mtok: 30.0 }
  - name: responses
    base_url: "@RESPONSES@"
    model: mid-model
    protocol: openai-responses
    price: { input_per_mtok: 1.0, output_per_mtok: 2.0 }
    limits: { concurrency: 3 }
  - name: local
    base_url: "@MESSAGES@"
    model: tiny-model
    protocol: anthropic-messages
    price: { input_per_mtok: 0.0, output_per_mtok: 0.0 }
    limits: { concurrency: 2 }
"#;

#[test]
fn three_endpoints_run_as_one_grid_paired_on_both_axes() {
    let (_a, chat) = start_mock(MockConfig::default());
    let (_b, responses) = start_mock(MockConfig::default());
    let (_c, messages) = start_mock(MockConfig::default());
    let extra = GRID
        .replace("@CHAT@", &chat.base_url())
        .replace("@RESPONSES@", &responses.base_url())
        .replace("@MESSAGES@", &messages.base_url());
    let bench = arithmetic_bench(30, 2, &extra);
    let d = bench.path();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store", "--jobs-csv", "jobs.csv"])
        .args(["--junit", "junit.xml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{stderr}\n{stdout}"
    );
    // Each server saw its own 60 jobs, on its own protocol's path, within its own gate.
    let (c, r, m) = (
        chat.provider.stats(),
        responses.provider.stats(),
        messages.provider.stats(),
    );
    assert_eq!((c.requests, r.requests, m.requests), (60, 60, 60));
    assert_eq!((c.responses_requests, r.responses_requests), (0, 60));
    assert_eq!(m.anthropic_messages, 60);
    assert!(r.max_in_flight <= 3 && m.max_in_flight <= 2, "{r:?} {m:?}");
    for (server, model) in [
        (&chat, "big-model"),
        (&responses, "mid-model"),
        (&messages, "tiny-model"),
    ] {
        assert!(server.provider.bodies().iter().all(|b| b["model"] == model));
    }
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    assert_eq!(s.schema, "promptgauge.summary/3");
    // The committed schema describes it.
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/summary.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let instance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&instance)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let arms: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        arms,
        [
            "hosted/plain",
            "hosted/careful",
            "responses/plain",
            "responses/careful",
            "local/plain",
            "local/careful"
        ]
    );
    assert_eq!(s.run.endpoints.len(), 3);
    for v in &s.variants {
        assert_eq!(v.n, 30, "{}", v.name);
        assert_eq!(
            v.name,
            format!(
                "{}/{}",
                v.endpoint.as_deref().unwrap(),
                v.variant.as_deref().unwrap()
            )
        );
    }
    // Each arm's cost at its endpoint's price: the local one is free, the hosted one dearest.
    let cost = |arm: &str| {
        s.variants
            .iter()
            .find(|v| v.name == arm)
            .unwrap()
            .cost_usd
            .unwrap()
    };
    assert_eq!(cost("local/plain"), 0.0);
    assert!(cost("hosted/plain") > 5.0 * cost("responses/plain"));
    // Both axes, each paired by case: which prompt at each endpoint (3), which model for each
    // variant (2 × 2); Holm within each family.
    use promptgauge::report::compare::Axis;
    let family = |axis: Axis| {
        s.comparisons
            .iter()
            .filter(|c| c.family.as_ref().is_some_and(|f| f.axis == axis))
            .map(|c| (c.variant.as_str(), c.against.as_str()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        family(Axis::Variants),
        [
            ("hosted/careful", "hosted/plain"),
            ("responses/careful", "responses/plain"),
            ("local/careful", "local/plain")
        ]
    );
    assert_eq!(
        family(Axis::Endpoints),
        [
            ("responses/plain", "hosted/plain"),
            ("local/plain", "hosted/plain"),
            ("responses/careful", "hosted/careful"),
            ("local/careful", "hosted/careful")
        ]
    );
    for c in &s.comparisons {
        assert_eq!(c.cases, 30, "{} paired on every case", c.variant);
    }
    // Holm within each family, by hand: sorted p-values times (m − rank), made monotone.
    let mut families: Vec<Vec<&promptgauge::report::compare::Comparison>> = Vec::new();
    for c in &s.comparisons {
        match families.iter_mut().find(|f| f[0].family == c.family) {
            Some(f) => f.push(c),
            None => families.push(vec![c]),
        }
    }
    assert_eq!(families.len(), 5, "3 endpoints + 2 variants");
    for f in &families {
        let mut ps: Vec<(f64, f64)> = f
            .iter()
            .map(|c| (c.p_value.unwrap(), c.p_holm.unwrap()))
            .collect();
        ps.sort_by(|a, b| a.0.total_cmp(&b.0));
        let m = ps.len();
        let mut running: f64 = 0.0;
        for (rank, (p, holm)) in ps.iter().enumerate() {
            running = running.max((p * (m - rank) as f64).min(1.0));
            assert!(
                (running - holm).abs() < 1e-12,
                "{p} → {holm}, by hand {running}"
            );
        }
    }
    // The tiny model errs more: the verdict says which model is worse.
    let tiny = s
        .comparisons
        .iter()
        .find(|c| c.variant == "local/plain")
        .unwrap();
    assert!(tiny.difference.unwrap() < 0.0, "{tiny:?}");
    // Journal records name their endpoint; the per-job CSV has an endpoint column.
    let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert_eq!(journal.matches("\"endpoint\":\"local\"").count(), 60);
    let csv = std::fs::read_to_string(d.join("jobs.csv")).unwrap();
    assert!(csv.starts_with("case_id,variant,endpoint,repeat"), "{csv}");
    assert_eq!(csv.lines().filter(|l| l.contains(",local,")).count(), 60);
    // Both axes in every report.
    let md = std::fs::read_to_string(run.join("summary.md")).unwrap();
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    for text in [&md, &html, &stdout.to_string()] {
        assert!(text.contains("Which prompt: each variant against the baseline variant"));
        assert!(text.contains("Which model: each endpoint against the baseline endpoint"));
        assert!(text.contains("local/plain is not distinguishable from hosted/plain"));
    }
    assert!(
        md.contains("| plain (baseline) | 76.7% [59.1, 88.2] |")
            && md.contains("| variant | hosted | hosted cost | responses | responses cost | local | local cost |"),
        "{md}"
    );
    assert!(
        md.contains("Holm over 2 comparisons (the larger question's family)"),
        "{md}"
    );
    // summary.csv: a row per cell, its own model, both axes' verdicts.
    let mut csv = csv::Reader::from_path(run.join("summary.csv")).unwrap();
    let head = csv.headers().unwrap().clone();
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    let local = rows.iter().find(|r| &r[0] == "local/plain").unwrap();
    assert_eq!(&local[col("model")], "tiny-model");
    assert_eq!(&local[col("endpoint")], "local");
    assert_eq!(&local[col("vs_baseline_endpoint")], "hosted/plain");
    assert_eq!(&local[col("endpoint_verdict")], "not distinguishable");
    let careful = rows.iter().find(|r| &r[0] == "local/careful").unwrap();
    assert_eq!(&careful[col("verdict")], "better", "against local/plain");
    let junit = std::fs::read_to_string(d.join("junit.xml")).unwrap();
    assert!(junit.contains("classname=\"promptgauge.arithmetic.local.careful\""));

    // A killed run resumes on the same grid: only the jobs missing from the journal are
    // sent, each to its own endpoint, and the figures come out the same.
    let lines: Vec<&str> = journal.lines().collect();
    let kept: Vec<&str> = lines[..lines.len() - 50].to_vec();
    let lost_local = lines[lines.len() - 50..]
        .iter()
        .filter(|l| l.contains("\"endpoint\":\"local\""))
        .count();
    std::fs::write(run.join("results.jsonl"), kept.join("\n") + "\n").unwrap();
    let out = promptgauge(d)
        .args([
            "run",
            "--resume",
            run.to_str().unwrap(),
            "--no-store",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = |p: &promptgauge::mock::StatsSnapshot| p.requests;
    let after = [
        chat.provider.stats(),
        responses.provider.stats(),
        messages.provider.stats(),
    ];
    assert_eq!(after.iter().map(sent).sum::<u64>(), 180 + 50);
    assert_eq!(sent(&after[2]), 60 + lost_local as u64);
    let resumed = summary(&run);
    assert_eq!(resumed.schema, "promptgauge.summary/3");
    for (a, b) in resumed.variants.iter().zip(&s.variants) {
        assert_eq!((&a.name, a.n, a.correct), (&b.name, b.n, b.correct));
    }
    // --endpoints cannot narrow the grid of a run being resumed.
    let out = promptgauge(d)
        .args(["run", "--resume", run.to_str().unwrap(), "--no-store"])
        .args(["--endpoints", "hosted"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot leave some out"));
}

/// Two endpoints serving the same model at different servers, each with its own price.
const PAIR: &str = r#"endpoints:
  - name: big
    base_url: "@BIG@"
    model: big-model
    price: { input_per_mtok: 5.0, output_per_mtok: 15.0 }
  - name: mini
    base_url: "@MINI@"
    model: mini-model
    protocol: anthropic-messages
    price: { input_per_mtok: 0.1, output_per_mtok: 0.2 }
"#;

#[test]
fn a_grid_is_gated_stored_compared_cached_sharded_and_merged_by_its_cells() {
    let (_a, big) = start_mock(MockConfig::default());
    let (_b, mini) = start_mock(MockConfig::default());
    let extra = PAIR
        .replace("@BIG@", &big.base_url())
        .replace("@MINI@", &mini.base_url());
    let bench = arithmetic_bench(20, 2, &extra);
    let d = bench.path();
    let pg = |args: &[&str]| promptgauge(d).args(args).output().unwrap();
    let sent = || {
        (
            big.provider.stats().requests,
            mini.provider.stats().requests,
        )
    };

    // check says the grid, each endpoint's price, and a cost at each one's price.
    let o = pg(&["check", "bench.yaml"]);
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        said.contains("20 cases × 2 variants × 2 endpoints × 1 repeat = 80 jobs"),
        "{said}"
    );
    assert!(
        said.contains("endpoint mini: model mini-model at"),
        "{said}"
    );
    assert_eq!(sent(), (0, 0), "check sends nothing");

    // Twice with the cache: the second run buys nothing, each endpoint's answers its own.
    for _ in 0..2 {
        let o = pg(&["run", "bench.yaml", "--cache", "--quiet"]);
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    assert_eq!(sent(), (40, 40));
    let runs = run_dirs(&d.join("reports"));
    assert_eq!(runs.len(), 2);
    let (first, second) = (summary(&runs[0]), summary(&runs[1]));
    for (a, b) in first.variants.iter().zip(&second.variants) {
        assert_eq!((&a.name, a.correct, a.n), (&b.name, b.correct, b.n));
        assert_eq!(b.cached, 20, "{}: every answer from the cache", b.name);
    }

    // The store holds a row per cell, with its endpoint; history and compare read them.
    let o = pg(&["runs", "--json"]);
    let listed: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 2);
    let cells = listed[0]["variants"].as_array().unwrap();
    let named: Vec<(&str, &str)> = cells
        .iter()
        .map(|v| {
            (
                v["variant"].as_str().unwrap(),
                v["endpoint"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        named,
        [
            ("big/plain", "big"),
            ("big/careful", "big"),
            ("mini/plain", "mini"),
            ("mini/careful", "mini")
        ]
    );
    // Each cell keeps its own model, and the runs a cell's model answered are found by it.
    assert_eq!(cells[3]["model"], "mini-model");
    let o = pg(&["history", "--model", "mini-model", "--json"]);
    let json = String::from_utf8_lossy(&o.stdout);
    assert!(json.contains("mini/careful"), "{json}");
    let o = pg(&["history"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.lines()
            .any(|l| l.contains("mini-model") && l.contains("mini/careful")),
        "each cell's row names its model: {text}"
    );
    // Each cell's jobs are stored, so history steps pair the cell with itself case by case.
    let o = pg(&["history", "--json"]);
    let json = String::from_utf8_lossy(&o.stdout);
    let start = json.find('{').unwrap();
    let end = json.rfind('}').unwrap();
    let h: serde_json::Value = serde_json::from_str(&json[start..=end]).unwrap();
    let steps = h["runs"][1]["variants"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    for v in steps {
        assert_eq!(v["step"]["cases"], 20, "{v}");
        assert_eq!(v["step"]["verdict"], "not_distinguishable", "{v}");
    }
    let (a, b) = (runs[0].to_str().unwrap(), runs[1].to_str().unwrap());
    let o = pg(&["compare", a, b, "--out", "cmp"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("cmp/compare.json")).unwrap())
            .unwrap();
    assert_eq!(
        c["variants"].as_array().unwrap().len(),
        4,
        "every cell paired with itself"
    );

    // Gates name a cell, a variant or an endpoint.
    let o = pg(&[
        "run",
        "bench.yaml",
        "--no-store",
        "--cache",
        "--min-accuracy",
        "mini=0.99",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let gated = summary(
        &run_dirs(&d.join("reports"))
            .into_iter()
            .max_by_key(|r| {
                std::fs::metadata(r.join("summary.json"))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .unwrap(),
    );
    let reasons: Vec<&str> = gated.gates.iter().map(|g| g.reason.as_str()).collect();
    assert!(
        reasons.iter().any(|r| r.contains("mini/plain")),
        "{reasons:?}"
    );
    assert!(!reasons.iter().any(|r| r.contains("big/")), "{reasons:?}");
    let o = pg(&[
        "run",
        "bench.yaml",
        "--no-store",
        "--min-accuracy",
        "nowhere=0.5",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("an endpoint (big, mini)"));
    assert_eq!(sent(), (40, 40), "nothing was bought again");

    // --baseline compares each cell with the same cell of an earlier run.
    let o = pg(&[
        "run",
        "bench.yaml",
        "--no-store",
        "--cache",
        "--baseline",
        a,
        "--fail-if-worse",
        "--max-drop",
        "50",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let against = summary(
        &run_dirs(&d.join("reports"))
            .into_iter()
            .max_by_key(|r| {
                std::fs::metadata(r.join("summary.json"))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .unwrap(),
    );
    let gates: Vec<(&str, bool)> = against
        .gates
        .iter()
        .map(|g| (g.gate.as_str(), g.passed))
        .collect();
    assert!(
        gates.contains(&("fail-if-worse --baseline", true)),
        "{gates:?}"
    );
    assert!(gates.contains(&("max-drop --baseline", true)), "{gates:?}");

    // A baseline sharing no cell is refused before anything is bought.
    let before = sent();
    let o = pg(&[
        "run",
        "bench.yaml",
        "--no-store",
        "--endpoints",
        "big",
        "--baseline",
        a,
        "--fail-if-worse",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("nothing could be compared") && said.contains("ENDPOINT/VARIANT"),
        "{said}"
    );
    assert_eq!(sent(), before, "nothing was sent");

    // Shards of a grid merge into the grid.
    for i in 1..=2 {
        let o = pg(&[
            "run",
            "bench.yaml",
            "--cache",
            "--no-store",
            "--quiet",
            "--out",
            "shards",
            "--shard",
            &format!("{i}/2"),
        ]);
        assert!(
            o.status.code().is_some_and(|c| c <= 1),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let shards: Vec<String> = run_dirs(&d.join("shards"))
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let o = promptgauge(d)
        .arg("merge")
        .args(&shards)
        .args(["--out", "merged", "--no-store"])
        .output()
        .unwrap();
    assert!(
        o.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let merged = summary(&run_dirs(&d.join("merged"))[0]);
    assert_eq!(merged.schema, "promptgauge.summary/3");
    for (w, m) in first.variants.iter().zip(&merged.variants) {
        assert_eq!((&w.name, w.n, w.correct), (&m.name, m.n, m.correct));
    }
    assert_eq!(merged.comparisons.len(), first.comparisons.len());

    // Compared by run id from the store, once the folders are gone: each cell paired.
    let ids: Vec<String> = listed
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    let away = d.join("away");
    std::fs::create_dir_all(&away).unwrap();
    for r in &runs {
        std::fs::rename(r, away.join(r.file_name().unwrap())).unwrap();
    }
    let o = pg(&["compare", &ids[0], &ids[1], "--out", "cmp-stored"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("cmp-stored/compare.json")).unwrap())
            .unwrap();
    for cell in c["variants"].as_array().unwrap() {
        assert_eq!(cell["comparison"]["cases"], 20, "{cell}");
    }
}

/// The example a user starts from: one prompt, a hosted and a self-hosted endpoint side by
/// side, a pinned judge; the report answers "which model".
#[test]
fn the_which_model_example_runs_and_answers_which_model() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = repo().join("examples/which-model");
    std::fs::create_dir_all(d.join("prompts")).unwrap();
    for f in ["which-model.yaml", "cases.jsonl", "prompts/answer.yaml"] {
        std::fs::copy(src.join(f), d.join(f)).unwrap();
    }
    let out = promptgauge(d)
        .args(["run", "which-model.yaml", "--no-store"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    let names: Vec<&str> = s.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["hosted/answer", "local/answer"]);
    assert_eq!(s.variants[1].cost_usd, Some(0.0), "the local model is free");
    assert!(s.variants[0].cost_usd.unwrap() > 0.0);
    // One question: which model. Paired on every case.
    assert_eq!(s.comparisons.len(), 1);
    let c = &s.comparisons[0];
    let family = c.family.as_ref().unwrap();
    assert_eq!(family.question(), "which model, for answer");
    assert_eq!((c.cases, c.against.as_str()), (40, "hosted/answer"));
    // The judge stayed put: the same model judged both endpoints' answers.
    assert_eq!(s.run.judge.as_ref().unwrap().model, "judge-large");
    assert!(s.variants.iter().all(|v| v.judge_calls == 40));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    for text in [&stdout.to_string(), &html] {
        assert!(text.contains("Which model: each endpoint against the baseline endpoint"));
        assert!(text.contains("local/answer is"));
    }
    // People label a cell's answers by its name; the judge's agreement is per cell.
    let out = promptgauge(d)
        .args(["label", run.to_str().unwrap(), "--sample", "3"])
        .write_stdin("y\nn\ny\n")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let labels = std::fs::read_to_string(run.join("labels.jsonl")).unwrap();
    assert_eq!(labels.lines().count(), 3);
    let cells = [
        "\"variant\":\"hosted/answer\"",
        "\"variant\":\"local/answer\"",
    ];
    assert!(
        labels.lines().all(|l| cells.iter().any(|c| l.contains(c))),
        "{labels}"
    );
    let labelled: u64 = summary(&run)
        .variants
        .iter()
        .map(|v| v.labelled.as_ref().map_or(0, |l| l.labels))
        .sum();
    assert_eq!(labelled, 3, "every label found its answer");
}

/// An endpoint the bench lists without a price is charged the bench's, never the baseline
/// endpoint's; moving one endpoint with --endpoint keeps the grid whole, and unprices the
/// moved one until `--price NAME=…` prices it.
#[test]
fn an_unpriced_endpoint_takes_the_benchs_price_and_moving_one_keeps_the_grid() {
    let (_a, first) = start_mock(MockConfig::default());
    let (_b, second) = start_mock(MockConfig::default());
    let (_c, elsewhere) = start_mock(MockConfig::default());
    let extra = format!(
        "endpoints:\n  - {{ name: dear, base_url: \"{}\", model: m, price: {{ input_per_mtok: 10.0, output_per_mtok: 30.0 }} }}\n  - {{ name: unpriced, base_url: \"{}\", model: m }}\n",
        first.base_url(),
        second.base_url()
    );
    // The bench's own price is 1/2 (arithmetic_bench).
    let bench = arithmetic_bench(10, 1, &extra);
    let d = bench.path();
    let run = |args: &[&str]| {
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--no-store", "--quiet"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let newest = run_dirs(&d.join("reports"))
            .into_iter()
            .max_by_key(|r| {
                std::fs::metadata(r.join("summary.json"))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .unwrap();
        summary(&newest)
    };
    let s = run(&[]);
    let cell =
        |s: &Summary, name: &str| s.variants.iter().find(|v| v.name == name).cloned().unwrap();
    let unpriced = cell(&s, "unpriced/plain");
    let at_bench =
        unpriced.tokens.prompt as f64 * 1.0 / 1e6 + unpriced.tokens.completion as f64 * 2.0 / 1e6;
    assert!(
        (unpriced.cost_usd.unwrap() - at_bench).abs() < 1e-12,
        "{unpriced:?}"
    );
    let dear = cell(&s, "dear/plain");
    let at_dear =
        dear.tokens.prompt as f64 * 10.0 / 1e6 + dear.tokens.completion as f64 * 30.0 / 1e6;
    assert!((dear.cost_usd.unwrap() - at_dear).abs() < 1e-12);
    assert_eq!(
        s.run.endpoints[1].price.as_ref().unwrap().input_per_mtok,
        1.0
    );
    // Moving `unpriced` elsewhere for one run: both endpoints still run.
    let before = first.provider.stats().requests;
    let moved = run(&[
        "--endpoint",
        &format!("unpriced={},model=m", elsewhere.base_url()),
    ]);
    assert_eq!(moved.run.endpoints.len(), 2);
    assert_eq!(first.provider.stats().requests, before + 10);
    assert_eq!(elsewhere.provider.stats().requests, 10);
    assert_eq!(
        second.provider.stats().requests,
        10,
        "only the first run went there"
    );
    // The moved endpoint is another server: the bench's price is not its.
    assert_eq!(cell(&moved, "unpriced/plain").cost_usd, None);
    assert!(moved.run.endpoints[1].price.is_none());
    assert!(cell(&moved, "dear/plain").cost_usd.is_some(), "dear stayed");
    let priced = run(&[
        "--endpoint",
        &format!("unpriced={},model=m", elsewhere.base_url()),
        "--price",
        "unpriced=0",
    ]);
    assert_eq!(cell(&priced, "unpriced/plain").cost_usd, Some(0.0));
    // An endpoint --endpoint adds has no price either, and a --price without a name is
    // refused in a grid (which endpoint would it price?).
    let added = run(&[
        "--endpoint",
        &format!("extra={},model=m", elsewhere.base_url()),
    ]);
    assert_eq!(cell(&added, "extra/plain").cost_usd, None);
    assert!((cell(&added, "unpriced/plain").cost_usd.unwrap() - at_bench).abs() < 1e-12);
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store", "--price", "1,2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--price without a name prices the run's one endpoint")
            && stderr.contains("--price unpriced=IN,OUT"),
        "{stderr}"
    );
}

/// Price follows the endpoint: the bench's price is for the server and model its
/// `endpoint:` writes. Swapped to another server (the simulator on another port) or another
/// model, the run is unpriced — no cost in the cost column, said in the terminal and the
/// report with the flag that prices it, refused by --budget and --max-cost — until
/// `--price` prices it.
#[test]
fn a_swapped_base_url_or_model_is_unpriced_until_priced() {
    let (_a, hosted) = start_mock(MockConfig::default());
    let (_b, local) = start_mock(MockConfig::default());
    let extra = format!(
        "endpoint: {{ base_url: \"{}\", model: gpt-big }}\n",
        hosted.base_url()
    );
    // The bench's price is 1/2 per million tokens (arithmetic_bench).
    let bench = arithmetic_bench(6, 1, &extra);
    let d = bench.path();
    let run = |args: &[&str]| {
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--no-store"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.code().is_some_and(|c| c <= 1), "{stderr}");
        let newest = run_dirs(&d.join("reports"))
            .into_iter()
            .max_by_key(|r| {
                std::fs::metadata(r.join("summary.json"))
                    .unwrap()
                    .modified()
                    .unwrap()
            })
            .unwrap();
        (
            summary(&newest),
            std::fs::read_to_string(newest.join("summary.md")).unwrap(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            stderr,
        )
    };
    let at = |s: &Summary, input: f64, output: f64| {
        let v = &s.variants[0];
        v.tokens.prompt as f64 * input / 1e6 + v.tokens.completion as f64 * output / 1e6
    };
    // On the bench's own endpoint: the bench's price.
    let (own, md, ..) = run(&[]);
    assert!((own.variants[0].cost_usd.unwrap() - at(&own, 1.0, 2.0)).abs() < 1e-12);
    assert!(!md.contains("Unpriced"), "{md}");
    let local_url = local.base_url();
    for swap in [
        vec!["--base-url", local_url.as_str()],
        vec!["--model", "gpt2"],
        vec!["--base-url", local_url.as_str(), "--model", "gpt2"],
    ] {
        let (s, md, stdout, stderr) = run(&swap);
        assert_eq!(s.variants[0].cost_usd, None, "{swap:?}");
        assert!(
            stderr.contains("note: unpriced: the run's endpoint has no price (the bench's price is for model gpt-big at ")
                && stderr.contains("price it with --price IN,OUT"),
            "{swap:?}: {stderr}"
        );
        // No cost column in the terminal (nothing has a cost), "–" in the report's, and
        // the notes say how to price it.
        let header = stdout
            .lines()
            .find(|l| l.contains("│ variant"))
            .unwrap_or_default();
        assert!(
            header.contains("tokens") && !header.contains("cost"),
            "{swap:?}: {stdout}"
        );
        assert!(
            stdout.contains("Unpriced: the run's endpoint"),
            "{swap:?}: {stdout}"
        );
        let row = md
            .lines()
            .find(|l| l.starts_with("| plain"))
            .unwrap_or_default();
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            cells[cells.len() - 3..cells.len() - 1],
            ["–", "–"],
            "{swap:?}: {row}"
        );
        assert!(
            md.contains("Unpriced: the run's endpoint (model")
                && md.contains("Price it with --price IN,OUT"),
            "{swap:?}: {md}"
        );
    }
    assert_eq!(
        local.provider.stats().requests,
        12,
        "two of the swaps went there"
    );
    // Priced on the command line: free, or at its own price.
    let (free, md, ..) = run(&["--base-url", &local_url, "--price", "0"]);
    assert_eq!(free.variants[0].cost_usd, Some(0.0));
    assert!(!md.contains("Unpriced"), "{md}");
    let (own_price, ..) = run(&[
        "--base-url",
        &local_url,
        "--model",
        "gpt2",
        "--price",
        "0.5,4",
    ]);
    assert!((own_price.variants[0].cost_usd.unwrap() - at(&own_price, 0.5, 4.0)).abs() < 1e-12);
    // Budgets refuse to run unpriced, saying how to price it; nothing is sent.
    let before = local.provider.stats().requests;
    for gate in [["--budget", "5"], ["--max-cost", "5"]] {
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--no-store", "--base-url", &local_url])
            .args(gate)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{gate:?}: {stderr}");
        assert!(
            stderr.contains("the run's endpoint has no price") && stderr.contains("--price IN,OUT"),
            "{gate:?}: {stderr}"
        );
    }
    assert_eq!(local.provider.stats().requests, before, "nothing was sent");
    // A bad --price is refused with the form to write.
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store", "--price", "cheap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("IN,OUT"));
}

/// `--cache` keys an answer on its endpoint's protocol and headers too: the same model at
/// the same URL through another protocol, or with a header that picks an adapter, is asked
/// again.
#[test]
fn the_cache_tells_protocols_and_headers_apart() {
    let (_a, server) = start_mock(MockConfig::default());
    let url = server.base_url();
    let extra = format!(
        "endpoints:\n  - {{ name: chat, base_url: \"{url}\", model: m }}\n  - {{ name: messages, base_url: \"{url}\", model: m, protocol: anthropic-messages }}\n  - {{ name: adapter, base_url: \"{url}\", model: m, headers: {{ X-Adapter: lora-2 }} }}\n  - {{ name: again, base_url: \"{url}\", model: m }}\n"
    );
    let bench = arithmetic_bench(5, 1, &extra);
    let d = bench.path();
    let sent = || server.provider.stats().requests;
    for (name, new) in [("chat", 5), ("messages", 5), ("adapter", 5), ("again", 0)] {
        let before = sent();
        let out = promptgauge(d)
            .args([
                "run",
                "bench.yaml",
                "--no-store",
                "--quiet",
                "--cache",
                "--endpoints",
                name,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(sent() - before, new, "{name}");
    }
    assert_eq!(server.provider.stats().anthropic_messages, 5);
}

/// One endpoint of a grid goes down mid-run: only its lane stops; the other endpoint's jobs
/// are all answered, and the run says which endpoint stopped and how to send the rest.
#[test]
fn an_outage_at_one_endpoint_stops_its_lane_and_the_others_finish() {
    let (_a, healthy) = start_mock(MockConfig::default());
    let (_b, dying) = start_mock(MockConfig {
        outage_after: Some(20),
        ..MockConfig::default()
    });
    let extra = format!(
        "limits: {{ concurrency: 4, max_attempts: 2 }}\nendpoints:\n  - {{ name: healthy, base_url: \"{}\", model: m }}\n  - {{ name: dying, base_url: \"{}\", model: m }}\n",
        healthy.base_url(),
        dying.base_url()
    );
    let bench = arithmetic_bench(100, 2, &extra);
    let d = bench.path();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("endpoint dying:") && stderr.contains("the other endpoints' were"),
        "{stderr}"
    );
    // Every healthy job was answered; the dying endpoint was not sent its whole share.
    assert_eq!(healthy.provider.stats().generations, 200);
    let sent = dying.provider.stats().requests;
    assert!(
        sent < 100,
        "{sent} requests to the dying endpoint for 200 jobs"
    );
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    for v in &s.variants {
        match v.endpoint.as_deref() {
            Some("healthy") => assert_eq!((v.n, v.failed), (100, 0), "{}", v.name),
            _ => assert!(v.n + v.failed < 100, "{}", v.name),
        }
    }
    // Once it is back, the printed command sends the rest, to it alone.
    let printed = stderr
        .lines()
        .find_map(|l| l.split_once("send the rest and the failed jobs again: "))
        .map(|(_, c)| c.to_string())
        .unwrap_or_else(|| panic!("no resume command in {stderr}"));
    dying.provider.end_outage();
    let args: Vec<&str> = printed.split(' ').skip(1).collect();
    let out = promptgauge(d)
        .args(&args)
        .args(["--no-store"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        healthy.provider.stats().generations,
        200,
        "nothing sent again there"
    );
    let s = summary(&run);
    assert!(s.complete);
    assert!(s.variants.iter().all(|v| v.n == 100));
}

/// What a grid could not honour is refused before anything is sent: an ad-hoc endpoint
/// named like a variant, and --max-cost when some endpoint has no price.
#[test]
fn a_grid_refuses_an_ambiguous_name_and_a_cost_gate_it_cannot_count() {
    let (_a, server) = start_mock(MockConfig::default());
    let extra = format!(
        "endpoints:\n  - {{ name: priced, base_url: \"{}\", model: m, price: {{ input_per_mtok: 1, output_per_mtok: 1 }} }}\n  - {{ name: free, base_url: \"{}\", model: m }}\n",
        server.base_url(),
        server.base_url()
    );
    let bench = arithmetic_bench(4, 2, &extra);
    let d = bench.path();
    // No bench-wide price: the second endpoint has none.
    let yaml = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    let yaml: String = yaml
        .lines()
        .filter(|l| !l.starts_with("price:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("bench.yaml"), yaml).unwrap();
    for (args, says) in [
        (
            vec!["--endpoint", "plain=mock,model=m"],
            "`plain`, which is the name of a variant",
        ),
        (
            vec!["--max-cost", "1"],
            "--max-cost needs the whole run's cost, and endpoint free has no price",
        ),
    ] {
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--no-store"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(server.provider.stats().requests, 0, "nothing was sent");
    // check says what its estimate leaves out.
    let out = promptgauge(d)
        .args(["check", "bench.yaml"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("unpriced: endpoint free has no price (the bench gives it no price): the estimate leaves it out; price it with --price free=IN,OUT"),
        "{said}"
    );
}

/// The simulator refuses "What is 7 + 7?" on every wire, each in its own way.
fn refusing() -> MockConfig {
    MockConfig {
        refuse_on: Some("is 7 + 7?".into()),
        ..MockConfig::default()
    }
}

#[test]
fn a_refusal_counts_alike_on_every_protocol_as_an_answer_that_failed() {
    let (_a, chat) = start_mock(refusing());
    let (_b, responses) = start_mock(refusing());
    let (_c, messages) = start_mock(refusing());
    let extra = GRID
        .replace("@CHAT@", &chat.base_url())
        .replace("@RESPONSES@", &responses.base_url())
        .replace("@MESSAGES@", &messages.base_url());
    let bench = arithmetic_bench(10, 1, &extra);
    let d = bench.path();
    let out = promptgauge(d)
        .args(["run", "bench.yaml", "--no-store"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{stderr}\n{stdout}"
    );
    let run = run_dirs(&d.join("reports")).remove(0);
    let s = summary(&run);
    // Each endpoint: ten answers, one of them the refusal, scored 0 and in the figure.
    for v in &s.variants {
        assert_eq!(
            (v.n, v.refused, v.filtered, v.failed),
            (10, 1, 0, 0),
            "{}",
            v.name
        );
    }
    let journal = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let refused: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["case_id"] == "add-07")
        .collect();
    assert_eq!(refused.len(), 3);
    for r in &refused {
        assert_eq!(r["status"], "graded", "{r}");
        assert_eq!(r["refused"], true, "{r}");
        assert_eq!(r["score"], 0.0, "{r}");
        assert_eq!(r["output"], promptgauge::mock::REFUSAL, "{r}");
    }
    assert!(
        stdout.contains("3 answers were refusals") && stdout.contains("hosted/plain 1 of 10"),
        "{stdout}"
    );
}

/// What a scripted server saw: each request's first line and headers (names lowercased).
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// A plain HTTP server on a free port answering each request from its first line with
/// `reply`, and keeping what it saw.
fn scripted(
    reply: impl Fn(&str, &[(String, String)]) -> String + Send + Sync + 'static,
) -> (String, Seen) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Default::default();
    let (log, reply) = (seen.clone(), std::sync::Arc::new(reply));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (log, reply) = (log.clone(), reply.clone());
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let (mut headers, mut length) = (Vec::new(), 0usize);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.trim_end().split_once(':') {
                        let k = k.trim().to_ascii_lowercase();
                        if k == "content-length" {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        headers.push((k, v.trim().to_string()));
                    }
                }
                let _ = reader.read_exact(&mut vec![0; length]);
                let answer = reply(first.trim_end(), &headers);
                log.lock()
                    .unwrap()
                    .push((first.trim_end().to_string(), headers));
                let _ = stream.write_all(answer.as_bytes());
            });
        }
    });
    (origin, seen)
}

fn reply(status: &str, extra: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{body}",
        body.len()
    )
}

const GATEWAY: &str = r#"endpoints:
  - name: gw
    base_url: "@URL@"
    model: m
    api_key_env: GW_KEY
    protocol: anthropic-messages
    headers: { X-Team-Token: "${TEAM_TOKEN}" }
"#;

fn gateway_run(url: &str) -> std::process::Output {
    let bench = arithmetic_bench(2, 1, &GATEWAY.replace("@URL@", url));
    promptgauge(bench.path())
        .args(["run", "bench.yaml", "--no-store", "--quiet"])
        .env("GW_KEY", "sk-gateway-key-1")
        .env("TEAM_TOKEN", "team-token-value-1234")
        .output()
        .unwrap()
}

/// A gateway that wants its own header on the model list too: the preflight sends the
/// endpoint's `headers:` with the key, as every job does, and is not refused.
#[test]
fn the_preflight_sends_the_endpoints_own_headers() {
    let (origin, seen) = scripted(|first, headers| {
        let has = |k: &str, v: &str| headers.iter().any(|(n, x)| n == k && x == v);
        if !first.starts_with("GET") {
            return answer_messages();
        }
        if has("x-team-token", "team-token-value-1234") && has("x-api-key", "sk-gateway-key-1") {
            reply(
                "200 OK",
                "",
                "application/json",
                r#"{"data": [{"id": "m"}]}"#,
            )
        } else {
            reply(
                "401 Unauthorized",
                "",
                "application/json",
                r#"{"error": {"message": "no team token"}}"#,
            )
        }
    });
    let out = gateway_run(&format!("{origin}/v1"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let seen = seen.lock().unwrap().clone();
    let gets: Vec<_> = seen
        .iter()
        .filter(|(f, _)| f.starts_with("GET /v1/models"))
        .collect();
    assert_eq!(gets.len(), 1, "{seen:?}");
    assert_eq!(seen.len(), 3, "the model list, then the two jobs: {seen:?}");
}

/// A model list that redirects to another origin: the preflight does not follow it there,
/// so the key and the endpoint's headers never reach it; the run goes on, its jobs sent
/// where they belong.
#[test]
fn the_preflight_never_carries_credentials_to_another_origin() {
    for status in [
        "307 Temporary Redirect",
        "308 Permanent Redirect",
        "302 Found",
    ] {
        let (far, far_seen) = scripted(|_, _| {
            reply(
                "200 OK",
                "",
                "application/json",
                r#"{"data": [{"id": "m"}]}"#,
            )
        });
        let to = format!("{far}/v1/models");
        let (origin, seen) = scripted(move |first, _| {
            if first.starts_with("GET") {
                reply(
                    status,
                    &format!("location: {to}\r\n"),
                    "application/json",
                    "",
                )
            } else {
                answer_messages()
            }
        });
        let out = gateway_run(&format!("{origin}/v1"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{status}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            far_seen.lock().unwrap().is_empty(),
            "{status}: {:?}",
            far_seen.lock().unwrap()
        );
        let here = seen.lock().unwrap().clone();
        assert!(
            here.iter().any(|(f, _)| f.starts_with("POST /v1/messages")),
            "{here:?}"
        );
    }
}

/// An Anthropic Messages stream answering `4`.
fn answer_messages() -> String {
    let events = [
        r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","usage":{"input_tokens":5,"output_tokens":0}}}"#,
        r#"event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"4"}}"#,
        r#"event: content_block_stop
data: {"type":"content_block_stop","index":0}"#,
        r#"event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}"#,
        r#"event: message_stop
data: {"type":"message_stop"}"#,
    ];
    reply(
        "200 OK",
        "",
        "text/event-stream",
        &(events.join("\n\n") + "\n\n"),
    )
}
