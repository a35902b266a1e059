//! Every gate on every kind of score (docs/guide/ci.md, "Gates"): a matrix of gate × score
//! kind, each run on the in-process simulator, asserting the exit code and each gate's
//! line. Two variants of known accuracy (`good` about 95%, `bad` about 30%) make every
//! gate's outcome known in advance, whatever the scorer. Then the three outcomes (passed,
//! failed, inconclusive), each with its exit code, and what an inconclusive gate says it
//! would take.

use std::path::{Path, PathBuf};

use crate::common::*;
use promptgauge::report::Summary;
use promptgauge::report::compare::Verdict;

/// Cases per bench: enough for 95% against 30% to be decided by every test.
const CASES: usize = 40;

/// One kind of score: its `grade:`, what else the bench needs, and each case's line.
struct Kind {
    name: &'static str,
    grade: &'static str,
    extra: &'static str,
    case: fn(usize) -> String,
    /// Some score is neither 0 nor 1: "accuracy" is the mean score.
    scored: bool,
}

fn word(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Say the word w{i}.\"}}, \"expected\": \"w{i}\"}}"
    )
}

fn meaning(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Name thing {i}.\"}}, \"expected\": \"alpha{i} beta{i} gamma{i}\"}}"
    )
}

fn letter(i: usize) -> String {
    let l = ["A", "B", "C", "D"][i % 4];
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Question {i}: A, B, C or D?\"}}, \"expected\": \"{l}\"}}"
    )
}

fn number(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"What is {i} + {i}?\"}}, \"expected\": \"{}\"}}",
        2 * i
    )
}

fn ticket(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Ticket {i}\"}}, \"expected\": {{\"category\": \"cat{}\", \"priority\": \"p{}\"}}}}",
        i % 3,
        i % 2
    )
}

fn call(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Weather in city {i}?\"}}, \"expected\": {{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"city{i}\"}}}}}}"
    )
}

fn trajectory(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Weather in city {i}, then what to wear?\"}}, \"expected\": \"wear {i}\", \"tool_results\": [{{\"tool\": \"get_weather\", \"args\": {{\"city\": \"city {i}\"}}, \"result\": \"{i} °C\"}}, {{\"tool\": \"search\", \"args\": {{\"q\": \"{i} °C\"}}, \"match\": \"subset\", \"result\": \"wear {i}\"}}]}}"
    )
}

/// A scorer of ours: full marks for the expected word, a quarter for any other answer.
const SCORER: &str = r#"import json, sys
for line in sys.stdin:
    req = json.loads(line)
    right = req["answer"].strip() in req["case"]["expected"]
    print(json.dumps({"id": req["id"], "score": 1.0 if right else 0.25}), flush=True)
"#;

const CALL_TOOLS: &str = "params:
  temperature: 0
  tools:
    - type: function
      function:
        name: get_weather
        parameters: { type: object, properties: { city: { type: string } }, required: [city] }
";

const AGENT_TOOLS: &str = "tools:
  - name: get_weather
    parameters: { type: object, properties: { city: { type: string } } }
  - name: search
    parameters: { type: object, properties: { q: { type: string } } }
";

const KINDS: &[Kind] = &[
    Kind {
        name: "exact",
        grade: "{ kind: exact }",
        extra: "",
        case: word,
        scored: false,
    },
    Kind {
        name: "choice",
        grade: "{ kind: choice }",
        extra: "",
        case: letter,
        scored: false,
    },
    Kind {
        name: "number",
        grade: "{ kind: number }",
        extra: "",
        case: number,
        scored: false,
    },
    Kind {
        name: "regex",
        grade: "{ kind: regex, pattern: \"(w[0-9]+)\" }",
        extra: "",
        case: word,
        scored: false,
    },
    Kind {
        name: "fields",
        grade: "{ kind: fields }",
        extra: "",
        case: ticket,
        scored: true,
    },
    Kind {
        name: "json_schema",
        grade: "{ kind: json_schema, schema: { type: object, required: [category, priority], properties: { category: { enum: [cat0, cat1, cat2] }, priority: { enum: [p0, p1] } } } }",
        extra: "",
        case: ticket,
        scored: false,
    },
    Kind {
        name: "tool_call",
        grade: "{ kind: tool_call }",
        extra: CALL_TOOLS,
        case: call,
        scored: false,
    },
    Kind {
        name: "trajectory",
        grade: "{ kind: all, of: [{ kind: exact }, { kind: tool_sequence, tools: [get_weather, search] }] }",
        extra: AGENT_TOOLS,
        case: trajectory,
        scored: false,
    },
    Kind {
        name: "judge",
        grade: "{ kind: judge }",
        extra: "",
        case: word,
        scored: false,
    },
    Kind {
        name: "command",
        grade: "{ kind: command, run: [python3, score.py], workers: 2 }",
        extra: "",
        case: word,
        scored: true,
    },
    Kind {
        name: "embedding",
        grade: "{ kind: embedding, threshold: 0.8 }",
        extra: "",
        case: meaning,
        scored: false,
    },
    Kind {
        name: "all",
        grade: "{ kind: all, of: [{ kind: exact }, { kind: contains }] }",
        extra: "",
        case: word,
        scored: false,
    },
    Kind {
        name: "any",
        grade: "{ kind: any, of: [{ kind: exact }, { kind: regex, pattern: \"^(w[0-9]+)$\" }] }",
        extra: "",
        case: word,
        scored: false,
    },
];

