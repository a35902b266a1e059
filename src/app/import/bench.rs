//! The bench an import builds ([`Import`]: its variants, cases, endpoints, scorers and
//! notes), and what every import does with it at the end: checks there is a bench to write,
//! writes it (never over another) and says what was and was not carried over. Below
//! `import.rs` (promptfoo) and `openai_evals.rs`, which both build one.

use std::path::Path;

use serde_json::{Map, Value};

use crate::app::Failure;
use crate::error::BeforeSend;
use crate::error::UsageError;

/// What the import produced, and what it could not carry over.
#[derive(Default)]
pub(super) struct Import {
    pub(super) variants: Vec<(String, String)>,
    pub(super) cases: Vec<Value>,
    /// Tests with no assert: kept for reading in [`UNSCORED_FILE`], apart from the cases
    /// the bench scores.
    pub(super) unscored: Vec<Value>,
    /// No test has an assert: the bench is those tests, run for their answers, each
    /// finished answer passing as promptfoo passes it ([`Import::run_for_answers`]).
    pub(super) answers_only: bool,
    pub(super) endpoint: Map<String, Value>,
    pub(super) params: Map<String, Value>,
    /// Several providers: each as a named endpoint (its fields, `params` among them).
    pub(super) endpoints: Vec<Map<String, Value>>,
    pub(super) notes: Vec<String>,
    /// What was carried over and must be reviewed before a run (the endpoint every prompt
    /// will be sent to).
    pub(super) review: Vec<String>,
    /// Cases made so far (a test with list variables makes several), for their ids.
    pub(super) cases_seen: usize,
    /// The config's tests read so far (skipped ones included), as the notes number them.
    pub(super) tests_read: usize,
    /// The test being read, as the notes name it (`test 3: …`).
    pub(super) test_no: usize,
    /// Asserts as the config writes them (defaultTest's once), and how many became scorers.
    pub(super) asserts_written: usize,
    pub(super) asserts_converted: usize,
    /// Case ids given so far.
    pub(super) ids: std::collections::HashSet<String>,
    /// `defaultTest.vars`: every test's variables start from these.
    pub(super) default_vars: Map<String, Value>,
    /// The bench's scorer, when the import has one for every case (else each case carries
    /// its own).
    pub(super) grade: Option<Value>,
    /// The bench's `judge:` block.
    pub(super) judge: Option<Map<String, Value>>,
    /// Other files to write, by their path in the bench's folder (judge prompts, scorers).
    pub(super) files: Vec<(String, String)>,
    /// Files of code asserts name (`file://check.js`), to copy into the bench: the
    /// config's reference and the path in the bench.
    pub(super) code_files: Vec<(String, String)>,
    /// Files the cases attach, copied into the bench's folder: its path there, and where
    /// it is read from.
    pub(super) copies: Vec<(String, std::path::PathBuf)>,
    /// The variables the prompts send as files (docs/guide/attachments.md).
    pub(super) file_vars: super::files::FileVars,
    /// The tool imported from, as the bench's first line names it.
    pub(super) tool: &'static str,
    /// The names the asserts' parts go by, over the whole bench.
    pub(super) part_names: PartNames,
    /// The smallest `latency` and `cost` thresholds of the asserts: the bench's
    /// `gates.max_latency` (ms) and `gates.max_cost_per_job` (USD).
    pub(super) gate_latency_ms: Option<f64>,
    pub(super) gate_cost_usd: Option<f64>,
    /// The bench's reading of every answer (`extract:`), from a transform all tests share.
    pub(super) extract: Option<Value>,
    /// defaultTest's `options.transform`, and each test's (by test number), as written.
    pub(super) default_transform: Option<String>,
    pub(super) test_transforms: Vec<(usize, String)>,
    /// The config's folder, to read the files asserts name (a schema's `file://`).
    pub(super) reader: Option<super::reader::Reader>,
    /// Variants whose prompt asks for an answer by a JSON schema (`response_format:
    /// json_schema`): promptfoo hands code asserts that answer parsed.
    pub(super) schema_variants: usize,
    /// Whether the notes already say that only some variants' answers are parsed.
    pub(super) said_mixed_schema: bool,
}

