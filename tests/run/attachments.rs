//! Files in cases end to end (docs/guide/attachments.md): the receipts example on each
//! protocol and through a batch, asserting on what the simulator was sent (its parts, the
//! files' bytes, the files it read) as well as on the verdicts; a file a protocol cannot
//! carry, or one over a limit, refused before anything is sent; the cache following a
//! file's bytes, not its path.

use std::path::{Path, PathBuf};

use crate::common::*;
use base64::Engine;
use promptgauge::mock::MockConfig;
use promptgauge::mock::server::MockServer;
use serde_json::Value;

/// The receipts example, copied into a folder of its own.
fn receipts() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy(&repo().join("examples/receipts"), dir.path());
    dir
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

fn run(d: &Path, server: &MockServer, extra: &[&str]) -> std::process::Output {
    promptgauge(d)
        .args([
            "run",
            "receipts.yaml",
            "--quiet",
            "--no-store",
            "--out",
            "r",
            "--model",
            "m",
        ])
        .args(["--base-url", &server.base_url()])
        .args(extra)
        .output()
        .unwrap()
}

pub(crate) fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn only_run(root: &Path) -> PathBuf {
    let runs = run_dirs(root);
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

fn summary(run: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

fn accuracy(s: &Value, variant: &str) -> f64 {
    s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == variant)
        .unwrap()["accuracy"]
        .as_f64()
        .unwrap()
}

/// The base64 of every receipt's bytes.
fn receipts_base64(d: &Path) -> Vec<String> {
    (1..=12)
        .map(|i| {
            let bytes = std::fs::read(d.join(format!("receipts/r-{i:03}.png"))).unwrap();
            base64::engine::general_purpose::STANDARD.encode(bytes)
        })
        .collect()
}

#[test]
fn the_photo_reaches_each_protocol_and_only_the_variants_that_sent_it_can_answer() {
    for (protocol, part) in [
        ("openai-chat", "image_url"),
        ("openai-responses", "input_image"),
        ("anthropic-messages", "image"),
    ] {
        let (_rt, server) = start_mock(MockConfig::default());
        let bench = receipts();
        let d = bench.path();
        let out = run(d, &server, &["--protocol", protocol]);
        assert!(out.status.success(), "{protocol}: {}", said(&out));
        let run = only_run(&d.join("r"));
        let s = summary(&run);
        // Only a request that carried the receipt can read its total.
        assert_eq!(accuracy(&s, "no-photo"), 0.0, "{protocol}");
        assert!(accuracy(&s, "plain") >= 0.5, "{protocol}: {s}");
        assert!(accuracy(&s, "photo-first") >= 0.5, "{protocol}: {s}");
        // The simulator read 24 files: the two variants that place them, 12 cases each.
        assert_eq!(server.provider.stats().files, 24, "{protocol}");
        // Each receipt's bytes went in the protocol's own part.
        let bodies: Vec<String> = server
            .provider
            .bodies()
            .iter()
            .map(|b| b.to_string())
            .collect();
        let typed = format!(r#""type":"{part}""#);
        assert_eq!(
            bodies.iter().filter(|b| b.contains(&typed)).count(),
            24,
            "{protocol}"
        );
        for b64 in receipts_base64(d) {
            assert_eq!(
                bodies.iter().filter(|b| b.contains(&b64)).count(),
                2,
                "{protocol}"
            );
        }
        // The journal names each file, never its bytes.
        for r in journal(&run).iter().filter(|r| r["case_id"].is_string()) {
            let files = r["files"].as_array();
            if r["variant"] == "no-photo" {
                assert!(files.is_none(), "{r}");
                continue;
            }
            let f = &files.expect("files in the record")[0];
            assert_eq!(f["name"], "receipt");
            assert_eq!(f["kind"], "png");
            assert!(
                f["origin"].as_str().unwrap().starts_with("receipts/r-"),
                "{f}"
            );
            assert_eq!(f["sha256"].as_str().unwrap().len(), 64);
            assert!(
                !r.to_string().contains("iVBOR"),
                "no bytes in the journal: {r}"
            );
        }
    }
}

#[test]
fn a_batch_carries_the_same_parts() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = receipts();
    let d = bench.path();
    let out = run(d, &server, &["--batch", "--batch-poll", "10ms"]);
    assert!(out.status.success(), "{}", said(&out));
    let s = summary(&only_run(&d.join("r")));
    assert_eq!(accuracy(&s, "no-photo"), 0.0);
    assert!(accuracy(&s, "photo-first") >= 0.5, "{s}");
    assert_eq!(server.provider.batches_created(), 1);
    assert_eq!(server.provider.stats().files, 24);
}

#[test]
fn a_batch_over_its_byte_limit_is_split_and_every_job_still_answered() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = receipts();
    let d = bench.path();
    // A line is 300-600 bytes (a receipt's base64 and the prompt); 1 KiB holds one to three.
    let out = run(
        d,
        &server,
        &[
            "--batch",
            "--batch-poll",
            "10ms",
            "--batch-max-bytes",
            "1KiB",
        ],
    );
    assert!(out.status.success(), "{}", said(&out));
    let folder = only_run(&d.join("r"));
    let s = summary(&folder);
    assert!(accuracy(&s, "photo-first") >= 0.5, "{s}");
    let created = server.provider.batches_created();
    assert!(created >= 12, "36 lines in 1 KiB files: {created} batches");
    assert_eq!(server.provider.stats().files, 24);
    // Each batch journaled holds the jobs one file of at most 1 KiB could.
    let held: Vec<usize> = journal(&folder)
        .iter()
        .filter(|r| r["event"] == "batch" && r["step"] == "submitting")
        .map(|r| r["keys"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(held.len() as u64, created, "{held:?}");
    assert_eq!(held.iter().sum::<usize>(), 36);
    assert!(held.iter().all(|&n| (1..=3).contains(&n)), "{held:?}");
    // A size that is none is refused by the flag's parser, before anything is sent.
    let out = run(d, &server, &["--batch", "--batch-max-bytes", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("more than 0 bytes"), "{}", said(&out));
    assert_eq!(server.provider.batches_created(), created);
}

#[test]
fn the_cache_follows_a_file_s_bytes_not_its_path() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = receipts();
    let d = bench.path();
    // Every run writes into `r`, where the cache is kept.
    let first = run(d, &server, &["--cache"]);
    assert!(first.status.success(), "{}", said(&first));
    let sent = server.provider.stats().generations;
    // Moved and renamed: the same bytes, every answer from the cache.
    std::fs::rename(d.join("receipts"), d.join("photos")).unwrap();
    let cases = std::fs::read_to_string(d.join("cases.jsonl")).unwrap();
    std::fs::write(d.join("cases.jsonl"), cases.replace("receipts/", "photos/")).unwrap();
    let moved = run(d, &server, &["--cache"]);
    assert!(moved.status.success(), "{}", said(&moved));
    assert_eq!(
        server.provider.stats().generations,
        sent,
        "nothing sent again"
    );
    // One receipt's bytes changed (a byte after its end): the two jobs that carry it are
    // asked again.
    let mut png = std::fs::read(d.join("photos/r-001.png")).unwrap();
    png.push(b'x');
    std::fs::write(d.join("photos/r-001.png"), png).unwrap();
    let changed = run(d, &server, &["--cache"]);
    assert!(changed.status.success(), "{}", said(&changed));
    assert_eq!(server.provider.stats().generations, sent + 2);
}

/// A bench of one case with `files` and one variant (`variant`), over `protocol`.
pub(crate) fn one_case(files: &str, variant: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("f")).unwrap();
    std::fs::copy(
        repo().join("examples/receipts/receipts/r-001.png"),
        d.join("f/r.png"),
    )
    .unwrap();
    std::fs::write(d.join("f/q.pdf"), b"%PDF-1.4\nBT (What is 2 + 3?) Tj ET\n").unwrap();
    std::fs::write(
        d.join("f/a.wav"),
        [b"RIFF\0\0\0\0WAVEfmt ".as_slice(), &[0; 32]].concat(),
    )
    .unwrap();
    std::fs::write(d.join("f/jpeg.png"), b"\xff\xd8\xff\xe0\0\x10JFIF").unwrap();
    std::fs::write(
        d.join("cases.jsonl"),
        format!("{{\"id\": \"c1\", \"vars\": {{\"q\": \"?\"}}, \"files\": {files}, \"expected\": \"5\"}}\n"),
    )
    .unwrap();
    std::fs::write(d.join("v.yaml"), variant).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        format!("name: files\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: number }}\n{extra}"),
    )
    .unwrap();
    dir
}