/// The bench of `kind` in a fresh folder: `good` (about 95% right) first, then `bad`
/// (about 30%); `case_extra` is added to every case (a group), `bench_extra` to the bench.
fn bench(kind: &Kind, case_extra: fn(usize) -> String, bench_extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: String = (1..=CASES)
        .map(|i| {
            let line = (kind.case)(i);
            format!("{}{}}}\n", line.strip_suffix('}').unwrap(), case_extra(i))
        })
        .collect();
    std::fs::write(d.join("cases.jsonl"), cases).unwrap();
    for (name, accuracy) in [("good", 95), ("bad", 30)] {
        std::fs::write(
            d.join(format!("{name}.yaml")),
            format!("name: {name}\nmessages:\n  - {{ role: system, content: \"simulated accuracy {accuracy}%\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n"),
        )
        .unwrap();
    }
    std::fs::write(d.join("score.py"), SCORER).unwrap();
    std::fs::write(
        d.join("bench.yaml"),
        format!(
            // One name for all: the simulator reads a key holding `-judge-` as a judge's call.
            "name: gates\ncases: cases.jsonl\nvariants: [good.yaml, bad.yaml]\ngrade: {}\nprice: {{ input_per_mtok: 1.0, output_per_mtok: 2.0 }}\n{}{bench_extra}",
            kind.grade, kind.extra
        ),
    )
    .unwrap();
    dir
}

fn no_extra(_: usize) -> String {
    String::new()
}

fn grouped(i: usize) -> String {
    format!(", \"group\": \"g{}\"", i / 4)
}

struct Ran {
    code: Option<i32>,
    said: String,
    dir: PathBuf,
}

/// `run bench.yaml` on the in-process simulator with `flags`, its output under `out`.
fn run(d: &Path, out: &str, flags: &[&str]) -> Ran {
    let o = promptgauge(d)
        .args([
            "run",
            "bench.yaml",
            "--base-url",
            "mock",
            "--no-store",
            "--out",
            out,
        ])
        .args(flags)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    let dir = run_dirs(&d.join(out))
        .pop()
        .unwrap_or_else(|| panic!("no run folder: {said}"));
    Ran {
        code: o.status.code(),
        said,
        dir,
    }
}

