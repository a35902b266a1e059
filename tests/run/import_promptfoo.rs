//! `import promptfoo` on configs written in each form promptfoo documents
//! (tests/fixtures/promptfoo/): the bench passes `check` and means what promptfoo means —
//! the variants, the cases (list variables expanded), the values as js-yaml reads them, and
//! every part it could not carry over named in IMPORT-NOTES.md.

use std::path::{Path, PathBuf};

use crate::common::*;
use promptgauge::mock::MockConfig;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/promptfoo")
        .join(name)
}

/// An imported bench: the terminal's words, its cases, its variants' files by name, and
/// its notes.
struct Imported {
    stdout: String,
    cases: Vec<Value>,
    variants: Vec<(String, String)>,
    notes: String,
    dir: PathBuf,
}

fn import(config: &Path, out: &Path) -> Imported {
    let o = promptgauge(out.parent().unwrap())
        .args(["import", "promptfoo"])
        .arg(config)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let cases = std::fs::read_to_string(out.join("cases.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let bench = std::fs::read_to_string(out.join("promptgauge.yaml")).unwrap();
    let variants = bench
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- prompts/"))
        .map(|f| {
            (
                f.to_string(),
                std::fs::read_to_string(out.join("prompts").join(f)).unwrap(),
            )
        })
        .collect();
    let notes = std::fs::read_to_string(out.join("IMPORT-NOTES.md")).unwrap();
    // What import wrote, `check` takes.
    let check = promptgauge(out).args(["check"]).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    Imported {
        stdout,
        cases,
        variants,
        notes,
        dir: out.to_path_buf(),
    }
}

#[test]
fn the_six_silent_changes_are_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("silent/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    let names: Vec<&str> = im.variants.iter().map(|(f, _)| f.as_str()).collect();
    // A `---` file is three variants; a bare file name is a file; `pf://` is named, never
    // sent as the prompt's text; a prompt's response_format rides with its variant.
    assert_eq!(
        names,
        [
            "several-1.txt",
            "several-2.txt",
            "several-3.txt",
            "bare.txt",
            "json-answer.yaml"
        ],
        "{}",
        im.stdout
    );
    assert!(im.variants.iter().all(|(_, t)| !t.contains("---")));
    assert!(im.variants[3].1.starts_with("Reply to: {{body}}"));
    assert!(
        im.variants[4]
            .1
            .contains(r#"params: {"response_format":{"type":"json_object"}}"#),
        "{}",
        im.variants[4].1
    );
    assert!(im.notes.contains("pf://support-reply"), "{}", im.notes);
    // One test with two lists of five is 25 cases; the vars file's test and the CSV's 3.
    assert_eq!(im.cases.len(), 25 + 1 + 3, "{}", im.stdout);
    let pairs: std::collections::BTreeSet<(String, String)> = im.cases[..25]
        .iter()
        .map(|c| {
            (
                c["vars"]["topic"].as_str().unwrap().to_string(),
                c["vars"]["lang"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(pairs.len(), 25);
    // `Yes`, `off`, `on` stay the words written (js-yaml's core schema), from the config,
    // a vars file and defaultTest from a file alike.
    assert!(im.cases[..25].iter().all(|c| c["vars"]["body"] == "Yes"));
    assert_eq!(im.cases[25]["vars"]["body"], "off");
    assert_eq!(im.cases[25]["vars"]["topic"], "rain");
    // defaultTest's assert (from its file) reached every test: `contains` its topic.
    assert_eq!(im.cases[25]["expected"], "rain");
    // A CSV `__expected` of code is never an exact answer: the row keeps the default
    // assert, and the code is said.
    let snow = &im.cases[26];
    assert_eq!(snow["vars"]["topic"], "snow");
    assert_eq!(snow["expected"], "snow");
    assert!(
        !im.cases
            .iter()
            .any(|c| c["expected"].to_string().contains("javascript")),
        "{:?}",
        im.cases
    );
    // …it runs as promptfoo runs it: the file copied beside the shim, a command scorer.
    let runs = snow["grade"]["of"].to_string();
    assert!(
        runs.contains("scorers/promptfoo-assert.cjs") && runs.contains("file:scorers/check.js"),
        "{runs}"
    );
    assert!(im.dir.join("scorers/check.js").is_file());
    // An empty `__expected` is no assert (not "equals the empty text").
    assert_eq!(im.cases[28]["expected"], "fog");
    assert!(!im.notes.contains("Everything else was carried over"));
}

#[test]
fn every_prompt_and_test_form_imports() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("forms/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    let names: Vec<&str> = im.variants.iter().map(|(f, _)| f.as_str()).collect();
    // A glob (two files), a JSON chat, a prompts CSV with labels, a filter both template
    // engines have; one minijinja lacks is refused by name.
    assert_eq!(
        names,
        [
            "a.txt",
            "b.txt",
            "chat.yaml",
            "define.txt",
            "example.txt",
            "prompt-4.txt"
        ],
        "{}",
        im.stdout
    );
    assert!(im.variants[2].1.contains("role: system"));
    assert_eq!(im.variants[5].1, "Item {{ item.k }} on {{ topic | upper }}");
    assert!(
        im.notes.contains("`truncate`") && im.notes.contains("`dump`"),
        "{}",
        im.notes
    );
    // A glob of YAML files and a JSONL file: three scored tests, one kept apart to read.
    let topics: Vec<&str> = im
        .cases
        .iter()
        .map(|c| c["vars"]["topic"].as_str().unwrap())
        .collect();
    assert_eq!(topics, ["tides", "snow", "wind"]);
    assert_eq!(im.cases[1]["expected"], serde_json::json!(["snow", "ice"]));
    let apart = std::fs::read_to_string(im.dir.join("cases-without-asserts.jsonl")).unwrap();
    assert!(
        apart.contains("\"rain\"") && apart.lines().count() == 1,
        "{apart}"
    );
    assert!(
        im.stdout
            .contains("1 test without an assert kept apart, for reading"),
        "{}",
        im.stdout
    );
    assert!(
        im.notes.contains("## Tests without an assert"),
        "{}",
        im.notes
    );

    // The legacy map form: each file labelled.
    let im = import(&fixture("forms/legacy.yaml"), &tmp.path().join("legacy"));
    let names: Vec<&str> = im.variants.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names, ["first.txt", "second.txt"]);
    // Nothing was left out, and the notes say so only because every key was read.
    assert!(
        im.notes.contains("Everything else was carried over"),
        "{}",
        im.notes
    );
}

#[test]
fn a_config_key_the_import_does_not_read_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("c.yaml"),
        "prompts: [\"Hi {{x}}\"]\noutputPath: out.json\nevaluateOptions: { maxConcurrency: 2 }\ntests:\n  - vars: { x: a }\n    assert: [{ type: contains, value: a }]\n",
    )
    .unwrap();
    let im = import(&d.join("c.yaml"), &d.join("bench"));
    for key in ["`outputPath`", "`evaluateOptions`"] {
        assert!(im.notes.contains(key), "{key}: {}", im.notes);
    }
    assert!(!im.notes.contains("Everything else was carried over"));
}

#[test]
fn asserts_become_the_scorers_that_pass_when_promptfoo_s_do() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("asserts/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    let grade = |i: usize| im.cases[i]["grade"].clone();
    // not-* and contains-all as expressions; a one-line javascript check too.
    let first = grade(0)["of"].to_string();
    assert!(
        first.contains(r#"not (\"sorry\" in output|lower)"#),
        "{first}"
    );
    assert!(first.contains(r#"\"paris\" in output|lower"#), "{first}");
    assert_eq!(grade(0)["of"][2]["kind"], "expr", "{first}");
    // A function body, a python expression and a file: run by the shims.
    assert_eq!(grade(1)["kind"], "command");
    assert_eq!(grade(1)["run"][0], "node");
    assert_eq!(grade(2)["of"][0]["run"][0], "python3");
    assert_eq!(grade(2)["of"][1]["run"][2], "file:scorers/check.js");
    // similar: the embedding scorer at its threshold, the value the expected answer.
    assert_eq!(grade(3)["kind"], "embedding");
    assert_eq!(grade(3)["threshold"], 0.5);
    assert_eq!(
        im.cases[3]["expected"],
        "The sea is a large body of salt water."
    );
    // g-eval: a judge of its criteria; cost and latency: the bench's gates.
    assert_eq!(grade(4)["kind"], "judge");
    assert_eq!(
        grade(4)["criteria"][0]["rubric"],
        "The explanation mentions the moon."
    );
    for said in ["gates.max_latency", "gates.max_cost_per_job", "g-eval"] {
        assert!(im.notes.contains(said), "{said}: {}", im.notes);
    }
    // The shims score answers on the simulator as promptfoo's asserts would.
    if !node_and_python() {
        return;
    }
    let run = promptgauge(&im.dir)
        .args([
            "run",
            "--base-url",
            "mock",
            "--no-store",
            "--quiet",
            "--limit",
            "3",
        ])
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ran = run_dirs(&im.dir.join("reports")).remove(0);
    let results = std::fs::read_to_string(ran.join("results.jsonl")).unwrap();
    let scored = results.lines().filter(|l| l.contains("\"score\"")).count();
    assert_eq!(scored, 3, "{results}");
}

/// Each imported case's scorer on `output`: does it pass?
fn passes(dir: &Path, outputs: &[&str]) -> Vec<Vec<bool>> {
    use promptgauge::grade::{Answer, ScoreContext, ScoreInput};
    let bench = promptgauge::suite::Bench::load(&dir.join("promptgauge.yaml")).unwrap();
    let scorers = promptgauge::grade::scorers_for(&bench).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    bench
        .cases
        .iter()
        .zip(&scorers)
        .map(|(case, scorer)| {
            outputs
                .iter()
                .map(|o| {
                    let answer = Answer {
                        text: o.to_string(),
                        ..Answer::default()
                    };
                    let input = ScoreInput {
                        key: "k",
                        repeat: 0,
                        case,
                        messages: &[],
                        answer: &answer,
                    };
                    let score = rt
                        .block_on(scorer.score(input, &ScoreContext::default()))
                        .unwrap();
                    score.value == 1.0
                })
                .collect()
        })
        .collect()
}

/// promptfoo's verdict on each output, by its own rule run in Node.js (src/assertions:
/// `JSON.parse(output)` for is-json, `String(value) === output` for equals,
/// `isDeepStrictEqual` for an object); `None` without node.
fn node_verdicts(rules: &[&str], outputs: &[&str]) -> Option<Vec<Vec<bool>>> {
    use std::io::Write;
    let script = r#"
const util = require('util');
const {rules, outputs} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const parses = (o) => { try { JSON.parse(o); return true; } catch { return false; } };
const parsed = (o) => { try { return JSON.parse(o); } catch { return undefined; } };
const city = (v) => v !== null && typeof v === 'object' && !Array.isArray(v) && typeof v.city === 'string';
const anywhere = (o) => { const m = o.match(/[{\[][\s\S]*[}\]]/); return parses(o) || (m !== null && parses(m[0])); };
const rule = {
  'is-json': (o) => parses(o),
  'is-json-schema': (o) => parses(o) && city(parsed(o)),
  'contains-json': (o) => anywhere(o),
  'equals-text': (o) => String('Paris') === o,
  'equals-object': (o) => parses(o) && util.isDeepStrictEqual({city: 'Paris', n: 1}, parsed(o)),
  'equals-number': (o) => String(42) === o,
  'not-is-json': (o) => !parses(o),
};
console.log(JSON.stringify(rules.map((r) => outputs.map((o) => rule[r](o)))));
"#;
    let mut child = std::process::Command::new("node")
        .args(["-e", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    let input = serde_json::json!({"rules": rules, "outputs": outputs});
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn is_json_and_equals_give_promptfoo_s_verdicts() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("verdicts/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    let outputs = [
        r#"{"city": "Paris", "n": 1}"#,
        r#"Here it is: {"city": "Paris", "n": 1}"#,
        "```json\n{\"city\": \"Paris\", \"n\": 1}\n```",
        r#"{"city": "Paris",}"#,
        r#"{"n": 1, "city": "Paris"}"#,
        r#"{"city": 7}"#,
        "Paris",
        "Paris\n",
        " Paris",
        "paris",
        "42",
        "42\n",
        "42.0",
    ];
    let t = true;
    let f = false;
    // Rows: the fixture's tests in order; columns: the outputs above.
    let want: Vec<(&str, Vec<bool>)> = vec![
        ("is-json", vec![t, f, f, f, t, t, f, f, f, f, t, t, t]),
        (
            "is-json-schema",
            vec![t, f, f, f, t, f, f, f, f, f, f, f, f],
        ),
        ("contains-json", vec![t, t, t, f, t, t, f, f, f, f, t, t, t]),
        ("equals-text", vec![f, f, f, f, f, f, t, f, f, f, f, f, f]),
        ("equals-object", vec![t, f, f, f, t, f, f, f, f, f, f, f, f]),
        ("equals-number", vec![f, f, f, f, f, f, f, f, f, f, t, f, f]),
        ("not-is-json", vec![f, t, t, t, f, f, t, t, t, t, f, f, f]),
        (
            "is-json-schema",
            vec![t, f, f, f, t, f, f, f, f, f, f, f, f],
        ),
    ];
    let got = passes(&im.dir, &outputs);
    for ((rule, want), got) in want.iter().zip(&got) {
        assert_eq!(got, want, "{rule}: {outputs:?}");
    }
    // The table is promptfoo's own rule's, where Node.js is here to say so.
    let rules: Vec<&str> = want.iter().map(|(r, _)| *r).collect();
    if let Some(node) = node_verdicts(&rules, &outputs) {
        for ((rule, want), node) in want.iter().zip(&node) {
            assert_eq!(node, want, "node's {rule}: {outputs:?}");
        }
    }
    // `equals` is no `exact` (which trims): an expression over the whole output.
    assert_eq!(im.cases[3]["grade"]["kind"], "expr", "{:?}", im.cases[3]);
    assert_eq!(im.cases[3]["expected"], "Paris");
    assert!(
        im.notes.contains("Everything else was carried over"),
        "{}",
        im.notes
    );
}

#[test]
fn tests_and_asserts_are_counted_apart() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut tests = String::from(
        "  - vars: { q: a }\n    assert: [{ type: contains, value: a }]\n  - vars: { q: [x, y], lang: [en, fr] }\n    assert: [{ type: contains, value: \"{{q}}\" }, { type: moderation }]\n  - vars: { q: b }\n    assert: [{ type: contains, value: b }, { type: moderation }, { type: icontains, value: b }]\n",
    );
    for q in ["c", "d", "e", "f", "g", "h"] {
        tests.push_str(&format!(
            "  - vars: {{ q: {q} }}\n    assert: [{{ type: contains, value: {q} }}]\n"
        ));
    }
    std::fs::write(
        d.join("c.yaml"),
        format!("prompts: [\"Say {{{{q}}}}\"]\ndefaultTest:\n  assert: [{{ type: javascript, value: \"output.length < 500\" }}]\ntests:\n{tests}"),
    )
    .unwrap();
    let im = import(&d.join("c.yaml"), &d.join("bench"));
    // 9 tests; one has lists of 2 and 2 (4 cases): 12 cases. Asserts as written: 12 of the
    // tests and defaultTest's one; the two `moderation` are left out.
    assert_eq!(im.cases.len(), 12);
    assert!(
        im.stdout.contains("imported 1 prompt and 9 tests"),
        "{}",
        im.stdout
    );
    let counts = "9 tests of the config: 12 cases scored by the bench; 13 asserts (11 became scorers or gates, 2 left out: below)";
    assert!(im.stdout.contains(counts), "{}", im.stdout);
    assert!(im.notes.contains(&counts[1..]), "{}", im.notes);
    // A note said by two tests (one of them for each of its 4 cases) counts 2 tests.
    assert!(
        im.notes
            .contains("2 tests: assert `moderation` has no promptgauge scorer"),
        "{}",
        im.notes
    );
    // Notes name the config's tests: the one after the lists is test 3, not test 6.
    assert!(!im.notes.contains("test 6"), "{}", im.notes);
}

#[test]
fn a_file_the_bench_cannot_send_is_left_out_by_name_never_written() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("vision/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    // A variable named `url` is the case's file `url_file` (a `files: {url: …}` would be
    // one file written as an object), placed where the image part was.
    assert_eq!(im.cases.len(), 1, "{:?}", im.cases);
    assert_eq!(
        im.cases[0]["files"],
        serde_json::json!({"url_file": "https://example.com/photos/boardwalk.jpg"})
    );
    assert!(
        im.variants[0].1.contains(r#"{{ file(\"url_file\") }}"#),
        "{}",
        im.variants[0].1
    );
    // A URL whose name does not say what it holds, and an object, are named and left out.
    assert!(
        im.notes.contains("https://example.com/image?id=7")
            && im.notes.contains("does not say by its name what it holds"),
        "{}",
        im.notes
    );
    assert!(
        im.notes.matches("this case was left out").count() == 2,
        "{}",
        im.notes
    );
    assert!(!im.notes.contains("Everything else was carried over"));
}

#[test]
fn latency_and_cost_asserts_become_the_bench_s_gates() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("c.yaml"),
        r#"prompts: ["What is {{a}} + {{b}}?"]
tests:
  - vars: { a: 2, b: 3 }
    assert:
      - { type: contains, value: "5" }
      - { type: latency, threshold: 5000 }
  - vars: { a: 4, b: 4 }
    assert:
      - { type: latency, threshold: 1 }
      - { type: cost, threshold: 0.5 }
"#,
    )
    .unwrap();
    let im = import(&d.join("c.yaml"), &d.join("bench"));
    let bench = std::fs::read_to_string(im.dir.join("promptgauge.yaml")).unwrap();
    // The smallest threshold; the cost gate waits for a price (check would refuse it).
    assert!(bench.contains("\n  max_latency: 1ms\n"), "{bench}");
    assert!(bench.contains("  # max_cost_per_job: 0.5"), "{bench}");
    // A test whose asserts are all gates still runs, so its latency is measured.
    assert_eq!(im.cases.len(), 2, "{}", im.stdout);
    assert_eq!(im.cases[1]["grade"]["expr"], "true");
    assert!(
        im.notes
            .contains("promptfoo fails that test's row; here the run's gate fails"),
        "{}",
        im.notes
    );
    assert!(
        im.stdout.contains("4 asserts (4 became scorers or gates)"),
        "{}",
        im.stdout
    );
    // On a simulator whose answers take 20 ms: the bench's gate fails the run (exit 1);
    // the flag overrides it.
    let (_rt, server) = start_mock(promptgauge::mock::MockConfig {
        first_token_delay: std::time::Duration::from_millis(20),
        ..Default::default()
    });
    let run = |flags: &[&str]| {
        let o = promptgauge(&im.dir)
            .args(["run", "--base-url", &server.base_url(), "--model", "m"])
            .args(["--no-store", "--quiet"])
            .args(flags)
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, said) = run(&[]);
    assert_eq!(code, 1, "{said}");
    assert!(said.contains("gate failed: max-latency 1ms"), "{said}");
    let (code, said) = run(&["--max-latency", "60s"]);
    assert_eq!(code, 0, "{said}");
}

#[test]
fn a_transform_every_test_shares_becomes_the_bench_s_reading_and_others_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let config = |default: &str, second: &str| {
        format!(
            r#"prompts: ["Answer: {{{{q}}}}"]
defaultTest:
  options: {{ {default} }}
tests:
  - vars: {{ q: a }}
    assert: [{{ type: equals, value: paris }}]
  - vars: {{ q: b }}
    {second}assert: [{{ type: contains, value: lyon, transform: "output.toUpperCase()" }}]
"#
        )
    };
    // defaultTest's transform is every test's: the bench's reading.
    std::fs::write(
        d.join("a.yaml"),
        config(
            "transform: \"output.trim().toLowerCase()\", transformVars: \"{ ...vars, q: vars.q.toUpperCase() }\"",
            "",
        ),
    )
    .unwrap();
    let im = import(&d.join("a.yaml"), &d.join("a"));
    let bench = std::fs::read_to_string(im.dir.join("promptgauge.yaml")).unwrap();
    assert!(
        bench.contains(r#"extract: {"template":"{{ answer | lower }}"}"#),
        "{bench}"
    );
    // The reading gives the asserts what the transform gives promptfoo's:
    // `"  PARIS \n".trim().toLowerCase() === "paris"`.
    let loaded = promptgauge::suite::Bench::load(&im.dir.join("promptgauge.yaml")).unwrap();
    let reading = loaded.variants[0]
        .extract
        .clone()
        .expect("the bench's reading");
    let read =
        promptgauge::grade::read::read(&reading, "  PARIS \n", &loaded.cases[0].vars).unwrap();
    assert_eq!(read, "paris");
    assert_eq!(passes(&im.dir, &[&read, "  PARIS \n"])[0], [true, false]);
    // What it cannot carry is said: transformVars, and an assert's own transform.
    assert!(
        im.notes.contains("`options.transformVars`")
            && im.notes.contains("assert `contains`'s `transform`")
            && im.notes.contains("sees the untransformed output"),
        "{}",
        im.notes
    );
    // JSON.parse(output).answer is a JSON pointer reading, its difference said.
    std::fs::write(
        d.join("b.yaml"),
        config("transform: \"JSON.parse(output).answer\"", ""),
    )
    .unwrap();
    let im = import(&d.join("b.yaml"), &d.join("b"));
    let bench = std::fs::read_to_string(im.dir.join("promptgauge.yaml")).unwrap();
    assert!(bench.contains(r#"extract: {"json":"/answer"}"#), "{bench}");
    assert!(im.notes.contains("JSON.parse throws"), "{}", im.notes);
    // A transform only one test has, and one no reading can say: named, never applied.
    std::fs::write(
        d.join("c.yaml"),
        config(
            "transform: \"output.replace(/x/g, '')\"",
            "options: { transform: \"output.trim()\" }\n    ",
        ),
    )
    .unwrap();
    let im = import(&d.join("c.yaml"), &d.join("c"));
    let bench = std::fs::read_to_string(im.dir.join("promptgauge.yaml")).unwrap();
    assert!(!bench.contains("extract:"), "{bench}");
    assert!(
        im.notes
            .contains("test 2: its `options.transform` (`output.trim()`)")
            && im.notes.contains("defaultTest's `options.transform`"),
        "{}",
        im.notes
    );
    assert!(!im.notes.contains("Everything else was carried over"));
}

#[test]
fn imported_asserts_grade_on_the_simulator_as_promptfoo_grades_them() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(
        &fixture("graded/promptfooconfig.yaml"),
        &tmp.path().join("bench"),
    );
    // Each part is named by its assert's type, as promptfoo's results name them, numbered
    // over the bench by check (test 2's javascript checks another thing than test 1's); a
    // `$ref` is the template it points at, and nothing about it is left out.
    let names = |i: usize| -> Vec<String> {
        im.cases[i]["grade"]["of"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(0), ["javascript", "python"]);
    assert_eq!(names(1), ["javascript 2", "icontains"]);
    assert_eq!(im.cases[1]["expected"], "lime");
    assert!(
        im.notes.contains("Everything else was carried over"),
        "{}",
        im.notes
    );
    if !node_and_python() {
        return;
    }
    let run = promptgauge(&im.dir)
        .args(["run", "--base-url", "mock", "--no-store", "--quiet"])
        .output()
        .unwrap();
    let ran = run_dirs(&im.dir.join("reports")).remove(0);
    let results = std::fs::read_to_string(ran.join("results.jsonl")).unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}{results}",
        String::from_utf8_lossy(&run.stderr)
    );
    let jobs = jobs_of(&ran);
    // What the assert files print does not break the scorer's replies: every job graded.
    assert_eq!(jobs.len(), 2, "{results}");
    assert!(jobs.iter().all(|j| j["status"] == "graded"), "{results}");
    // `JSON.parse` of an answer that is not JSON throws: the assert fails (0), as in
    // promptfoo, and the job counts; it is not dropped as a failed job.
    let lime = jobs.iter().find(|j| j["case_id"] == "t-002").unwrap();
    let part = |name: &str| {
        lime["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["score"].as_f64().unwrap())
    };
    if serde_json::from_str::<Value>(lime["output"].as_str().unwrap()).is_err() {
        assert_eq!(part("javascript 2"), Some(0.0), "{lime}");
    }
    assert!(part("icontains").is_some(), "{lime}");
}

/// Whether Node and Python are here to run the shims of code asserts (outside CI, a test
/// that needs them stops short).
fn node_and_python() -> bool {
    ["node", "python3"].iter().all(|tool| {
        std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_ok()
    })
}

/// The job lines of a run's results.jsonl.
fn jobs_of(run: &Path) -> Vec<Value> {
    journal(run)
        .into_iter()
        .filter(|j| j.get("job").is_some())
        .collect()
}

/// One request line through a shim of an imported bench, as the `command` scorer sends it:
/// the reply's score.
fn shim_score(bench: &Path, run: &[Value], answer: &str, tool_calls: Value) -> f64 {
    use std::io::Write;
    let argv: Vec<&str> = run.iter().map(|a| a.as_str().unwrap()).collect();
    let mut child = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .current_dir(bench)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let request = serde_json::json!({
        "id": 1, "case": {"vars": {"item": "lemon"}}, "messages": [],
        "answer": answer, "tool_calls": tool_calls,
    });
    writeln!(child.stdin.take().unwrap(), "{request}").unwrap();
    let out = child.wait_with_output().unwrap();
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    reply["score"].as_f64().unwrap_or(-1.0)
}

#[test]
fn code_asserts_see_the_answer_as_promptfoo_hands_it() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(&fixture("graded/schema.yaml"), &tmp.path().join("bench"));
    let of = im.cases[0]["grade"]["of"].as_array().unwrap().clone();
    // Every prompt asks for a JSON schema's answer: the asserts get it parsed.
    for scorer in &of {
        assert!(
            scorer["run"].to_string().contains("--parse-json"),
            "{scorer}"
        );
    }
    let has = |p: &str| {
        std::process::Command::new(p)
            .arg("--version")
            .output()
            .is_ok()
    };
    if !has("node") || !has("python3") {
        return;
    }
    for scorer in &of {
        let run = scorer["run"].as_array().unwrap();
        let score = |answer: &str| shim_score(&im.dir, run, answer, serde_json::json!([]));
        assert_eq!(score(r#"{"color": "yellow"}"#), 1.0, "{scorer}");
        assert_eq!(score(r#"{"color": "green"}"#), 0.0, "{scorer}");
        assert_eq!(score("yellow"), 0.0, "{scorer}");
    }
    // A tool call with no text is handed over as promptfoo's OpenAI provider hands it: the
    // calls, each `{id, type: function, function: {name, arguments}}`.
    let js = serde_json::json!([
        "node",
        "scorers/promptfoo-assert.cjs",
        "inline:output[0].function.name === 'get_weather' && JSON.parse(output[0].function.arguments).city === 'Oslo'"
    ]);
    let calls = serde_json::json!([{"id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}]);
    assert_eq!(shim_score(&im.dir, js.as_array().unwrap(), "", calls), 1.0);
}

/// A config whose tests carry different asserts of one type: `javascript` checking one
/// thing in both tests, and another only in the second (which always fails); the
/// defaultTest's assert in both.
const PER_TEST_ASSERTS: &str = r#"
prompts: ["Echo: {{text}}"]
providers: [openai:chat:gpt-4o-mini]
defaultTest:
  assert:
    - type: not-icontains
      value: zzqqzz
tests:
  - vars: { text: alpha }
    assert:
      - type: icontains
        value: alpha
      - type: javascript
        value: output.length < 100000
  - vars: { text: beta }
    assert:
      - type: icontains
        value: beta
      - type: javascript
        value: output.length > 100000
      - type: javascript
        value: output.length < 100000
      - type: equals
        value: beta
        metric: exactly
"#;

#[test]
fn an_imported_bench_s_parts_each_pool_one_check_and_say_their_cases() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("promptfooconfig.yaml"), PER_TEST_ASSERTS).unwrap();
    let im = import(&d.join("promptfooconfig.yaml"), &d.join("bench"));
    // Each assert a part named by its type (or its metric), numbered over the bench by
    // check: the same check in both tests is one name, a different one another.
    let names = |i: usize| -> Vec<String> {
        im.cases[i]["grade"]["of"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(0), ["not-icontains", "icontains", "javascript"]);
    assert_eq!(
        names(1),
        [
            "not-icontains",
            "icontains",
            "javascript 2",
            "javascript",
            "exactly"
        ]
    );
    let run = promptgauge(&im.dir)
        .args(["run", "--base-url", "mock", "--no-store"])
        .args(["--min-accuracy", "@javascript 2=0.5"])
        .args(["--min-accuracy", "@javascript=0.01"])
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&run.stdout).into_owned();
    // The gate on the failing check does not pass (one case: inconclusive, exit 5), the
    // one on the passing check does: each names one check, as the report's rows do.
    assert_eq!(run.status.code(), Some(5), "{terminal}");
    let dir = run_dirs(&im.dir.join("reports")).remove(0);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let part = |name: &str| {
        summary["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no part {name}: {summary}"))
            .clone()
    };
    // The check that always passes, in both tests; the one that always fails, in one.
    assert_eq!(part("javascript")["cases"], 2);
    assert_eq!(part("javascript")["variants"][0]["mean"], 1.0);
    assert_eq!(part("javascript 2")["cases"], 1);
    assert_eq!(part("javascript 2")["variants"][0]["mean"], 0.0);
    assert_eq!(part("javascript 2")["variants"][0]["n"], 1);
    assert_eq!(part("not-icontains")["cases"], 2);
    assert_eq!(part("exactly")["cases"], 1);
    let gates = summary["gates"].as_array().unwrap();
    let passed = |part: &str| {
        gates
            .iter()
            .find(|g| g["gate"].as_str().unwrap().ends_with(part))
            .unwrap_or_else(|| panic!("no gate on {part}: {gates:?}"))["passed"]
            .clone()
    };
    assert_eq!(passed("on javascript 2"), false);
    assert_eq!(passed("on javascript"), true);
    let said = &gates[0]["reason"];
    assert!(said.as_str().unwrap().contains("on 1 cases"), "{said}");
    // Every table says the same: the part's row with its cases.
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| part | cases |"), "{md}");
    assert!(md.contains("| javascript 2 | 1 |"), "{md}");
    assert!(md.contains("| javascript | 2 |"), "{md}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<th>cases</th>"), "{html}");
    assert!(
        terminal
            .lines()
            .any(|l| l.contains("javascript 2") && l.contains(" 1 ") && l.contains("0.0%")),
        "{terminal}"
    );
}

#[test]
fn csv_metadata_and_assert_settings_are_no_variables() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(&fixture("graded/metadata.yaml"), &tmp.path().join("bench"));
    // `__metadata:…` and `__config:…` columns are promptfoo's, not the prompt's variables.
    assert_eq!(im.cases[0]["vars"], serde_json::json!({"topic": "tides"}));
    // `__config:__expected2:threshold` is that assert's threshold; the metadata is named.
    let of = &im.cases[0]["grade"]["of"];
    assert_eq!(of[1]["name"], "javascript", "{of}");
    assert!(of[1].to_string().contains("--threshold=0.6"), "{of}");
    assert!(im.notes.contains("`metadata`"), "{}", im.notes);
}

#[test]
fn asserts_of_weight_zero_are_reported_and_never_decide() {
    let tmp = tempfile::tempdir().unwrap();
    let im = import(&fixture("graded/metrics.yaml"), &tmp.path().join("bench"));
    // promptfoo records an assert of weight 0 and passes it: a part of weight 0 in a mean.
    let grade = &im.cases[0]["grade"];
    assert_eq!(grade["kind"], "mean", "{grade}");
    assert_eq!(grade["weights"], serde_json::json!([1.0, 0.0]), "{grade}");
    assert_eq!(grade["of"][0]["name"], "icontains");
    assert_eq!(grade["of"][1]["name"], "false_negatives");
    assert!(!im.notes.contains("`weight`"), "{}", im.notes);
    if std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_err()
    {
        return;
    }
    let run = promptgauge(&im.dir)
        .args(["run", "--base-url", "mock", "--no-store", "--quiet"])
        .output()
        .unwrap();
    let ran = run_dirs(&im.dir.join("reports")).remove(0);
    let results = std::fs::read_to_string(ran.join("results.jsonl")).unwrap();
    assert_eq!(run.status.code(), Some(0), "{results}");
    // Each job scores as its weighted assert does, whatever the metric recorded.
    for line in results.lines() {
        let job: Value = serde_json::from_str(line).unwrap();
        if job.get("job").is_none() {
            continue;
        }
        let part = job["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "icontains")
            .unwrap()["score"]
            .clone();
        assert_eq!(job["score"], part, "{job}");
    }
}

#[test]
fn an_image_part_without_a_type_is_never_read_as_empty_text() {
    // Bedrock's `{image: {source: …}}` part has no `type`: it was taken for a text part
    // with no text, and the bench sent the question without its image.
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench");
    let o = promptgauge(tmp.path())
        .args(["import", "promptfoo"])
        .arg(fixture("graded/bedrock-image.yaml"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{said}");
    assert!(said.contains("`image` part without a `type`"), "{said}");
    assert!(!out.join("promptgauge.yaml").exists());
}

#[test]
fn a_config_whose_tests_have_no_assert_is_a_bench_run_for_its_answers() {
    // promptfoo's comparisons of prompts and providers often have no assert: the user reads
    // the answers side by side. Such a config is imported, not refused.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("c.yaml"),
        "description: two tones\nprompts: [\"Reply briefly to: {{msg}}\", \"Reply warmly to: {{msg}}\"]\ntests:\n  - vars: { msg: hello }\n  - vars: { msg: [late order, lost parcel] }\n",
    )
    .unwrap();
    let im = import(&d.join("c.yaml"), &d.join("bench"));
    assert_eq!(im.variants.len(), 2, "{}", im.stdout);
    let msgs: Vec<&str> = im
        .cases
        .iter()
        .map(|c| c["vars"]["msg"].as_str().unwrap())
        .collect();
    assert_eq!(msgs, ["hello", "late order", "lost parcel"]);
    assert!(!im.dir.join("cases-without-asserts.jsonl").exists());
    let counts = "2 tests of the config, none with an assert: 3 cases run for their answers";
    assert!(im.stdout.contains(counts), "{}", im.stdout);
    assert!(im.notes.contains(&counts[1..]), "{}", im.notes);
    // What the figures mean is said where the user reads first: the terminal, the notes
    // and the bench file.
    assert!(
        im.stdout
            .contains("its accuracy says only that answers came back"),
        "{}",
        im.stdout
    );
    assert!(im.notes.contains("report.html"), "{}", im.notes);
    let bench = std::fs::read_to_string(im.dir.join("promptgauge.yaml")).unwrap();
    assert!(bench.contains("every finished answer passes"), "{bench}");
    // It runs on the simulator: every prompt on every case, each answer in results.jsonl.
    let (_rt, server) = start_mock(MockConfig::default());
    let run = promptgauge(&im.dir)
        .args([
            "run",
            "--no-store",
            "--quiet",
            "--model",
            "mock-model",
            "--base-url",
        ])
        .arg(server.base_url())
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(server.provider.stats().requests, 6);
    let ran = run_dirs(&im.dir.join("reports")).remove(0);
    let results = std::fs::read_to_string(ran.join("results.jsonl")).unwrap();
    let jobs = jobs_of(&ran);
    assert_eq!(jobs.len(), 6, "{results}");
    assert!(
        jobs.iter()
            .all(|j| j["score"] == 1.0 && !j["output"].as_str().unwrap().is_empty()),
        "{results}"
    );
}

#[test]
fn a_config_with_nothing_to_run_is_refused_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let refused = |config: &str| -> String {
        std::fs::write(d.join("c.yaml"), config).unwrap();
        let o = promptgauge(d)
            .args(["import", "promptfoo", "c.yaml", "--out", "b"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(!d.join("b/promptgauge.yaml").exists());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    // Every test's only assert is left out: the tests are not run for their answers (that
    // would pass what promptfoo grades); the refusal names the asserts.
    let e = refused(
        "prompts: [\"Say {{q}}\"]\ntests:\n  - vars: { q: a }\n    assert: [{ type: moderation }]\n",
    );
    assert!(
        e.contains("gives 1 prompt and no test promptgauge can use")
            && e.contains("`moderation`")
            && e.contains("remove the asserts to import the tests for their answers"),
        "{e}"
    );
    // No prompt it can send: tests without an assert cannot help, and the words say so.
    let e = refused("prompts: [\"file://gone.js\"]\ntests:\n  - vars: { q: a }\n");
    assert!(e.contains("gives no prompt promptgauge can send"), "{e}");
    assert!(!e.contains("measures answers against"), "{e}");
}