pub(crate) const USER: &str = "messages:\n  - { role: user, content: \"{{ q }}\" }\n";

#[test]
fn a_file_the_endpoint_cannot_carry_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(MockConfig::default());
    let system_image = "messages:\n  - { role: system, content: \"{{ file('r.png') }}\" }\n  - { role: user, content: \"{{ q }}\" }\n";
    for (files, variant, protocol, expected) in [
        (
            r#"["f/a.wav"]"#,
            USER,
            "anthropic-messages",
            "Anthropic messages take no audio",
        ),
        (
            r#"["f/a.wav"]"#,
            USER,
            "openai-responses",
            "Responses API takes no audio",
        ),
        (
            r#"["f/r.png"]"#,
            system_image,
            "openai-chat",
            "only in a user turn, not in a `system` turn",
        ),
        (
            r#"[{"url": "https://files.test/q.pdf"}]"#,
            USER,
            "openai-chat",
            "only as its bytes, not by URL",
        ),
        (
            r#"["f/jpeg.png"]"#,
            USER,
            "openai-chat",
            "named as a PNG image but its bytes are a JPEG image",
        ),
        (
            r#"["f/gone.png"]"#,
            USER,
            "openai-chat",
            "f/gone.png cannot be read",
        ),
        (
            r#"["f/r.png"]"#,
            "messages:\n  - { role: user, content: \"{{ file('receipt') }}\" }\n",
            "openai-chat",
            "has no file named `receipt` (its files: r.png)",
        ),
    ] {
        let bench = one_case(files, variant, "");
        let d = bench.path();
        let out = promptgauge(d)
            .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
            .args(["--base-url", &server.base_url(), "--protocol", protocol])
            .output()
            .unwrap();
        let text = said(&out);
        assert_eq!(out.status.code(), Some(2), "{protocol} {files}: {text}");
        assert!(text.contains(expected), "{protocol} {files}: {text}");
        assert!(
            text.contains("cases.jsonl") || text.contains("v.yaml"),
            "{text}"
        );
        assert!(
            text.contains("fix:") || text.contains("hint:") || text.contains("→"),
            "{text}"
        );
    }
    assert_eq!(server.provider.stats().requests, 0, "nothing was sent");
}