fn summary(dir: &Path) -> Summary {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The gate whose name starts with `gate` and whose line names `variant`: its outcome and
/// its line.
fn gate(s: &Summary, gate: &str, variant: &str) -> (bool, String) {
    let g = s
        .gates
        .iter()
        .find(|g| g.gate.starts_with(gate) && g.reason.contains(variant))
        .unwrap_or_else(|| panic!("no gate {gate} on {variant}: {:#?}", s.gates));
    (g.passed, format!("{}: {}", g.gate, g.reason))
}

/// Every gate on one kind of score, on a bench made with `case_extra` and `bench_extra`.
fn every_gate_on(kind: &Kind, case_extra: fn(usize) -> String, bench_extra: &str, label: &str) {
    let b = bench(kind, case_extra, bench_extra);
    let d = b.path();
    let ctx = |what: &str, r: &Ran| format!("{label}: {what}: {}", r.said);
    // The fixed-sample gates, all at once.
    let a = run(
        d,
        "a",
        &[
            "--min-accuracy",
            "good=0.5",
            "--min-accuracy",
            "bad=0.9",
            "--fail-if-worse",
            "--max-drop",
            "5",
            "--max-cost",
            "100",
            "--max-p90-latency",
            "60s",
        ],
    );
    assert_eq!(a.code, Some(1), "{}", ctx("fixed gates", &a));
    let s = summary(&a.dir);
    let scored = s.schema == "promptgauge.summary/2" || s.scored;
    assert_eq!(scored, kind.scored, "{}", ctx("scored", &a));
    let (passed, line) = gate(&s, "min-accuracy good=", "good");
    assert!(passed, "{label}: {line}");
    let named = if kind.scored {
        "good: mean score "
    } else {
        "good: "
    };
    assert!(line.contains(named), "{label}: {line}");
    let (passed, line) = gate(&s, "min-accuracy bad=", "bad");
    assert!(
        !passed && line.contains("(certain: the whole interval is below it)"),
        "{label}: {line}"
    );
    let (passed, line) = gate(&s, "fail-if-worse", "bad");
    assert!(
        !passed && line.contains("bad is worse than good"),
        "{label}: {line}"
    );
    let (passed, line) = gate(&s, "max-drop", "bad");
    assert!(
        !passed && line.contains("bad is more than 5.0 points below good"),
        "{label}: {line}"
    );
    let (passed, line) = gate(&s, "max-cost", "spent");
    assert!(passed, "{label}: {line}");
    let (passed, line) = gate(&s, "max-p90-latency", "good");
    assert!(passed, "{label}: {line}");
    assert!(
        a.said
            .contains("gate failed: fail-if-worse: bad is worse than good"),
        "{}",
        ctx("said", &a)
    );

    // Against the earlier run: the same answers again, nothing dropped.
    let base = a.dir.to_str().unwrap().to_string();
    // With groups and no difference at all, the grouped interval stays wide (±31.5 points
    // on these 11 groups): the limit allows for it.
    let limit = if label.ends_with("groups") {
        "40"
    } else {
        "20"
    };
    let again = run(
        d,
        "b",
        &[
            "--variants",
            "good",
            "--baseline",
            &base,
            "--fail-if-worse",
            "--max-drop",
            limit,
        ],
    );
    assert_eq!(again.code, Some(0), "{}", ctx("--baseline", &again));
    let s = summary(&again.dir);
    let (passed, line) = gate(&s, "fail-if-worse --baseline", "");
    assert!(passed, "{label}: {line}");
    let (passed, line) = gate(&s, "max-drop --baseline", "good in B");
    assert!(passed && line.contains("is at most"), "{label}: {line}");

    // Sequentially: `bad` is shown worse on the way, and the drop gate fails.
    let seq = run(d, "c", &["--until-decided", "--max-drop", "5"]);
    assert_eq!(seq.code, Some(1), "{}", ctx("--until-decided", &seq));
    let (passed, line) = gate(&summary(&seq.dir), "max-drop", "bad");
    assert!(
        !passed && line.contains("looks worse than the baseline"),
        "{label}: {line}"
    );

    // A search: the baseline `good` is the best. On 11 groups the search cannot tell
    // (its bounds are anytime-valid): inconclusive, exit 5.
    let best = run(d, "e", &["--best", "--fail-if-not-best"]);
    let (passed, line) = gate(&summary(&best.dir), "fail-if-not-best", "good");
    if label.ends_with("groups") {
        assert_eq!(best.code, Some(5), "{}", ctx("--best", &best));
        assert!(
            line.contains(
                "the groups ran out after 11 with the baseline good among the arms left (good, bad)"
            ),
            "{label}: {line}"
        );
    } else {
        assert_eq!(best.code, Some(0), "{}", ctx("--best", &best));
        assert!(passed, "{label}: {line}");
    }
}

/// ci.md's recipe on a bench that keeps a weaker variant on purpose: against the earlier
/// run, an unchanged pull request passes (each variant is held to itself there, not to the
/// baseline variant); a variant that got worse fails it.
#[test]
fn against_an_earlier_run_each_variant_is_held_to_itself_not_to_the_baseline_variant() {
    let b = bench(&KINDS[0], no_extra, "");
    let d = b.path();
    let main = run(d, "main", &[]);
    let base = main.dir.to_str().unwrap().to_string();
    let pr = run(
        d,
        "pr",
        &["--baseline", &base, "--fail-if-worse", "--max-drop", "20"],
    );
    assert_eq!(pr.code, Some(0), "unchanged: {}", pr.said);
    let s = summary(&pr.dir);
    assert!(
        s.comparisons
            .iter()
            .any(|c| c.variant == "bad" && c.verdict == Verdict::Worse),
        "the run still says bad is worse than good: {:#?}",
        s.comparisons
    );
    let names: Vec<&str> = s.gates.iter().map(|g| g.gate.as_str()).collect();
    assert_eq!(
        names,
        ["fail-if-worse --baseline", "max-drop --baseline"],
        "{:#?}",
        s.gates
    );
    // `check` sizes such a gate as what it is: no within-run difference sizes it.
    let (code, text) = said(
        d,
        &[
            "check",
            "bench.yaml",
            "--baseline",
            &base,
            "--max-drop",
            "20",
        ],
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("max-drop 20.0: against the --baseline run each variant is held to itself"),
        "{text}"
    );
    assert!(!text.contains("at the last run's difference"), "{text}");
    // The baseline variant broken: it is worse than itself on main.
    let prompt = d.join("good.yaml");
    let text = std::fs::read_to_string(&prompt).unwrap();
    std::fs::write(&prompt, text.replace("accuracy 95%", "accuracy 30%")).unwrap();
    let broken = run(d, "broken", &["--baseline", &base, "--fail-if-worse"]);
    assert_eq!(broken.code, Some(1), "broken: {}", broken.said);
    assert!(
        broken
            .said
            .contains("gate failed: fail-if-worse --baseline"),
        "{}",
        broken.said
    );
}

#[test]
fn every_gate_works_on_every_kind_of_score() {
    for kind in KINDS {
        every_gate_on(kind, no_extra, "", kind.name);
    }
}

#[test]
fn every_gate_works_with_repeats_and_with_groups() {
    for kind in KINDS
        .iter()
        .filter(|k| ["exact", "fields"].contains(&k.name))
    {
        every_gate_on(
            kind,
            no_extra,
            "repeats: 3\n",
            &format!("{} with repeats", kind.name),
        );
        every_gate_on(kind, grouped, "", &format!("{} with groups", kind.name));
    }
}

#[test]
fn a_judge_corrected_by_people_is_gated_on_the_score_people_would_give() {
    let kind = KINDS.iter().find(|k| k.name == "judge").unwrap();
    let b = bench(kind, no_extra, "");
    let d = b.path();
    let a = run(d, "a", &["--quiet"]);
    assert_eq!(a.code, Some(0), "{}", a.said);
    // People label half the cases of each variant, as the judge scored them.
    let labels: String = journal(&a.dir)
        .iter()
        .filter(|r| r["case_id"].as_str().is_some_and(|c| c < "c21"))
        .map(|r| {
            format!(
                "{{\"case\": {}, \"variant\": {}, \"repeat\": {}, \"score\": {}}}\n",
                r["case_id"], r["variant"], r["repeat"], r["score"]
            )
        })
        .collect();
    std::fs::write(d.join("people.jsonl"), labels).unwrap();
    let dir = a.dir.to_str().unwrap().to_string();
    let o = promptgauge(d)
        .args(["label", &dir, "--from", "people.jsonl"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = promptgauge(d)
        .args(["run", "--resume", &dir, "--no-store"])
        .args([
            "--min-accuracy",
            "good=0.5",
            "--fail-if-worse",
            "--max-drop",
            "5",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{said}");
    let s = summary(&a.dir);
    let (passed, line) = gate(&s, "min-accuracy", "good");
    assert!(
        passed && line.contains("good: score as people would give it "),
        "{line}"
    );
    let (passed, line) = gate(&s, "fail-if-worse", "bad");
    assert!(!passed && line.contains("bad is worse than good"), "{line}");
    let (passed, _) = gate(&s, "max-drop", "bad");
    assert!(!passed);
}

#[test]
fn compare_and_its_page_show_mean_scores_of_partial_score_runs() {
    let kind = KINDS.iter().find(|k| k.name == "fields").unwrap();
    let b = bench(kind, no_extra, "");
    let d = b.path();
    let a = run(d, "a", &["--quiet"]);
    let again = run(d, "b", &["--quiet"]);
    let o = promptgauge(d)
        .args([
            "compare",
            a.dir.to_str().unwrap(),
            again.dir.to_str().unwrap(),
        ])
        .args(["--out", "cmp"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        said.contains("score A") && said.contains("score B"),
        "{said}"
    );
    let good = said
        .lines()
        .find(|l| l.contains("good"))
        .expect("a row for good");
    assert!(!good.contains("– –") && good.contains('%'), "{said}");
    let page = std::fs::read_to_string(d.join("cmp/compare.html")).unwrap();
    assert!(page.contains("<h2>Mean score ("), "no mean-score chart");
    // The chart draws each run's interval.
    assert!(
        page.matches("<g class=\"interval\"").count() >= 2,
        "no interval drawn"
    );
}

/// Two variants of the same simulated accuracy over `cases` cases: nothing to tell apart.
fn twins(cases: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (1..=cases).map(|i| format!("{}\n", word(i))).collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    for name in ["plain", "tidy"] {
        std::fs::write(
            d.join(format!("{name}.yaml")),
            format!("name: {name}\nmessages:\n  - {{ role: system, content: \"simulated accuracy 85% ({name})\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n"),
        )
        .unwrap();
    }
    std::fs::write(
        d.join("bench.yaml"),
        "name: twins\ncases: cases.jsonl\nvariants: [tidy.yaml, plain.yaml]\ngrade: { kind: exact }\n",
    )
    .unwrap();
    dir
}

/// The number after `about ` in a gate's line.
fn about(line: &str) -> u64 {
    let (_, rest) = line
        .split_once("about ")
        .unwrap_or_else(|| panic!("{line}"));
    rest.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_gate_the_data_cannot_decide_is_inconclusive_with_its_own_exit_code_and_what_it_would_take() {
    let b = twins(50);
    let d = b.path();
    // 50 cases cannot show a drop of no more than 3 points, nor that one exists.
    let r = run(d, "a", &["--max-drop", "3", "--markdown", "summary.md"]);
    assert_eq!(r.code, Some(5), "{}", r.said);
    let s = summary(&r.dir);
    let g = &s.gates[0];
    assert_eq!(g.outcome, promptgauge::report::GateOutcome::Inconclusive);
    assert!(!g.passed);
    let line = r
        .said
        .lines()
        .find(|l| l.starts_with("gate inconclusive: max-drop: plain may be up to "))
        .unwrap_or_else(|| panic!("{}", r.said));
    assert!(
        line.contains("the data allow a drop of up to ")
            && line.contains(" on 50 cases; about ")
            && line.contains(" cases would show a drop of no more than 3.0 at the difference and the disagreement seen here ("),
        "{line}"
    );
    // What it takes, sized as a paired difference of 0/1 answers: n = (z + z_power)² ×
    // (disagreement − difference²) / (difference + limit)².
    let c = &s.comparisons[0];
    let t = c.table.as_ref().unwrap();
    let n = 50.0;
    let (disagree, diff) = (
        (t.only_variant + t.only_reference) as f64 / n,
        c.difference.unwrap(),
    );
    let normal = (1.96f64 + 0.8416).powi(2) * (disagree - diff * diff) / (diff + 0.03).powi(2);
    let needed = about(line);
    assert_eq!(g.cases_needed, Some(needed));
    assert_eq!(needed, normal.ceil() as u64, "{line}");
    let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(md.contains("⚠️ **inconclusive** `max-drop`"), "{md}");
    // A team may choose to let it pass: exit 0, the line still says it could not tell.
    let r = run(d, "b", &["--max-drop", "3", "--on-inconclusive", "pass"]);
    assert_eq!(r.code, Some(0), "{}", r.said);
    assert!(
        r.said
            .contains("(--on-inconclusive pass: it does not fail the run)"),
        "{}",
        r.said
    );
    // Every list of exit codes has it, `--help`'s too.
    let (_, help) = said(d, &["--help"]);
    assert!(help.contains("5 a CI gate inconclusive"), "{help}");
    for doc in ["docs/guide/ci.md", "docs/guide/resume.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        assert!(text.contains("| 5 |") || text.contains("| `5` |"), "{doc}");
    }
    // A failed gate beside it wins: exit 1.
    let r = run(d, "c", &["--max-drop", "3", "--min-accuracy", "0.99"]);
    assert_eq!(r.code, Some(1), "{}", r.said);
}

#[test]
fn min_accuracy_below_with_an_interval_across_it_is_inconclusive() {
    let b = twins(40);
    let r = run(
        b.path(),
        "a",
        &["--variants", "tidy", "--min-accuracy", "0.9"],
    );
    let s = summary(&r.dir);
    let acc = s.variants[0].accuracy.unwrap();
    assert!(
        acc < 0.9 && s.variants[0].ci_high.unwrap() > 0.9,
        "{}",
        r.said
    );
    assert_eq!(r.code, Some(5), "{}", r.said);
    assert!(
        r.said
            .contains("but the interval straddles it (uncertain) on 40 cases: about "),
        "{}",
        r.said
    );
}

/// `promptgauge ARGS` in `d`: what it said on both streams, and its exit code.
fn said(d: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = promptgauge(d).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code(), text)
}

#[test]
fn check_and_plan_size_each_gate_before_anything_is_sent_from_the_last_run() {
    let b = twins(50);
    let d = b.path();
    let gates = ["--max-drop", "3", "--min-accuracy", "0.8"];
    // No run yet: sized at no difference and the most disagreement.
    let (code, text) = said(d, &[&["check", "bench.yaml"][..], &gates].concat());
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("gate max-drop 3.0: with no earlier run of the bench under reports/, at no difference and half the cases disagreeing (the most), about ")
            && text.contains("the bench has 50: expect inconclusive (exit 5)"),
        "{text}"
    );
    assert!(
        text.contains("gate min-accuracy 80.0%: no earlier run"),
        "{text}"
    );
    // A run (into reports/, where check and plan look), inconclusive at 50 cases.
    let r = run(d, "reports", &gates);
    assert_eq!(r.code, Some(5), "{}", r.said);
    let s = summary(&r.dir);
    let needed = s
        .gates
        .iter()
        .find(|g| g.gate == "max-drop")
        .and_then(|g| g.cases_needed)
        .unwrap();
    // check and plan now size it from that run: the cases the gate itself said.
    for cmd in ["check", "plan"] {
        let (code, text) = said(d, &[&[cmd, "bench.yaml"][..], &gates].concat());
        assert_eq!(code, Some(0), "{text}");
        let line = text
            .lines()
            .find(|l| l.contains("gate max-drop 3.0 on plain: at the last run's difference"))
            .unwrap_or_else(|| panic!("{cmd}: {text}"));
        assert!(
            line.contains(&format!("about {needed} cases would show a drop of no more than 3.0; the bench has 50: expect inconclusive (exit 5)")),
            "{cmd}: {line}"
        );
        assert!(
            text.contains("gate min-accuracy 80.0% on tidy: the last run's "),
            "{cmd}: {text}"
        );
    }
}

#[test]
fn a_grid_s_headline_places_every_cell_on_each_axis() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    copy_dir(&repo().join("prompts"), &d.join("prompts"));
    copy_dir(&repo().join("cases"), &d.join("cases"));
    // The small model is worse with either prompt; step-by-step is better at either
    // endpoint.
    std::fs::write(
        d.join("bench.yaml"),
        "name: grid
cases: cases/routing.jsonl
variants: [prompts/routing/plain.yaml, prompts/routing/step-by-step.yaml]
grade: { kind: choice }
endpoints:
  - { name: hosted, base_url: mock, model: large-model }
  - { name: local, base_url: mock, model: small-model }
",
    )
    .unwrap();
    let (code, text) = said(d, &["run", "bench.yaml", "--no-store", "--quiet"]);
    assert_eq!(code, Some(0), "{text}");
    let run = run_dirs(&d.join("reports")).pop().unwrap();
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    let start = html.find("<p id=\"headline\">").expect("a headline");
    let headline = &html[start..start + html[start..].find("</p>").unwrap()];
    assert!(
        headline.contains("Which prompt: better than the baseline variant at its endpoint: hosted/step-by-step (against hosted/plain), local/step-by-step (against local/plain).")
            && headline.contains("Which model: no cell is distinguishably better than the baseline endpoint with its variant; worse than the baseline endpoint with its variant: local/plain (against hosted/plain), local/step-by-step (against hosted/step-by-step)."),
        "{headline}"
    );
}

/// A ticket with a list: `category` (one field, right or wrong) and `tags[]` (two items,
/// so a part scored 0, ½ or 1).
fn tagged(i: usize) -> String {
    format!(
        "{{\"id\": \"c{i:02}\", \"vars\": {{\"q\": \"Ticket {i}\"}}, \"expected\": {{\"category\": \"cat{}\", \"tags\": [\"t{i}\", \"u{i}\"]}}}}",
        i % 3
    )
}

const TAGGED: Kind = Kind {
    name: "fields with a list",
    grade: "{ kind: fields }",
    extra: "",
    case: tagged,
    scored: true,
};

/// A part's figures for the arm `name`.
fn arm<'a>(
    part: &'a promptgauge::report::parts::PartFigures,
    name: &str,
) -> &'a promptgauge::report::parts::PartVariant {
    part.variants
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no arm {name}: {part:#?}"))
}

/// `run --resume DIR` with `flags`: the finished run's gates again, nothing sent.
fn regated(d: &Path, dir: &Path, flags: &[&str]) -> (Option<i32>, String) {
    let o = promptgauge(d)
        .args(["run", "--resume", dir.to_str().unwrap(), "--no-store"])
        .args(flags)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    (o.status.code(), said)
}

/// The line of `said` that starts with `start`.
fn line_of<'a>(said: &'a str, start: &str) -> &'a str {
    said.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line `{start}…` in:\n{said}"))
}

#[test]
fn a_gate_on_a_part_holds_that_part_passed_failed_or_inconclusive() {
    let b = bench(&TAGGED, no_extra, "");
    let d = b.path();
    // Every variant's category: each above 5%.
    let a = run(d, "a", &["--min-accuracy", "@category=0.05"]);
    assert_eq!(a.code, Some(0), "{}", a.said);
    let s = summary(&a.dir);
    let names: Vec<&str> = s.parts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["category", "tags[]"], "{}", a.said);
    let category = &s.parts[0];
    assert!(category.binary);
    let gates: Vec<&str> = s.gates.iter().map(|g| g.gate.as_str()).collect();
    assert_eq!(
        gates, ["min-accuracy 5.0% on category"; 2],
        "{:#?}",
        s.gates
    );
    let (passed, line) = gate(&s, "min-accuracy 5.0% on category", "bad");
    assert!(passed && line.contains(": bad: "), "{line}");
    // The figure is the part's, not the whole score's.
    let bad = arm(category, "bad");
    let (m, lo, hi) = (bad.mean.unwrap(), bad.ci_low.unwrap(), bad.ci_high.unwrap());
    let whole = s.variants[1].mean_score.unwrap();
    assert!((m - whole).abs() > 1e-9, "category {m}, whole {whole}");
    assert!(
        line.contains(&format!(
            "bad: {:.1}% [{:.1}, {:.1}]",
            m * 100.0,
            lo * 100.0,
            hi * 100.0
        )),
        "{line}"
    );

    // One variant's part, certainly below: failed, exit 1.
    assert!(hi < 0.95, "bad's category reaches {hi}");
    let (code, said) = regated(d, &a.dir, &["--min-accuracy", "bad@category=0.95"]);
    assert_eq!(code, Some(1), "{said}");
    let line = line_of(
        &said,
        "gate failed: min-accuracy bad=95.0% on category: bad: ",
    );
    assert!(
        line.ends_with("is below 95.0% (certain: the whole interval is below it)"),
        "{line}"
    );
    assert!(
        !said
            .lines()
            .any(|l| l.starts_with("gate") && l.contains("good")),
        "only bad is held: {said}"
    );

    // Below, with the interval across: inconclusive, exit 5, with the cases that decide.
    let t = format!("{:.1}", (m + hi) / 2.0 * 100.0);
    let (code, said) = regated(
        d,
        &a.dir,
        &[
            "--min-accuracy",
            &format!("bad@category={t}%"),
            "--markdown",
            "summary.md",
        ],
    );
    assert_eq!(code, Some(5), "{said}");
    let line = line_of(
        &said,
        &format!("gate inconclusive: min-accuracy bad={t}% on category: bad: "),
    );
    assert!(
        line.contains("but the interval straddles it (uncertain) on 40 cases: about "),
        "{line}"
    );
    let md = std::fs::read_to_string(d.join("summary.md")).unwrap();
    assert!(
        md.contains(&format!(
            "⚠️ **inconclusive** `min-accuracy bad={t}% on category`"
        )),
        "{md}"
    );

    // A part scored 0, ½ or 1: its mean score, said so.
    let tags = &s.parts[1];
    assert!(!tags.binary);
    let (code, said) = regated(d, &a.dir, &["--min-accuracy", "good@tags[]=0.5"]);
    assert_eq!(code, Some(0), "{said}");
    let good = arm(tags, "good").mean.unwrap();
    let (passed, line) = gate(
        &summary(&a.dir),
        "min-accuracy good=50.0% on tags[]",
        "good",
    );
    assert!(
        passed && line.contains(&format!("good: mean score {:.1}% [", good * 100.0)),
        "{line}"
    );
}