/// The names an import gives the parts of its cases' scores (each case's asserts; a g-eval's
/// criteria): one name, one check, over the whole bench — the same assert in two tests is
/// one part, two different asserts of a type are two (`javascript`, `javascript 2`), so a
/// report's part row pools only the same check (docs/guide/import-promptfoo.md).
#[derive(Default)]
pub(super) struct PartNames {
    /// The name each check was given, by what it is (its type and its scorer as written).
    given: std::collections::HashMap<String, String>,
    taken: std::collections::HashSet<String>,
}

impl PartNames {
    /// The name of the check `check` (a distinct text per check) of type `label`: the one it
    /// was given before, else `label`, numbered from the second check of that type.
    pub(super) fn name(&mut self, label: &str, check: &str) -> String {
        let key = format!("{label}\u{0}{check}");
        if let Some(name) = self.given.get(&key) {
            return name.clone();
        }
        let mut name = label.to_string();
        let mut n = 1;
        while self.taken.contains(&name) {
            n += 1;
            name = format!("{label} {n}");
        }
        self.taken.insert(name.clone());
        self.given.insert(key, name.clone());
        name
    }

    /// A name the config gives (an assert's `metric`: promptfoo pools a metric's asserts
    /// over its tests, and so does the report): no numbered name will be it.
    pub(super) fn metric(&mut self, metric: &str) -> String {
        self.taken.insert(metric.to_string());
        metric.to_string()
    }
}

/// A promptfoo value rendered against a test's variables (promptfoo fills `{{var}}` in
/// assert values with nunjucks; the subset tests use is Jinja's). Text without a tag is
/// taken as it is.
pub(super) fn render(text: &str, vars: &Map<String, Value>) -> Result<String, String> {
    if !text.contains("{{") && !text.contains("{%") {
        return Ok(text.to_string());
    }
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_fuel(Some(100_000));
    // A case's files are placed when the bench runs; here they only need to exist.
    env.add_function("file", |_: String| String::new());
    env.add_function("files", String::new);
    env.render_str(text, minijinja::value::Serde(vars))
        .map_err(|e| e.to_string())
}

/// Where the tests without an assert are kept, beside the bench (docs/guide/import-promptfoo.md).
pub(super) const UNSCORED_FILE: &str = "cases-without-asserts.jsonl";

pub(super) use super::reader::MAX_IMPORT_BYTES;

/// A variant name from a label or a file name: letters, digits, `-` and `_`.
pub(super) fn slug(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').chars().take(40).collect()
}

/// The bench's scorer when no test has an assert: every finished answer passes.
const ANSWERS_ONLY_GRADE: &str = "true";

impl Import {
    /// A config none of whose tests has an assert is what promptfoo users write to read
    /// the answers of several prompts side by side: its tests become the bench's cases,
    /// each finished answer passing (`expr: true`), as promptfoo passes them. The report
    /// and `view` show the answers; the figures say only that answers came back.
    pub(super) fn run_for_answers(&mut self) {
        if !self.cases.is_empty() || self.unscored.is_empty() || self.variants.is_empty() {
            return;
        }
        self.cases = std::mem::take(&mut self.unscored);
        self.answers_only = true;
        self.grade = Some(serde_json::json!({"kind": "expr", "expr": ANSWERS_ONLY_GRADE}));
        self.review.push(format!(
            "no test has an assert: the bench runs {} for their answers, and every finished answer passes (`grade: {{kind: expr, expr: \"true\"}}`), as promptfoo passes them; its accuracy says only that answers came back. Read them in report.html or `promptgauge view`; to measure them, give each case an `expected` and the bench a `grade` (docs/guide/scorers.md)",
            plural(self.cases.len(), "case")
        ));
    }
}