#[test]
fn a_file_over_its_endpoint_s_limit_is_refused_and_a_larger_limit_lets_it_go() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = one_case(r#"["f/q.pdf"]"#, USER, "limits: { max_file_bytes: 16 }\n");
    let d = bench.path();
    let base = server.base_url();
    let args = [
        "run",
        "bench.yaml",
        "--quiet",
        "--no-store",
        "--model",
        "m",
        "--base-url",
        base.as_str(),
    ];
    let out = promptgauge(d).args(args).output().unwrap();
    let text = said(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("more than the endpoint's limit of 16 bytes for a PDF document"),
        "{text}"
    );
    assert_eq!(server.provider.stats().requests, 0);
    // The PDF's question, read by the simulator, answered.
    let bench = one_case(r#"["f/q.pdf"]"#, USER, "");
    let out = promptgauge(bench.path()).args(args).output().unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.provider.stats().files, 1);
    let s = summary(&only_run(&bench.path().join("reports")));
    assert_eq!(s["variants"][0]["accuracy"], 1.0, "{s}");
}

#[test]
fn a_provider_that_refuses_an_image_over_its_limit_fails_the_job_without_waiting() {
    // The simulator's hostile mode: 400 for an image over 100 bytes (the receipt is 140),
    // as Anthropic answers one over 5 MB. A bench that raised its own limit past the
    // provider's learns it from the provider, once, and does not wait for it to change.
    let (_rt, server) = start_mock(MockConfig {
        max_image_bytes: Some(100),
        ..MockConfig::default()
    });
    // Chat completions tries a 400 once more without `stream_options`, at once (a server may
    // only not know them, docs/guide/client.md); Anthropic messages never.
    for (protocol, sent) in [("openai-chat", 2), ("anthropic-messages", 1)] {
        let before = server.provider.stats().files;
        let bench = one_case(r#"["f/r.png"]"#, USER, "");
        let out = promptgauge(bench.path())
            .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
            .args(["--base-url", &server.base_url(), "--protocol", protocol])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{protocol}: {}", said(&out));
        let run = only_run(&bench.path().join("reports"));
        let record = journal(&run)
            .into_iter()
            .find(|r| r["case_id"] == "c1")
            .unwrap();
        assert_eq!(record["status"], "failed", "{record}");
        let error = record["error"].as_str().unwrap();
        assert!(
            error.contains("400") && error.contains("image exceeds"),
            "{protocol}: {error}"
        );
        // The requests that carried the image (the look at the server before carries none).
        assert_eq!(
            server.provider.stats().files - before,
            sent,
            "{protocol}: a 400 is not waited on nor retried as it was"
        );
    }
}

/// `check`'s estimate counts each image by the rule of the provider its endpoint speaks
/// to: a 64 × 32 receipt is 255 tokens to OpenAI (one tile) and 3 to Anthropic.
#[test]
fn the_estimate_counts_images_by_each_provider_s_rule() {
    let bench = receipts();
    let d = bench.path();
    let tokens = |protocol: &str| -> u64 {
        let out = promptgauge(d)
            .args(["check", "receipts.yaml", "--protocol", protocol])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.contains("estimated prompt tokens"))
            .unwrap_or_else(|| panic!("{text}"))
            .to_string();
        line.rsplit(' ').next().unwrap().trim().parse().unwrap()
    };
    let (openai, anthropic) = (tokens("openai-chat"), tokens("anthropic-messages"));
    assert_eq!(openai - anthropic, 24 * (255 - 3), "{openai} {anthropic}");
}

