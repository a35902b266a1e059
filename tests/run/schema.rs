//! The JSON Schemas editors check a bench's files with: docs/schema/ holds what the types
//! generate, `schema` prints the same, every bench in the tree (its cases and variants too)
//! and every bench `init` writes is valid under them, and what the loader refuses they
//! refuse too.

use std::path::{Path, PathBuf};

use promptgauge::suite::schema::SchemaOf;
use serde_json::{Value, json};

use crate::common::{promptgauge, repo};

fn validator(which: SchemaOf) -> jsonschema::Validator {
    jsonschema::validator_for(&which.schema()).expect("the schema compiles")
}

/// Why `value` is not valid under `which`'s schema (empty: it is).
fn violations(which: SchemaOf, value: &Value) -> Vec<String> {
    validator(which)
        .iter_errors(value)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Checks a bench file, each case of its case files and each of its YAML variants; returns
/// how many files it checked.
fn check_bench(bench: &Path) -> usize {
    let value = read_yaml(bench);
    let found = violations(SchemaOf::Bench, &value);
    assert!(found.is_empty(), "{}: {found:?}", bench.display());
    let dir = bench.parent().unwrap();
    let cases: Vec<&str> = match &value["cases"] {
        Value::String(one) => vec![one],
        many => many
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect(),
    };
    let variants = value["variants"].as_array().unwrap();
    let mut checked = 1;
    for path in cases.iter().map(|c| dir.join(c)) {
        let rows: Vec<Value> = match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl") => std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            Some("yaml" | "yml") => vec![read_yaml(&path)],
            _ => continue,
        };
        for row in rows {
            let found = violations(SchemaOf::Case, &row);
            assert!(found.is_empty(), "{}: {found:?} in {row}", path.display());
        }
        checked += 1;
    }
    for path in variants
        .iter()
        .filter_map(Value::as_str)
        .map(|v| dir.join(v))
    {
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let found = violations(SchemaOf::Variant, &read_yaml(&path));
            assert!(found.is_empty(), "{}: {found:?}", path.display());
            checked += 1;
        }
    }
    checked
}

/// The YAML files under `dir` that are benches (a mapping with `variants:`).
fn benches_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            benches_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml")
            && read_yaml(&path).get("variants").is_some()
        {
            out.push(path);
        }
    }
}

#[test]
fn docs_schema_holds_what_the_types_generate() {
    for which in SchemaOf::ALL {
        let path = repo().join("docs/schema").join(which.file_name());
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == which.text(),
            "{} is not what the types generate: run `cargo run -- schema --out docs/schema` and commit it",
            path.display()
        );
        assert!(
            jsonschema::meta::is_valid(&which.schema()),
            "{}",
            which.file_name()
        );
    }
}