/// A bench needs a prompt and a case, and import never overwrites one. A refusal says
/// which is missing and why (the notes that skipped each test or prompt).
pub(super) fn check_importable(im: &Import, config_path: &Path, out: &Path) -> Result<(), Failure> {
    if im.variants.is_empty() || im.cases.is_empty() {
        let (what, fix) = if im.variants.is_empty() {
            (
                format!(
                    "{} gives no prompt promptgauge can send",
                    config_path.display()
                ),
                "a bench needs at least one prompt: write the prompt as text or a chat of text messages (the reasons are above)",
            )
        } else if im.tool != "promptfoo" {
            (
                format!(
                    "{} gives {} and no item promptgauge can use",
                    config_path.display(),
                    plural(im.variants.len(), "prompt")
                ),
                "a bench needs at least one item with an answer promptgauge can score (the reasons are above)",
            )
        } else {
            (
                format!(
                    "{} gives {} and no test promptgauge can use: every test's asserts were left out",
                    config_path.display(),
                    plural(im.variants.len(), "prompt")
                ),
                "give a test an assert promptgauge can score (docs/guide/import-promptfoo.md lists them), or remove the asserts to import the tests for their answers",
            )
        };
        let reasons: String = im
            .notes
            .iter()
            .take(5)
            .map(|n| format!("\n  - {n}"))
            .collect();
        return Err(
            UsageError::with_fix(format!("{what}: nothing to import{reasons}"), fix).into(),
        );
    }
    if std::fs::symlink_metadata(out.join("promptgauge.yaml")).is_ok() {
        return Err(UsageError::with_fix(
            format!(
                "{} already holds a promptgauge.yaml: import never overwrites",
                out.display()
            ),
            "choose another --out folder",
        )
        .into());
    }
    Ok(())
}

/// What was imported, what to review, what was not carried over, and what to do next.
pub(super) fn say_imported(im: &Import, out: &Path) {
    out!(
        "imported {} and {} into {} (promptgauge.yaml, cases.jsonl, prompts/)",
        plural(im.variants.len(), "prompt"),
        im.tests_said(),
        out.display()
    );
    if let Some(counts) = im.counts() {
        out!("{counts}");
    }
    if !im.unscored.is_empty() {
        out!(
            "{} without an assert kept apart, for reading, in {UNSCORED_FILE}: not in the bench (give each an `expected` and a `grade`, then add the file to `cases:`)",
            plural(im.unscored.len(), "test")
        );
    }
    let programs = im.programs();
    if !programs.is_empty() {
        out!("programs the bench will run to score answers (read them before a run):");
        for p in &programs {
            out!(
                "  - `{p}` (it sees {} and no other variable)",
                promptgauge_suite::grading::PASSED_ENV.join(", ")
            );
        }
    }
    if !im.review.is_empty() {
        out!("review before running (also in IMPORT-NOTES.md):");
        for n in &im.review {
            out!("  - {n}");
        }
    }
    if !im.notes.is_empty() {
        out!("not carried over (also in IMPORT-NOTES.md):");
        for n in &im.notes {
            out!("  - {n}");
        }
    }
    out!(
        "next: promptgauge check {0}, then promptgauge run {0}",
        promptgauge_report::shell_path(&out.join("promptgauge.yaml"))
    );
}

impl Import {
    /// What the bench holds, in the words of the tool imported from: promptfoo's tests
    /// (each a case, or a case per combination of its list variables), an eval's items.
    fn tests_said(&self) -> String {
        if self.tool == "promptfoo" {
            plural(self.tests_read, "test")
        } else {
            format!("{} tests", self.cases.len())
        }
    }

    /// promptfoo's counts, one line: the tests, the cases they became, those kept apart,
    /// and the asserts (as written, defaultTest's once) and how many became scorers.
    fn counts(&self) -> Option<String> {
        if self.tool != "promptfoo" {
            return None;
        }
        let left = self.asserts_written - self.asserts_converted.min(self.asserts_written);
        let mut parts = vec![format!(
            "{} of the config: {} scored by the bench",
            plural(self.tests_read, "test"),
            plural(self.cases.len(), "case")
        )];
        if self.answers_only {
            parts[0] = format!(
                "{} of the config, none with an assert: {} run for their answers",
                plural(self.tests_read, "test"),
                plural(self.cases.len(), "case")
            );
        }
        if !self.unscored.is_empty() {
            parts.push(format!(
                "{} without an assert kept apart",
                plural(self.unscored.len(), "case")
            ));
        }
        parts.push(format!(
            "{} ({} became scorers or gates{})",
            plural(self.asserts_written, "assert"),
            self.asserts_converted,
            if left > 0 {
                format!(", {left} left out: below")
            } else {
                String::new()
            }
        ));
        Some(parts.join("; "))
    }