/// The simulator in this process, and a tagged bench whose variants are `variants` (each
/// `NAME` at the simulated accuracy given).
fn tagged_with(variants: &[(&str, u32)]) -> tempfile::TempDir {
    let b = bench(&TAGGED, no_extra, "");
    let d = b.path();
    let mut files = Vec::new();
    for (i, (name, accuracy)) in variants.iter().enumerate() {
        let file = format!("v{i}.yaml");
        std::fs::write(
            d.join(&file),
            format!("name: \"{name}\"\nmessages:\n  - {{ role: system, content: \"simulated accuracy {accuracy}%\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n"),
        )
        .unwrap();
        files.push(file);
    }
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap();
    let text = text.replace("[good.yaml, bad.yaml]", &format!("[{}]", files.join(", ")));
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    b
}

#[test]
fn a_gate_naming_a_part_the_bench_has_not_is_refused_before_anything_is_sent() {
    let (_rt, server) = start_mock(promptgauge::mock::MockConfig::default());
    let url = server.base_url();
    let b = tagged_with(&[("good", 95), ("bad", 30), ("bad@category", 30)]);
    let d = b.path();
    let refused = |flags: &[&str]| {
        let o = promptgauge(d)
            .args(["run", "bench.yaml", "--base-url", &url, "--model", "m"])
            .args(flags)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert_eq!(
            server.provider.stats().requests,
            0,
            "{flags:?}: a request was sent"
        );
        assert!(
            !d.join("reports").exists(),
            "{flags:?}: a run folder was made"
        );
        err
    };
    // A part the score does not have: the parts it has.
    let err = refused(&["--min-accuracy", "@categry=0.9"]);
    assert!(
        err.contains(
            "--min-accuracy names the part `categry`, which this bench's score does not have"
        ) && err.contains("name one of the bench's parts: category, tags[]"),
        "{err}"
    );
    // `bad@category` is a variant, and `category` a part of `bad`: which is meant?
    let err = refused(&["--min-accuracy", "bad@category=0.9"]);
    assert!(
        err.contains("--min-accuracy `bad@category` reads as the variant `bad@category` and as the part `category` of `bad`")
            && err.contains("rename the variant"),
        "{err}"
    );
    // pass^k is the whole score's.
    let err = refused(&["--repeats", "2", "--min-pass-all", "good@category=0.9"]);
    assert!(
        err.contains("--min-pass-all names `good@category`, which is not a variant of this run (a part has no pass^k"),
        "{err}"
    );
    // check refuses what run would.
    let (code, text) = said(
        d,
        &["check", "bench.yaml", "--min-accuracy", "good@categry=0.9"],
    );
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("names the part `categry`"), "{text}");
    let (_, help) = said(d, &["run", "--help"]);
    assert!(
        help.contains("--min-accuracy <[VARIANT][@PART]=P>") && help.contains("VARIANT@PART=P"),
        "{help}"
    );
}