#[test]
fn schema_prints_each_and_config_is_the_bench() {
    let printed = |which: &str| {
        let out = promptgauge(&repo())
            .args(["schema", which])
            .assert()
            .success()
            .get_output()
            .clone();
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(printed("bench"), SchemaOf::Bench.text());
    assert_eq!(printed("config"), SchemaOf::Bench.text());
    assert_eq!(printed("case"), SchemaOf::Case.text());
    assert_eq!(printed("variant"), SchemaOf::Variant.text());
    assert_eq!(printed("endpoints"), SchemaOf::Endpoints.text());
    promptgauge(&repo()).arg("schema").assert().code(2);
    let dir = tempfile::tempdir().unwrap();
    promptgauge(&repo())
        .args(["schema", "--out"])
        .arg(dir.path())
        .assert()
        .success();
    let written = std::fs::read_to_string(dir.path().join("case.schema.json")).unwrap();
    assert_eq!(written, SchemaOf::Case.text());
}

#[test]
fn every_bench_in_the_tree_with_its_cases_and_variants_is_valid() {
    let mut benches = vec![repo().join("promptgauge.yaml")];
    benches_under(&repo().join("examples"), &mut benches);
    assert!(benches.len() >= 11, "the examples were found: {benches:?}");
    let checked: usize = benches.iter().map(|b| check_bench(b)).sum();
    assert!(checked >= 40, "{checked} files checked");
}

#[test]
fn every_bench_init_writes_is_valid_and_names_its_schema_first() {
    for task in ["choice", "number", "json", "free", "vision", "agent"] {
        let dir = tempfile::tempdir().unwrap();
        promptgauge(dir.path())
            .args(["init", "b", "--task", task])
            .assert()
            .success();
        let d = dir.path().join("b");
        check_bench(&d.join("promptgauge.yaml"));
        let mut yaml = vec![d.join("promptgauge.yaml")];
        for p in std::fs::read_dir(d.join("prompts")).unwrap() {
            yaml.push(p.unwrap().path());
        }
        for path in yaml {
            let text = std::fs::read_to_string(&path).unwrap();
            let first = text.lines().next().unwrap();
            let url = first
                .strip_prefix("# yaml-language-server: $schema=")
                .unwrap_or_else(|| panic!("{task}: {} starts {first:?}", path.display()));
            let which = if path.ends_with("promptgauge.yaml") {
                SchemaOf::Bench
            } else {
                SchemaOf::Variant
            };
            assert_eq!(url, which.url(), "{}", path.display());
            let file = url.rsplit('/').next().unwrap();
            assert!(repo().join("docs/schema").join(file).is_file(), "{url}");
        }
    }
}

#[test]
fn what_the_loader_refuses_the_schemas_refuse() {
    let bench = json!({"name": "b", "cases": "c.jsonl", "variants": ["p.txt"]});
    assert!(violations(SchemaOf::Bench, &bench).is_empty());
    let with = |key: &str, value: Value| {
        let mut b = bench.clone();
        b[key] = value;
        b
    };
    for bad in [
        with("varaints", json!(["p.txt"])),
        with("grade", json!({"kind": "exakt"})),
        with("grade", json!({"kind": "number", "tolerence": 1})),
        with("limits", json!({"concurrency": 0})),
        with("limits", json!({"idle_timeout": true})),
        with("limits", json!({"max_response_bytes": "4 lightyears"})),
        with("endpoint", json!({"protocol": "openai-chit"})),
        with("endpoints", json!([{"name": "has space"}])),
        with("confidence", json!(1.0)),
        with("variants", json!([])),
        with("name", json!("")),
        with("epsilon", json!(2)),
        with("price", json!({"input_per_mtok": -1, "output_per_mtok": 1})),
        with("grade", json!({"kind": "judge", "votes": 0})),
        // Inside a named part as outside it: an unknown key, a bad name, a bad criterion.
        with(
            "grade",
            json!({"kind": "all", "of": [{"kind": "number", "name": "total", "tolerence": 1}]}),
        ),
        with(
            "grade",
            json!({"kind": "all", "of": [{"kind": "exact", "name": "a=b"}]}),
        ),
        with(
            "grade",
            json!({"kind": "all", "of": [{"kind": "exact", "name": " lead"}]}),
        ),
        with(
            "grade",
            json!({"kind": "judge", "criteria": [{"name": "tone", "rubrik": "Warm."}]}),
        ),
        with("grade", json!({"kind": "number", "tolerance": -1})),
        with("sequential", json!({"detect": -5})),
        with("sequential", json!({"power": 2})),
        {
            let mut b = with("decide", json!("best"));
            b["epsilon"] = json!(60);
            b
        },
    ] {
        assert!(
            !violations(SchemaOf::Bench, &bad).is_empty(),
            "accepted: {bad}"
        );
    }
    // A part may carry a name, spaces inside and all; a judge its criteria.
    let named = with(
        "grade",
        json!({"kind": "mean", "weights": [2, 1], "of": [
            {"kind": "fields", "name": "the fields", "required": ["id"]},
            {"kind": "judge", "name": "tone (judge)", "criteria": [{"name": "warm", "rubric": "Is warm."}]}
        ]}),
    );
    assert!(
        violations(SchemaOf::Bench, &named).is_empty(),
        "{:?}",
        violations(SchemaOf::Bench, &named)
    );
    // `epsilon:` goes with `decide: best`, from 0 up to 50.
    let mut searching = with("decide", json!("best"));
    searching["epsilon"] = json!(5);
    assert!(violations(SchemaOf::Bench, &searching).is_empty());
    let case = json!({"id": "c-1", "vars": {"q": "?"}, "expected": "A"});
    assert!(violations(SchemaOf::Case, &case).is_empty());
    assert!(violations(SchemaOf::Case, &json!([case, case])).is_empty());
    for bad in [
        json!({"id": "c-1", "expected": []}),
        json!({"id": "c-1", "expected": "A", "tag": ["x"]}),
        json!({"id": "c-1", "expected": "A", "files": {"path": "a.png", "url": "http://x/a.png"}}),
        json!({"id": "c-1", "expected": "A", "messages": [{"role": "robot", "content": "hi"}]}),
        json!({"id": "c-1", "expected": "A", "group": ""}),
    ] {
        assert!(
            !violations(SchemaOf::Case, &bad).is_empty(),
            "accepted: {bad}"
        );
    }
    let variant =
        json!({"name": "v", "messages": [{"role": "user", "content": "{{ q }}"}, "history"]});
    assert!(violations(SchemaOf::Variant, &variant).is_empty());
    for bad in [
        json!({"messages": [{"role": "user", "content": "x", "name": "n"}]}),
        json!({"messages": ["histories"]}),
        json!({"messages": [{"role": "user", "content": "x"}], "files": "some"}),
    ] {
        assert!(
            !violations(SchemaOf::Variant, &bad).is_empty(),
            "accepted: {bad}"
        );
    }
}