    /// Every program a `command` scorer of the imported bench runs (its `grade:` and each
    /// case's), as written, once each.
    fn programs(&self) -> Vec<String> {
        fn walk(v: &Value, found: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    if m.get("kind").and_then(Value::as_str) == Some("command")
                        && let Some(run) = m.get("run").and_then(Value::as_array)
                    {
                        let argv: Vec<&str> = run.iter().filter_map(Value::as_str).collect();
                        let shown = argv.join(" ");
                        if !found.contains(&shown) {
                            found.push(shown);
                        }
                    }
                    m.values().for_each(|v| walk(v, found));
                }
                Value::Array(a) => a.iter().for_each(|v| walk(v, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        self.grade.iter().for_each(|g| walk(g, &mut found));
        self.cases.iter().for_each(|c| walk(c, &mut found));
        found
    }
}

/// Notes said by many tests alike (`test 3: …`, `test 4: …`) become one, with how many
/// tests said it (each test once, however many of its asserts or cases said it); a note
/// said twice of no test is said once.
pub(super) fn collapse_notes(notes: Vec<String>) -> Vec<String> {
    // (what is said, the first note as written, the tests that said it)
    let mut collapsed: Vec<(String, String, Vec<String>)> = Vec::new();
    for n in notes {
        let (key, test) = match n.split_once(": ") {
            Some((head, rest))
                if head
                    .strip_prefix("test ")
                    .is_some_and(|d| d.chars().all(|c| c.is_ascii_digit())) =>
            {
                (rest.to_string(), Some(head.to_string()))
            }
            _ => (n.clone(), None),
        };
        match collapsed.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, _, tests)) => tests.extend(test.filter(|t| !tests.contains(t))),
            None => collapsed.push((key, n, test.into_iter().collect())),
        }
    }
    collapsed
        .into_iter()
        .map(|(k, first, tests)| {
            if tests.len() > 1 {
                format!("{} tests: {k}", tests.len())
            } else {
                first
            }
        })
        .collect()
}

/// Writes the imported bench into `out`: its prompts, its cases, promptgauge.yaml and
/// IMPORT-NOTES.md, each a new file (import never overwrites, nor writes through a symlink);
/// then checks it as `promptgauge check` would. A bench its own `check` refuses is removed
/// again and the import fails with check's reason: an import never leaves a broken bench.
pub(super) fn write_bench(
    out: &Path,
    name: &str,
    config_path: &Path,
    im: &Import,
) -> Result<(), Failure> {
    let written = std::cell::RefCell::new(Vec::new());
    let wrote = write_files(out, name, config_path, im, &written);
    let checked = wrote.and_then(|()| check_written(out));
    if checked.is_err() {
        for file in written.borrow().iter().rev() {
            let _ = std::fs::remove_file(file);
            // The folders the import made, once empty (never one that holds anything else).
            let mut dir = file.parent();
            while let Some(d) = dir.filter(|d| d.starts_with(out)) {
                if std::fs::remove_dir(d).is_err() {
                    break;
                }
                dir = d.parent();
            }
        }
    }
    checked
}

/// `promptgauge check`'s validation of the bench just written: it loads, every template
/// renders against every case, every scorer builds.
fn check_written(out: &Path) -> Result<(), Failure> {
    let refused = |e: String| -> Failure {
        UsageError::with_fix(
            format!("the imported bench does not pass `promptgauge check`, so nothing was written: {e}"),
            "this is a bug of the importer for this config: report it, and import the parts by hand meanwhile",
        )
        .into()
    };
    let bench = promptgauge_suite::Bench::load(&out.join("promptgauge.yaml"))
        .map_err(|e| refused(e.to_string()))?;
    promptgauge_grade::scorers_for(&bench).map_err(|e| refused(e.to_string()))?;
    Ok(())
}