/// report.html shows each answer's files beside it: the receipt as a thumbnail (a data URL
/// of its own type, read back from where it was loaded), and nothing for the variant that
/// sent none; a file changed since shows by name, size and hash only.
#[test]
fn report_html_shows_the_files_each_answer_was_given() {
    let (_rt, server) = start_mock(MockConfig::default());
    let bench = receipts();
    let d = bench.path();
    let out = run(d, &server, &[]);
    assert!(out.status.success(), "{}", said(&out));
    let run = only_run(&d.join("r"));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let b64 = &receipts_base64(d)[0];
    assert!(
        html.contains(&format!("url(\"data:image/png;base64,{b64}\")")),
        "no thumbnail"
    );
    // Each image once however many answers show it: two variants send each receipt.
    assert_eq!(html.matches(b64.as_str()).count(), 1);
    assert_eq!(
        html.matches("class=\"thumb f-").count(),
        24,
        "a thumbnail per answer"
    );
    assert!(!html.contains("data:image/svg"));
    // Changed since: named, not shown.
    std::fs::write(d.join("receipts/r-001.png"), b"\x89PNG\r\n\x1a\nchanged").unwrap();
    let again = promptgauge(d)
        .args(["report", run.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", said(&again));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(!html.contains(b64.as_str()));
    assert!(
        html.contains("receipts/r-001.png (a PNG image, 140 bytes, sha256 "),
        "{html}"
    );
}

/// The first `n` receipts' (file, expected total), from the example's cases.
fn receipt_cases(d: &Path, n: usize) -> Vec<(String, String)> {
    std::fs::read_to_string(d.join("cases.jsonl"))
        .unwrap()
        .lines()
        .take(n)
        .map(|l| {
            let c: Value = serde_json::from_str(l).unwrap();
            (
                c["files"]["receipt"].as_str().unwrap().to_string(),
                c["expected"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn run_imported(d: &Path, server: &MockServer) -> (std::process::Output, PathBuf) {
    let out = promptgauge(d)
        .args(["run", "bench/promptgauge.yaml", "--quiet", "--no-store"])
        .args([
            "--out",
            "r",
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
        ])
        .output()
        .unwrap();
    let run = run_dirs(&d.join("r")).pop().unwrap_or_default();
    (out, run)
}

#[test]
fn a_promptfoo_image_variable_imports_as_a_case_file_placed_where_the_part_was() {
    let bench = receipts();
    let d = bench.path();
    let cases = receipt_cases(d, 4);
    // promptfoo's multimodal shape: a `file://` image variable, used in a chat prompt's
    // image_url part (as a data URL's base64), and a text prompt that does not show it.
    std::fs::write(
        d.join("vision.json"),
        r#"[{"role": "system", "content": "Read the receipt."},
            {"role": "user", "content": [
              {"type": "image_url", "image_url": {"url": "data:image/png;base64,{{image}}", "detail": "low"}},
              {"type": "text", "text": "{{question}}"}]}]"#,
    )
    .unwrap();
    let tests: String = cases
        .iter()
        .map(|(file, total)| {
            format!(
                "  - vars: {{ question: \"What is the total?\", image: \"file://{file}\" }}\n    assert: [{{ type: contains, value: \"{total}\" }}]\n"
            )
        })
        .collect();
    std::fs::write(
        d.join("promptfooconfig.yaml"),
        format!(
            "description: receipts\nprompts:\n  - file://vision.json\n  - \"Answer with the amount only: {{{{question}}}}\"\nproviders: [openai:chat:gpt-4o-mini]\ntests:\n{tests}"
        ),
    )
    .unwrap();
    let out = promptgauge(d)
        .args([
            "import",
            "promptfoo",
            "promptfooconfig.yaml",
            "--out",
            "bench",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    // The images are copied beside the bench, each case naming its own.
    let imported = std::fs::read_to_string(d.join("bench/cases.jsonl")).unwrap();
    for (file, _) in &cases {
        let name = Path::new(file).file_name().unwrap().to_str().unwrap();
        assert_eq!(
            std::fs::read(d.join("bench/files").join(name)).unwrap(),
            std::fs::read(d.join(file)).unwrap()
        );
        assert!(
            imported.contains(&format!(
                r#""files":{{"image":{{"detail":"low","path":"files/{name}"}}}}"#
            )),
            "{imported}"
        );
    }
    assert!(!imported.contains("file://"), "{imported}");
    let prompt = std::fs::read_to_string(d.join("bench/prompts/vision.yaml")).unwrap();
    assert!(
        prompt.contains(r#"{{ file(\"image\") }}{{question}}"#),
        "{prompt}"
    );
    // It runs: the chat prompt sends the image where promptfoo did; the text prompt, which
    // names no file, has it after its text (as promptfoo's would not: said in the docs).
    let (_rt, server) = start_mock(MockConfig::default());
    let (out, run) = run_imported(d, &server);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.provider.stats().files, 8);
    let s = summary(&run);
    assert!(accuracy(&s, "vision") > 0.0, "{s}");
    let bodies: Vec<String> = server
        .provider
        .bodies()
        .iter()
        .map(|b| b.to_string())
        .collect();
    assert_eq!(
        bodies
            .iter()
            .filter(|b| b.contains(r#""detail":"low""#))
            .count(),
        8,
        "the detail the image part asked for is the file's, sent by both prompts"
    );
}

#[test]
fn an_openai_eval_s_input_image_imports_as_a_case_file() {
    let bench = receipts();
    let d = bench.path();
    let cases = receipt_cases(d, 3);
    // Items carry each receipt as a data URL; the run's template shows it with an
    // `input_image` part (openai-python's EvalItem content, InputImage: image_url, detail).
    let items: String = cases
        .iter()
        .enumerate()
        .map(|(i, (file, total))| {
            let b64 = base64::engine::general_purpose::STANDARD
                .encode(std::fs::read(d.join(file)).unwrap());
            format!(
                "{}\n",
                serde_json::json!({"item": {"id": format!("r{i}"), "receipt": format!("data:image/png;base64,{b64}"), "total": total}})
            )
        })
        .collect();
    std::fs::write(d.join("items.jsonl"), items).unwrap();
    let eval = serde_json::json!({
        "object": "eval", "id": "eval_1", "name": "Receipt totals",
        "data_source_config": {"type": "custom", "schema": {"type": "object"}},
        "testing_criteria": [{"type": "string_check", "name": "Total", "input": "{{ sample.output_text }}",
                              "operation": "like", "reference": "{{ item.total }}"}]
    });
    std::fs::write(d.join("eval.json"), eval.to_string()).unwrap();
    let run = serde_json::json!({
        "object": "eval.run", "id": "evalrun_1", "name": "with-image",
        "data_source": {"type": "completions", "model": "gpt-4.1-mini",
            "source": {"type": "file_id", "id": "file-1"},
            "input_messages": {"type": "template", "template": [
                {"role": "developer", "content": "You read receipts."},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "What is the total? "},
                    {"type": "input_image", "image_url": "{{ item.receipt }}", "detail": "high"}]}]}}
    });
    std::fs::write(d.join("run.json"), run.to_string()).unwrap();
    let out = promptgauge(d)
        .args(["import", "openai-evals", "eval.json", "--run", "run.json"])
        .args(["--items", "items.jsonl", "--out", "bench"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let imported = std::fs::read_to_string(d.join("bench/cases.jsonl")).unwrap();
    assert_eq!(
        imported.matches(r#""detail":"high""#).count(),
        3,
        "{imported}"
    );
    assert!(
        !imported.contains(r#""receipt":"data"#),
        "moved out of vars: {imported}"
    );
    let (_rt, server) = start_mock(MockConfig::default());
    let (out, run) = run_imported(d, &server);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(server.provider.stats().files, 3);
    let records = journal(&run);
    let graded: Vec<&Value> = records
        .iter()
        .filter(|r| r["case_id"].is_string())
        .collect();
    assert_eq!(graded.len(), 3);
    assert!(
        graded
            .iter()
            .all(|r| r["files"][0]["origin"] == "data:image/png")
    );
    // A fixed image in a template (not an item's) is refused with the reason.
    let fixed_run = serde_json::json!({
        "object": "eval.run", "id": "evalrun_2", "name": "fixed",
        "data_source": {"type": "completions", "model": "gpt-4.1-mini",
            "input_messages": {"type": "template", "template": [
                {"role": "user", "content": [{"type": "input_image", "image_url": "https://x.test/a.png"}]}]}}
    });
    std::fs::write(d.join("fixed.json"), fixed_run.to_string()).unwrap();
    let out = promptgauge(d)
        .args(["import", "openai-evals", "eval.json", "--run", "fixed.json"])
        .args(["--items", "items.jsonl", "--out", "bench2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("is fixed"), "{}", said(&out));
    assert!(!d.join("bench2").exists());
}

/// A web server of files on `rt`: each path's bytes; counts the GETs it answered.
fn file_server(
    rt: &tokio::runtime::Runtime,
    files: Vec<(&'static str, Vec<u8>)>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let files = files
        .into_iter()
        .map(|(path, bytes)| (path, "application/octet-stream", bytes))
        .collect();
    served_files(rt, files)
}

/// [`file_server`], each file served with its `Content-Type`.
pub(crate) fn served_files(
    rt: &tokio::runtime::Runtime,
    files: Vec<(&'static str, &'static str, Vec<u8>)>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let hits = std::sync::Arc::new(AtomicUsize::new(0));
    let mut app = axum::Router::new();
    for (path, media, bytes) in files {
        let hits = hits.clone();
        app = app.route(
            path,
            axum::routing::get(move || {
                hits.fetch_add(1, Ordering::SeqCst);
                let bytes = bytes.clone();
                async move { ([(axum::http::header::CONTENT_TYPE, media)], bytes) }
            }),
        );
    }
    serve(rt, app, hits)
}

/// Serves `app` on a free loopback port on `rt`: its URL, and `hits`.
pub(crate) fn serve(
    rt: &tokio::runtime::Runtime,
    app: axum::Router,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    rt.spawn(async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        axum::serve(listener, app).await.unwrap();
    });
    (url, hits)
}

#[test]
fn fetch_urls_downloads_each_url_once_and_sends_its_bytes() {
    let (rt, server) = start_mock(MockConfig::default());
    let receipt = std::fs::read(repo().join("examples/receipts/receipts/r-001.png")).unwrap();
    let pdf = b"%PDF-1.4\nBT (What is 2 + 3?) Tj ET\n".to_vec();
    let (web, hits) = file_server(
        &rt,
        vec![
            ("/r.png", receipt.clone()),
            ("/q.pdf", pdf.clone()),
            (
                "/page.html",
                b"<!DOCTYPE html><html>Sign in</html>".to_vec(),
            ),
        ],
    );
    let run_it = |d: &Path, extra: &[&str]| {
        promptgauge(d)
            .args(["run", "bench.yaml", "--quiet", "--no-store", "--out", "r"])
            .args(["--model", "m", "--base-url", &server.base_url()])
            .args(extra)
            .output()
            .unwrap()
    };
    // A PDF by URL: chat completions take it only as bytes, so it is refused as a URL…
    let bench = one_case(
        &format!(r#"{{"doc": {{"url": "{web}/q.pdf"}}, "photo": "{web}/r.png"}}"#),
        USER,
        "repeats: 2\n",
    );
    let d = bench.path();
    let out = run_it(d, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("only as its bytes, not by URL"),
        "{}",
        said(&out)
    );
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "not fetched unasked"
    );
    // …and fetched when asked: each URL once, however many jobs send it; sent as bytes.
    let out = run_it(d, &["--fetch-urls"]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 2);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let bodies = server.provider.bodies();
    assert_eq!(bodies.len(), 2);
    for body in &bodies {
        let text = body.to_string();
        assert!(
            text.contains(&b64(&receipt)) && text.contains(&b64(&pdf)),
            "{text}"
        );
        assert!(!text.contains(&web), "no URL is sent: {text}");
    }
    let run = only_run(&d.join("r"));
    let record = journal(&run)
        .into_iter()
        .find(|r| r["case_id"] == "c1")
        .unwrap();
    let photo = &record["files"].as_array().unwrap()[1];
    assert_eq!(photo["origin"], format!("{web}/r.png"));
    assert_eq!(photo["kind"], "png");
    assert_eq!(photo["bytes"], receipt.len());
    assert_eq!(photo["sha256"].as_str().unwrap().len(), 64);
    // The PDF's words reached the model: 2 + 3.
    assert_eq!(record["score"], 1.0, "{record}");
    // The resume of a fetched run fetches again (run.json keeps the flag).
    let recorded: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(recorded["plan"]["fetch_urls"], true);
    // A page where a file should be is refused, naming the case; nothing is sent.
    let bench = one_case(
        &format!(r#"[{{"url": "{web}/page.html", "kind": "png"}}]"#),
        USER,
        "",
    );
    let before = server.provider.stats().requests;
    let out = run_it(bench.path(), &["--fetch-urls"]);
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("case `c1`") && said(&out).contains("HTML page"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, before);
}

#[test]
fn a_template_that_would_change_a_file_s_mark_is_refused_at_load() {
    let (_rt, server) = start_mock(MockConfig::default());
    for (content, no_files, expected) in [
        (
            r#"{{ file('r.png') | upper }} {{ q }}"#,
            "",
            "file('r.png') |",
        ),
        (r#"{{ file('r.png')[0:3] }} {{ q }}"#, "", "file('r.png')["),
        (r#"{{ files() | length }} {{ q }}"#, "", "files() |"),
        (
            r#"{{ file('r.png') }} {{ q }}"#,
            "files: none\n",
            "places a case's files, but the variant says `files: none`",
        ),
    ] {
        let variant = format!("{no_files}messages:\n  - role: user\n    content: \"{content}\"\n");
        let bench = one_case(r#"["f/r.png"]"#, &variant, "");
        let out = promptgauge(bench.path())
            .args(["run", "bench.yaml", "--quiet", "--no-store", "--model", "m"])
            .args(["--base-url", &server.base_url()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{content}: {}", said(&out));
        assert!(said(&out).contains("v.yaml:"), "{}", said(&out));
        assert!(said(&out).contains(expected), "{expected}: {}", said(&out));
        assert_eq!(server.provider.stats().requests, 0);
    }
}

#[test]
fn a_url_s_password_and_query_are_never_kept_nor_shown() {
    let (rt, server) = start_mock(MockConfig::default());
    let receipt = std::fs::read(repo().join("examples/receipts/receipts/r-001.png")).unwrap();
    let (web, _) = file_server(&rt, vec![("/r.png", receipt)]);
    let signed =
        web.replace("http://", "http://alice:s3cretpw@") + "/r.png?X-Amz-Signature=SIGSECRET123";
    let bench = one_case(&format!(r#"["{signed}"]"#), USER, "");
    let d = bench.path();
    let out = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--model",
            "m",
            "--fetch-urls",
        ])
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    let run = only_run(&d.join("reports"));
    for file in ["results.jsonl", "report.html", "summary.json"] {
        let text = std::fs::read_to_string(run.join(file)).unwrap();
        assert!(
            !text.contains("s3cretpw") && !text.contains("SIGSECRET123"),
            "{file} keeps a credential"
        );
    }
    // A URL that fails is named the same way.
    let bench = one_case(
        &format!(r#"["{}"]"#, signed.replace("/r.png", "/gone.png")),
        USER,
        "",
    );
    let out = promptgauge(bench.path())
        .args([
            "run",
            "bench.yaml",
            "--quiet",
            "--no-store",
            "--model",
            "m",
            "--fetch-urls",
        ])
        .args(["--base-url", &server.base_url()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(said(&out).contains("answered 404"), "{}", said(&out));
    assert!(!said(&out).contains("s3cretpw") && !said(&out).contains("SIGSECRET123"));
}

#[test]
fn what_is_no_file_to_send_is_refused_at_load_with_the_reason() {
    let (_rt, server) = start_mock(MockConfig::default());
    for (name, bytes, files, expected) in [
        (
            "page.txt",
            b"<!DOCTYPE html><html><script>x</script></html>".to_vec(),
            r#"["f/page.txt"]"#,
            "is an HTML page",
        ),
        ("empty.png", Vec::new(), r#"["f/empty.png"]"#, "is empty"),
        (
            "latin1.txt",
            b"caf\xe9 au lait".to_vec(),
            r#"["f/latin1.txt"]"#,
            "not UTF-8 at byte 3",
        ),
        (
            "esc.txt",
            b"ok \x1b[2J".to_vec(),
            r#"["f/esc.txt"]"#,
            "control character U+001B at byte 3",
        ),
        (
            "cut.png",
            b"\x89PNG\r\n\x1a\n\0\0\0\rIH".to_vec(),
            r#"["f/cut.png"]"#,
            "its size cannot be read from it",
        ),
        (
            "x.bin",
            Vec::new(),
            r#"["ftp://host/x.png"]"#,
            "`ftp://` is not a place",
        ),
        ("y.bin", Vec::new(), r#"["f"]"#, "(a folder)"),
        (
            "z.bin",
            Vec::new(),
            r#"[{"url": "https://x.test/a", "kind": "banana"}]"#,
            "`kind: banana`",
        ),
    ] {
        let bench = one_case(files, USER, "");
        std::fs::write(bench.path().join("f").join(name), bytes).unwrap();
        let out = promptgauge(bench.path())
            .args(["check", "bench.yaml"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{name}: {}", said(&out));
        assert!(said(&out).contains(expected), "{expected}: {}", said(&out));
        assert!(said(&out).contains("cases.jsonl:1"), "{}", said(&out));
    }
    assert_eq!(server.provider.stats().requests, 0);
}

#[test]
fn a_file_name_a_case_lacks_or_a_variable_that_hides_file_is_said_with_its_fix() {
    for (files, vars, expected_error, expected_fix) in [
        (
            r#"{"photo": "f/r.png"}"#,
            r#"{"q": "?"}"#,
            "has no file named `r.png`",
            "give the case a file of that name",
        ),
        (
            r#"{"r.png": "f/r.png"}"#,
            r#"{"q": "?", "file": "zz"}"#,
            "has a variable named `file`, which hides the function file()",
            "rename the case's variable `file`",
        ),
    ] {
        let variant = "messages:\n  - { role: user, content: \"{{ file('r.png') }} {{ q }}\" }\n";
        let bench = one_case(files, variant, "");
        let cases = std::fs::read_to_string(bench.path().join("cases.jsonl")).unwrap();
        std::fs::write(
            bench.path().join("cases.jsonl"),
            cases.replace(r#""vars": {"q": "?"}"#, &format!(r#""vars": {vars}"#)),
        )
        .unwrap();
        let out = promptgauge(bench.path())
            .args(["check", "bench.yaml"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", said(&out));
        assert!(said(&out).contains(expected_error), "{}", said(&out));
        assert!(said(&out).contains(expected_fix), "{}", said(&out));
    }
}