#[test]
fn a_variant_whose_name_holds_an_at_sign_is_gated_as_a_variant_when_no_part_is_named_so() {
    let b = tagged_with(&[("good", 95), ("bad@category", 30)]);
    let d = b.path();
    // No variant `bad`: `bad@category` is the variant, held on its whole score.
    let a = run(d, "a", &["--min-accuracy", "bad@category=0.99"]);
    assert_eq!(a.code, Some(1), "{}", a.said);
    let line = line_of(
        &a.said,
        "gate failed: min-accuracy bad@category=99.0%: bad@category: mean score ",
    );
    assert!(line.contains("is below 99.0%"), "{line}");
    // And its part, after the last `@`.
    let (code, said) = regated(d, &a.dir, &["--min-accuracy", "bad@category@category=0.01"]);
    assert_eq!(code, Some(0), "{said}");
    let s = summary(&a.dir);
    let (passed, line) = gate(
        &s,
        "min-accuracy bad@category=1.0% on category",
        "bad@category",
    );
    assert!(passed && line.contains(": bad@category: "), "{line}");
}

#[test]
fn check_and_plan_size_a_gate_on_a_part_from_the_last_run() {
    let b = bench(&TAGGED, no_extra, "");
    let d = b.path();
    let gates = ["--min-accuracy", "@category=0.9"];
    let (code, text) = said(d, &[&["check", "bench.yaml"][..], &gates].concat());
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("gate min-accuracy 90.0% on category: no earlier run"),
        "{text}"
    );
    let r = run(d, "reports", &gates);
    let s = summary(&r.dir);
    let bad = arm(&s.parts[0], "bad").mean.unwrap();
    for cmd in ["check", "plan"] {
        let (code, text) = said(d, &[&[cmd, "bench.yaml"][..], &gates].concat());
        assert_eq!(code, Some(0), "{cmd}: {text}");
        assert!(
            text.contains(&format!(
                "gate min-accuracy 90.0% on category of bad: the last run's {:.1}% (",
                bad * 100.0
            )) && text.contains("gate min-accuracy 90.0% on category of good: the last run's "),
            "{cmd}: {text}"
        );
    }
}