/// Every file of the imported bench, each path recorded in `written` once it exists.
fn write_files(
    out: &Path,
    name: &str,
    config_path: &Path,
    im: &Import,
    written: &std::cell::RefCell<Vec<std::path::PathBuf>>,
) -> Result<(), Failure> {
    // A new file only: import never overwrites, nor writes through a symlink.
    let write_bytes = |rel: &str, bytes: &[u8]| -> Result<(), Failure> {
        let path = out.join(rel);
        promptgauge_base::files::write_new(&path, bytes)
            .map_err(|e| anyhow::anyhow!(e))
            .before_send()?;
        written.borrow_mut().push(path);
        Ok(())
    };
    let write = |rel: &str, text: &str| write_bytes(rel, text.as_bytes());
    for (file, text) in &im.variants {
        write(&format!("prompts/{file}"), text)?;
    }
    for (file, text) in &im.files {
        write(file, text)?;
    }
    for (file, from) in &im.copies {
        let bytes = promptgauge_base::files::read_capped(
            from,
            promptgauge_suite::attachments::MAX_FILE_BYTES,
        )
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", from.display()))
        .before_send()?;
        write_bytes(file, &bytes)?;
    }
    let cases: String = im.cases.iter().map(|c| format!("{c}\n")).collect();
    write("cases.jsonl", &cases)?;
    if !im.unscored.is_empty() {
        let kept: String = im.unscored.iter().map(|c| format!("{c}\n")).collect();
        write(UNSCORED_FILE, &kept)?;
    }
    write("promptgauge.yaml", &bench_yaml(name, config_path, im))?;
    write("IMPORT-NOTES.md", &notes_md(im))
}

/// The imported bench's promptgauge.yaml.
fn bench_yaml(name: &str, config_path: &Path, im: &Import) -> String {
    let mut bench = format!(
        "# Imported from {} by `promptgauge import {}`; see IMPORT-NOTES.md for what was not carried over.\nname: {name}\ncases: cases.jsonl\nvariants:                      # the first is the baseline\n",
        config_path.display(),
        im.tool
    );
    for (file, _) in &im.variants {
        bench.push_str(&format!("  - prompts/{file}\n"));
    }
    match &im.grade {
        Some(grade) if im.answers_only => bench.push_str(&format!(
            "grade: {grade}   # no test has an assert: every finished answer passes, as in promptfoo; read the answers in report.html or `promptgauge view`\n"
        )),
        Some(grade) => bench.push_str(&format!("grade: {grade}\n")),
        None => bench.push_str(
            "grade: { kind: exact }         # each case carries its own scorer, from its asserts\n",
        ),
    }
    if let Some(reading) = &im.extract {
        bench.push_str(&format!(
            "extract: {reading}              # promptfoo's output transform, as a reading of every answer\n"
        ));
    }
    if let Some(judge) = &im.judge {
        bench.push_str(&format!("judge: {}\n", Value::Object(judge.clone())));
    }
    if !im.endpoint.is_empty() {
        bench.push_str(&format!(
            "endpoint: {}\n",
            Value::Object(im.endpoint.clone())
        ));
    }
    if !im.endpoints.is_empty() {
        bench.push_str(
            "endpoints:                     # side by side in one run; the first is the baseline\n",
        );
        for e in &im.endpoints {
            bench.push_str(&format!("  - {}\n", Value::Object(e.clone())));
        }
    }
    if !im.params.is_empty() {
        bench.push_str(&format!("params: {}\n", Value::Object(im.params.clone())));
    }
    bench.push_str(&im.gates_yaml());
    bench
}

/// `text` with its first letter a capital.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `1 test`, `3 tests`.
fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// IMPORT-NOTES.md: what to review before a run, and what was not carried over.
fn notes_md(im: &Import) -> String {
    let review: String = if im.review.is_empty() {
        String::new()
    } else {
        let items: String = im.review.iter().map(|n| format!("- {n}\n")).collect();
        format!("## Review before running\n\n{items}\n")
    };
    let apart = if im.unscored.is_empty() {
        String::new()
    } else {
        format!(
            "## Tests without an assert\n\n{} no assert (promptfoo shows their answers and passes them): they are in {UNSCORED_FILE}, for reading, not in the bench; give each an `expected` and a `grade`, then add the file to the bench's `cases:`.\n\n",
            if im.unscored.len() == 1 {
                "1 test has".to_string()
            } else {
                format!("{} tests have", im.unscored.len())
            }
        )
    };
    let notes = if im.notes.is_empty() {
        "Everything else was carried over.\n".to_string()
    } else {
        let items: String = im.notes.iter().map(|n| format!("- {n}\n")).collect();
        format!("## Not carried over\n\n{items}")
    };
    let counts = im
        .counts()
        .map(|c| format!("{}.\n\n", capitalized(&c)))
        .unwrap_or_default();
    format!("# Import notes\n\n{counts}{review}{apart}{notes}")
}
