//! Graders (docs/guide/scorers.md, "The mechanical scorers") and the [`Scorer`] shape they share with every other scorer. Each
//! records what it extracted, so a person can see why a job failed. This file builds a
//! bench's scorers from its specs ([`scorers_for`], [`SpecExt::scorer`]); what the scorers
//! share lies in files below it: the shape (`scorer.rs`), what the run lends them
//! (`context.rs`), a model call (`call.rs`), a spec's errors (`spec_error.rs`), the text
//! graders and their readers (`text.rs`), the judge's prompt (`judge_prompt.rs`).
//!
//! Invariant: turns an answer into a score; it never decides what to run or how to report
//! (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

mod call;
pub(crate) mod combine;
pub mod command;
mod context;
pub mod embedding;
pub mod expr;
pub mod javascript;
pub mod judge;
mod judge_prompt;
pub mod read;
pub mod scorer;
mod spec_error;
pub(crate) mod structured;
mod text;
mod trajectory;

pub use promptgauge_suite::GradeSpec;
use promptgauge_suite::grading::GradePart;
pub use scorer::{Answer, Score, ScoreContext, ScoreError, ScoreInput, Scorer};
pub use scorer::{CaseError, JudgeCall};
pub(crate) use spec_error::SpecError;
pub(crate) use text::Grader;
pub use text::{last_number, parse_number};

use std::path::Path;
use std::sync::Arc;

use promptgauge_suite::{Bench, Case, InputError, InputErrors};

/// Each case's scorer, in the bench's case order: its own `grade`, or the bench's.
pub type Scorers = Vec<Arc<dyn Scorer>>;

/// Builds every case's scorer, and checks each case's expected answer against it: a
/// scorer that cannot be built (a regex that does not compile, a judge prompt with an
/// error) or that could never accept a case's expected answer is a bench bug, reported
/// with the file and line to fix. No network.
pub fn scorers_for(bench: &Bench) -> Result<Scorers, InputErrors> {
    let dir = bench.dir();
    let shared = bench.grade.scorer(dir).map_err(|e| {
        // An expression's error points at its line (a part's, among several).
        let at = e
            .written()
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .and_then(|w| bench.text.lines().position(|l| l.contains(w)))
            .map(|i| promptgauge_suite::FilePos::line(&bench.path, i + 1));
        InputError::new(
            at.unwrap_or_else(|| bench.location_of("grade")),
            e.to_string(),
        )
        .fix("fix the bench's `grade`")
    })?;
    let mut scorers = Vec::with_capacity(bench.cases.len());
    let mut errors = Vec::new();
    let mut judge_runaway_said = false;
    for case in &bench.cases {
        let scorer = match &case.grade {
            None => shared.clone(),
            Some(spec) => match spec.scorer(dir) {
                Ok(s) => s,
                Err(e) => {
                    let fix = if e.in_judge_prompt() {
                        "fix the judge prompt file named in the case's `grade` (it may use `question`, `reference`, `expected`, `answer`, `rubric`, `vars.NAME`)"
                    } else {
                        "fix the case's `grade`"
                    };
                    errors.push(
                        InputError::new(case.location.clone(), format!("case `{}`: {e}", case.id))
                            .fix(fix),
                    );
                    continue;
                }
            },
        };
        // A case whose expected answer its own scorer could never accept is a bench bug.
        if let Err(e) = scorer.check(case) {
            let runaway = matches!(
                e,
                CaseError::JudgePrompt(judge::PromptError::Runaway { .. })
            );
            let fix = if runaway {
                "remove the runaway loop or repetition from the judge prompt".to_string()
            } else if matches!(e, CaseError::ExprReads(_)) {
                "give the case what the expression reads, or give it a `grade` of its own"
                    .to_string()
            } else if matches!(e, CaseError::JudgePrompt(_)) {
                "a judge prompt may use `question`, `conversation`, `reference`, `expected`, `answer`, `rubric`, `marker`, and the case's variables as `vars.NAME`".to_string()
            } else {
                "fix `expected`, or give the case a `grade` that fits it".to_string()
            };
            // A runaway judge prompt fails every case alike: said once.
            if !(runaway && judge_runaway_said) {
                errors.push(
                    InputError::new(case.location.clone(), format!("case `{}`: {e}", case.id))
                        .fix(fix),
                );
            }
            judge_runaway_said |= runaway;
        }
        scorers.push(scorer);
    }
    if errors.is_empty() {
        Ok(scorers)
    } else {
        Err(InputErrors(errors))
    }
}

/// The names of the parts a bench's scores give, over its cases (each by its own `grade` or
/// the bench's), in first-seen order: what a gate may name.
pub fn part_names(bench: &Bench) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for case in &bench.cases {
        let spec = case.grade.as_ref().unwrap_or(&bench.grade);
        for name in spec.part_names(case) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The names of an `all`/`any`/`mean`'s parts: each its `name:`, or the name the bench gave
/// it when loaded (one name, one check, over the whole bench: `suite::grading::name_parts`),
/// or else its kind (numbered from the second of a kind: `tool_args`, `tool_args 2`), never a
/// name another part is given.
fn names_of(of: &[GradePart]) -> Vec<String> {
    let given: Vec<&str> = of.iter().filter_map(|p| p.name.as_deref()).collect();
    let mut names: Vec<String> = Vec::with_capacity(of.len());
    for p in of {
        let name = match p.name.as_ref().or(p.default_name.as_ref()) {
            Some(n) => n.clone(),
            None => {
                let kind = p.spec.kind();
                let mut name = kind.to_string();
                let mut n = 1;
                while names.contains(&name) || given.contains(&name.as_str()) {
                    n += 1;
                    name = format!("{kind} {n}");
                }
                name
            }
        };
        names.push(name);
    }
    names
}

/// A part name a gate can name: not empty, no spaces at an end, no `=`, `,` or control
/// character.
fn check_part_name(name: &str) -> Result<(), SpecError> {
    let why = if name.trim().is_empty() {
        "is empty"
    } else if name.trim() != name {
        "has a space at an end"
    } else if name.contains('=') {
        "holds `=`"
    } else if name.contains(',') {
        "holds `,`"
    } else if name.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(());
    };
    Err(SpecError::PartName {
        name: name.to_string(),
        why,
    })
}

/// Whether `name` may name a part (what a gate can name): what an import checks before
/// it writes one.
pub fn part_name_ok(name: &str) -> bool {
    check_part_name(name).is_ok()
}

/// The names of parts given by the bench, each a name a gate can name and none twice.
fn check_part_names<'a>(names: impl Iterator<Item = &'a str>) -> Result<(), SpecError> {
    let mut seen: Vec<&str> = Vec::new();
    for name in names {
        check_part_name(name)?;
        if seen.contains(&name) {
            return Err(SpecError::PartNamedTwice(name.to_string()));
        }
        seen.push(name);
    }
    Ok(())
}

/// A judge of `criteria`: one judge per criterion (after the shared `rubric`), each a part
/// under its name; the answer passes when it meets every one (a 0–10 judge: their mean).
fn criteria_judge(
    criteria: &[promptgauge_suite::grading::Criterion],
    rubric: Option<&str>,
    scale: promptgauge_suite::Scale,
    judge: impl Fn(Option<String>, Option<usize>) -> Result<judge::Judge, SpecError>,
) -> Result<Arc<dyn Scorer>, SpecError> {
    check_part_names(criteria.iter().map(|c| c.name.as_str()))?;
    let mut parts: Vec<Arc<dyn Scorer>> = Vec::with_capacity(criteria.len());
    for (i, c) in criteria.iter().enumerate() {
        let text = match rubric.map(str::trim).filter(|r| !r.is_empty()) {
            Some(shared) => format!("{shared}\n{}", c.rubric),
            None => c.rubric.clone(),
        };
        parts.push(Arc::new(judge(Some(text), Some(i))?));
    }
    let how = match scale {
        promptgauge_suite::Scale::Binary => combine::Combine::All,
        promptgauge_suite::Scale::TenPoint => combine::Combine::Mean,
    };
    Ok(Arc::new(combine::Combined {
        how,
        weights: vec![1.0; criteria.len()],
        names: criteria.iter().map(|c| c.name.clone()).collect(),
        trajectory: vec![false; criteria.len()],
        parts,
    }))
}

/// A `judge` spec's scorer: one judge, or one per criterion of its `criteria`.
fn judge_scorer(spec: &GradeSpec, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError> {
    let GradeSpec::Judge {
        rubric,
        criteria,
        scale,
        votes,
        prompt,
        labels,
        passing_labels,
        range,
        pass_threshold,
    } = spec
    else {
        unreachable!("judge_scorer is given judge specs only")
    };
    let reading = judge::Reading::of(labels, passing_labels, *range, *pass_threshold)?;
    let prompt = prompt.as_deref().map(|p| dir.join(p));
    let judge = |rubric: Option<String>, item: Option<usize>| {
        judge::Judge::new(rubric, *scale, *votes, prompt.as_deref())?
            .reading(reading.clone())
            .map(|j| j.item(item))
    };
    if criteria.is_empty() {
        Ok(Arc::new(judge(rubric.clone(), None)?))
    } else {
        criteria_judge(criteria, rubric.as_deref(), *scale, judge)
    }
}

/// An `all`/`any`/`mean` of the scorers `of` describes (files read relative to `dir`), each
/// part named by its `name:` or its kind.
fn combined(
    how: combine::Combine,
    weights: Vec<f64>,
    of: &[GradePart],
    dir: &Path,
) -> Result<Arc<dyn Scorer>, SpecError> {
    if of.is_empty() {
        return Err(SpecError::NoParts);
    }
    check_part_names(of.iter().filter_map(|p| p.name.as_deref()))?;
    Ok(Arc::new(combine::Combined {
        how,
        weights,
        parts: of
            .iter()
            .map(|p| p.spec.scorer(dir))
            .collect::<Result<_, _>>()?,
        names: names_of(of),
        trajectory: of.iter().map(|p| p.spec.reads_trajectory()).collect(),
    }))
}

/// What the grade layer adds to a spec: the scorer it describes, and what the simulator
/// makes of it.
pub trait SpecExt {
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError>;
    fn shape(&self) -> Shape;
    fn part_names(&self, case: &Case) -> Vec<String>;
}

/// A text grader straight from its spec, for the tests of the text graders.
#[cfg(test)]
pub(crate) trait Compile {
    fn compile(&self) -> Result<Grader, SpecError>;
}

#[cfg(test)]
impl Compile for GradeSpec {
    /// A text grader: its regex compiled once, its path parsed once. Errors for the
    /// structured and model-graded kinds (use [`SpecExt::scorer`]).
    fn compile(&self) -> Result<Grader, SpecError> {
        Grader::new(self)
    }
}

impl SpecExt for GradeSpec {
    /// The scorer this spec describes; files it names (a schema, a judge prompt) are read
    /// relative to `dir`. The error says what is wrong in the user's terms.
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError> {
        Ok(match self {
            text @ (GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }) => Arc::new(Grader::new(text)?),
            GradeSpec::ToolCall { exact, order } => Arc::new(structured::ToolCalls {
                exact: *exact,
                order: *order,
            }),
            GradeSpec::ToolSequence { tools, order } => Arc::new(trajectory::ToolSequence {
                tools: tools.clone(),
                order: *order,
            }),
            GradeSpec::ToolArgs { tool, args } => Arc::new(trajectory::ToolArgs {
                tool: tool.clone(),
                args: args.clone(),
            }),
            GradeSpec::MaxSteps { steps } => Arc::new(trajectory::MaxSteps { steps: *steps }),
            GradeSpec::Judge { .. } => judge_scorer(self, dir)?,
            GradeSpec::JsonSchema { schema } => {
                Arc::new(structured::JsonSchema::read(schema, dir)?)
            }
            GradeSpec::Fields {
                required,
                case_sensitive,
                tolerance,
            } => Arc::new(structured::Fields::new(
                required.clone(),
                *case_sensitive,
                *tolerance,
            )?),
            GradeSpec::Command {
                run,
                env,
                workers,
                timeout,
                binary,
            } => {
                let timeout = command::timeout_of(timeout.as_deref())?;
                Arc::new(command::CommandScorer::new(
                    run, env, dir, *workers, timeout, *binary,
                )?)
            }
            GradeSpec::Embedding {
                threshold,
                endpoint,
                model,
            } => Arc::new(embedding::Embedding::new(
                *threshold,
                endpoint.as_deref(),
                model.as_deref(),
            )?),
            GradeSpec::Expr { expr } => Arc::new(expr::ExprScorer::new(expr)?),
            GradeSpec::All { of } => combined(combine::Combine::All, vec![1.0; of.len()], of, dir)?,
            GradeSpec::Any { of } => combined(combine::Combine::Any, vec![1.0; of.len()], of, dir)?,
            GradeSpec::Mean { of, weights } => {
                let weights = combine::weights(weights.as_deref(), of.len())?;
                combined(combine::Combine::Mean, weights, of, dir)?
            }
        })
    }

    /// The shape of answer this spec expects, for the simulator.
    fn shape(&self) -> Shape {
        match self {
            GradeSpec::Number { .. } => Shape::Number,
            GradeSpec::Choice => Shape::Choice,
            GradeSpec::Json { path, .. } => Shape::JsonPath(path.clone()),
            GradeSpec::JsonSchema { .. } | GradeSpec::Fields { .. } => Shape::Json,
            GradeSpec::ToolCall { .. } => Shape::ToolCall,
            GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => {
                of.first().map_or(Shape::Text, |p| p.spec.shape())
            }
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Judge { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::Command { .. }
            | GradeSpec::Embedding { .. }
            | GradeSpec::Expr { .. } => Shape::Text,
        }
    }

    /// The names of the parts its scores give on `case`, in their order (docs/guide/scorers.md,
    /// "Parts"): the same names the scorer gives each answer, known before anything is sent.
    fn part_names(&self, case: &Case) -> Vec<String> {
        let unit = |names: Vec<String>| names.into_iter().map(|n| (n, ())).collect::<Vec<_>>();
        match self {
            GradeSpec::Fields { .. } => structured::field_part_names(case),
            GradeSpec::Judge { criteria, .. } => criteria.iter().map(|c| c.name.clone()).collect(),
            GradeSpec::All { of } | GradeSpec::Any { of } | GradeSpec::Mean { of, .. } => {
                let trajectory: Vec<bool> = of.iter().map(|p| p.spec.reads_trajectory()).collect();
                let both = combine::reads_both(&trajectory).then_some(());
                let names = names_of(of);
                let theirs = names.iter().zip(of).flat_map(|(parent, p)| {
                    p.spec
                        .part_names(case)
                        .into_iter()
                        .map(move |n| (parent.clone(), n, ()))
                });
                combine::merged(unit(names.clone()), theirs, [both, both])
                    .into_iter()
                    .map(|(name, ())| name)
                    .collect()
            }
            GradeSpec::Exact { .. }
            | GradeSpec::Contains { .. }
            | GradeSpec::Regex { .. }
            | GradeSpec::Number { .. }
            | GradeSpec::Choice
            | GradeSpec::Json { .. }
            | GradeSpec::JsonSchema { .. }
            | GradeSpec::ToolCall { .. }
            | GradeSpec::ToolSequence { .. }
            | GradeSpec::ToolArgs { .. }
            | GradeSpec::MaxSteps { .. }
            | GradeSpec::Command { .. }
            | GradeSpec::Expr { .. }
            | GradeSpec::Embedding { .. } => Vec::new(),
        }
    }
}

/// What an answer looks like, as far as the simulator needs to know to make one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    Text,
    Number,
    Choice,
    /// JSON with the answer at this path.
    JsonPath(String),
    /// A JSON document (fields, a schema).
    Json,
    ToolCall,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_whose_expected_answer_its_scorer_cannot_accept_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: number }\n",
        )
        .unwrap();
        std::fs::write(
            d.join("cases.jsonl"),
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\"}, \"expected\": \"five\"}\n",
        )
        .unwrap();
        std::fs::write(d.join("plain.txt"), "{{ q }}").unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        let e = scorers_for(&bench).unwrap_err().to_string();
        assert!(
            e.contains("cases.jsonl:1: case `a`: expected `five` is not a number"),
            "{e}"
        );
        // The bench's own grade, when it cannot be built, is named at its line.
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: regex, pattern: \"(\" }\n",
        )
        .unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        let e = scorers_for(&bench).unwrap_err().to_string();
        assert!(
            e.contains("bench.yaml:4") && e.contains("does not compile"),
            "{e}"
        );
    }

    #[test]
    fn a_bench_names_before_the_run_the_parts_its_scores_give() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade:\n  kind: all\n  of:\n    - { kind: fields }\n    - { name: valid, kind: json_schema, schema: { type: object } }\n    - { kind: fields }\n    - { kind: max_steps, steps: 3 }\n",
        )
        .unwrap();
        std::fs::write(
            d.join("cases.jsonl"),
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\"}, \"expected\": {\"category\": \"x\", \"items\": [{\"sku\": 1}, {\"sku\": 2}]}}\n{\"id\": \"b\", \"vars\": {\"q\": \"y\"}, \"expected\": \"hi\", \"grade\": {\"kind\": \"judge\", \"criteria\": [{\"name\": \"tone\", \"rubric\": \"polite\"}]}}\n",
        )
        .unwrap();
        std::fs::write(d.join("plain.txt"), "{{ q }}").unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        assert_eq!(
            part_names(&bench),
            [
                "fields",
                "valid",
                "fields 2",
                "max_steps",
                "category",
                "items[].sku",
                // The second `fields`' fields: their names are taken, so its name leads.
                "fields 2.category",
                "fields 2.items[].sku",
                "answer",
                "trajectory",
                "tone"
            ]
        );
        // The names the scorer gives an answer are the ones named before.
        let scorers = scorers_for(&bench).unwrap();
        let case = &bench.cases[0];
        let answer = Answer {
            text: r#"{"category": "x", "items": [{"sku": 1}]}"#.into(),
            ..Answer::default()
        };
        let score = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(scorers[0].score(
                ScoreInput {
                    key: "k",
                    repeat: 0,
                    case,
                    messages: &[],
                    answer: &answer,
                },
                &ScoreContext::default(),
            ))
            .unwrap();
        let given: Vec<&str> = score.parts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(given, bench.grade.part_names(case));
        assert_eq!(score.parts[5], ("items[].sku".to_string(), 0.5));
    }

    #[test]
    fn one_part_name_is_one_check_over_a_bench_whose_cases_carry_their_own_grades() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bench.yaml"),
            "name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: { kind: contains }\n",
        )
        .unwrap();
        // Case a and c share a check (`short`); b checks another thing with the same kind,
        // and names a part `expr 3` itself, which no unnamed part may then take.
        let short = r#"{"kind": "expr", "expr": "output|length < 100"}"#;
        let long = r#"{"kind": "expr", "expr": "output|length > 100000"}"#;
        let cases = [
            format!(
                r#"{{"id": "a", "vars": {{"q": "x"}}, "expected": "x", "grade": {{"kind": "all", "of": [{{"kind": "contains"}}, {short}]}}}}"#
            ),
            format!(
                r#"{{"id": "b", "vars": {{"q": "y"}}, "expected": "y", "grade": {{"kind": "all", "of": [{long}, {{"name": "expr 3", "kind": "exact"}}, {short}]}}}}"#
            ),
            format!(
                r#"{{"id": "c", "vars": {{"q": "z"}}, "expected": "z", "grade": {{"kind": "any", "of": [{short}, {short}]}}}}"#
            ),
        ];
        std::fs::write(d.join("cases.jsonl"), cases.join("\n") + "\n").unwrap();
        std::fs::write(d.join("plain.txt"), "{{ q }}").unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        let names = |i: usize| {
            bench.cases[i]
                .grade
                .as_ref()
                .unwrap()
                .part_names(&bench.cases[i])
        };
        assert_eq!(names(0), ["contains", "expr"]);
        assert_eq!(names(1), ["expr 2", "expr 3", "expr"]);
        // The same check twice in one scorer is two parts: the second takes a new name.
        assert_eq!(names(2), ["expr", "expr 4"]);
        assert_eq!(
            part_names(&bench),
            ["contains", "expr", "expr 2", "expr 3", "expr 4"]
        );
        // The scores each answer gets go by the same names.
        let scorers = scorers_for(&bench).unwrap();
        let answer = Answer {
            text: "y".into(),
            ..Answer::default()
        };
        let score = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(scorers[1].score(
                ScoreInput {
                    key: "k",
                    repeat: 0,
                    case: &bench.cases[1],
                    messages: &[],
                    answer: &answer,
                },
                &ScoreContext::default(),
            ))
            .unwrap();
        let given: Vec<(&str, f64)> = score.parts.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(given, [("expr 2", 0.0), ("expr 3", 1.0), ("expr", 1.0)]);
        // A bench read for a few of its cases (view's pages) hashes them as the whole does.
        let some = Bench::load_some(&d.join("bench.yaml"), &|id: &str| id == "c").unwrap();
        assert_eq!(
            promptgauge_suite::plan::case_hash(&some.cases[0]),
            promptgauge_suite::plan::case_hash(&bench.cases[2])
        );
    }

    /// The error `scorers_for` gives a bench whose `grade:` is `grade` (`None`: none).
    fn grade_error(grade: &str) -> Option<String> {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(
            d.join("bench.yaml"),
            format!("name: t\ncases: cases.jsonl\nvariants: [plain.txt]\ngrade: {grade}\n"),
        )
        .unwrap();
        std::fs::write(
            d.join("cases.jsonl"),
            "{\"id\": \"a\", \"vars\": {\"q\": \"x\"}, \"expected\": \"4\"}\n",
        )
        .unwrap();
        std::fs::write(d.join("plain.txt"), "{{ q }}").unwrap();
        let bench = Bench::load(&d.join("bench.yaml")).unwrap();
        scorers_for(&bench).err().map(|e| e.to_string())
    }

    #[test]
    fn a_part_name_a_gate_could_not_name_or_given_twice_is_refused_at_its_line() {
        for (bad, why) in [
            ("a=b", "holds `=`"),
            ("a,b", "holds `,`"),
            (" lead", "has a space at an end"),
            ("trail ", "has a space at an end"),
            ("", "is empty"),
            ("tab\\there", "holds a control character"),
        ] {
            let grade = format!("{{kind: all, of: [{{kind: exact, name: \"{bad}\"}}]}}");
            let e = grade_error(&grade).unwrap_or_else(|| panic!("{bad:?} accepted"));
            assert!(
                e.contains("bench.yaml:4") && e.contains(why) && e.contains("rename it"),
                "{bad:?}: {e}"
            );
        }
        let e = grade_error("{kind: mean, of: [{kind: exact, name: x}, {kind: number, name: x}]}")
            .unwrap();
        assert!(
            e.contains("bench.yaml:4") && e.contains("two parts are named `x`"),
            "{e}"
        );
        let e = grade_error(
            "{kind: judge, criteria: [{name: tone, rubric: Polite.}, {name: tone, rubric: Short.}]}",
        )
        .unwrap();
        assert!(e.contains("two parts are named `tone`"), "{e}");
        let e = grade_error("{kind: judge, criteria: [{name: \"a=b\", rubric: Polite.}]}").unwrap();
        assert!(e.contains("the part name \"a=b\" holds `=`"), "{e}");
        // Names a gate can name pass, spaces inside and all.
        assert_eq!(
            grade_error(
                "{kind: all, of: [{kind: exact, name: on time}, {kind: number, name: \"total (EUR)\"}]}"
            ),
            None
        );
        // Within a part of a part too.
        let e = grade_error(
            "{kind: all, of: [{kind: exact}, {kind: any, of: [{kind: exact, name: y}, {kind: number, name: y}]}]}",
        )
        .unwrap();
        assert!(e.contains("two parts are named `y`"), "{e}");
    }

    /// A judge endpoint that says yes to a criterion holding `yes-word`, no to any other,
    /// and records each call's idempotency key.
    struct Criteria {
        keys: std::sync::Mutex<Vec<String>>,
        yes_word: &'static str,
        scale: bool,
    }

    impl promptgauge_client::Transport for Criteria {
        fn send(
            &self,
            request: promptgauge_client::HttpRequest,
        ) -> promptgauge_client::transport::BoxFuture<
            Result<promptgauge_client::HttpResponse, promptgauge_client::TransportError>,
        > {
            let key = request
                .headers
                .iter()
                .find(|(k, _)| k == "idempotency-key")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            self.keys.lock().unwrap().push(key);
            let body = String::from_utf8_lossy(&request.body.to_bytes()).to_string();
            let yes = body.contains(self.yes_word);
            let text = match (self.scale, yes) {
                (false, true) => r#"{"verdict": "yes"}"#,
                (false, false) => r#"{"verdict": "no"}"#,
                (true, true) => r#"{"score": 10}"#,
                (true, false) => r#"{"score": 4}"#,
            };
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
            let body = format!("data: {chunk}\n\ndata: [DONE]\n\n");
            Box::pin(async move {
                Ok(promptgauge_client::HttpResponse {
                    status: 200,
                    headers: vec![],
                    body: Box::pin(futures_util::stream::iter([Ok(bytes::Bytes::from(body))])),
                })
            })
        }
    }

    /// Scores "the answer" by `grade` with a judge that passes only the criterion holding
    /// `yes_word`; the score and the keys of the calls made. `cache`: the judge's replies
    /// kept across calls.
    fn judged(
        grade: &str,
        yes_word: &'static str,
        cache: Option<Arc<std::sync::Mutex<promptgauge_client::cache::Cache>>>,
    ) -> (Score, Vec<String>) {
        let spec: GradeSpec = serde_saphyr::from_str(grade).unwrap();
        let scorer = spec.scorer(Path::new(".")).unwrap();
        let transport = Arc::new(Criteria {
            keys: Default::default(),
            yes_word,
            scale: grade.contains("0-10"),
        });
        let mut config = promptgauge_client::ClientConfig::new("http://judge/v1", "judge-model");
        config.limits.max_attempts = 1;
        let service = crate::judge::JudgeService {
            client: Arc::new(promptgauge_client::Client::new(transport.clone(), config)),
            params: Default::default(),
            endpoint: "http://judge/v1".into(),
            cache,
        };
        let case = promptgauge_suite::Case {
            location: promptgauge_suite::FilePos::line(Path::new("c.jsonl"), 1),
            ..promptgauge_suite::testing::case()
        };
        let messages = [promptgauge_suite::ChatMessage::new(
            "user",
            "Can I return it?",
        )];
        let answer = Answer {
            text: "Yes, within 30 days.".into(),
            ..Answer::default()
        };
        let context = ScoreContext {
            judge: Some(Arc::new(service)),
            ..Default::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let score = rt
            .block_on(scorer.score(
                ScoreInput {
                    key: "pg-run-7",
                    repeat: 0,
                    case: &case,
                    messages: &messages,
                    answer: &answer,
                },
                &context,
            ))
            .unwrap();
        let keys = transport.keys.lock().unwrap().clone();
        (score, keys)
    }

    const CRITERIA: &str = "[{name: window, rubric: States the refund window.}, {name: tone, rubric: Is warm.}, {name: next step, rubric: Says what to do next.}]";

    #[test]
    fn each_criterion_is_a_judge_of_its_own_with_its_own_calls_and_part() {
        let (s, keys) = judged(
            &format!(
                "{{kind: judge, votes: 2, rubric: Judge the reply only., criteria: {CRITERIA}}}"
            ),
            "refund window",
            None,
        );
        // One call per criterion and vote, each under its own key.
        assert_eq!(
            keys,
            [
                "pg-run-7-judge-c0-0",
                "pg-run-7-judge-c0-1",
                "pg-run-7-judge-c1-0",
                "pg-run-7-judge-c1-1",
                "pg-run-7-judge-c2-0",
                "pg-run-7-judge-c2-1"
            ]
        );
        assert_eq!(s.judge.len(), 6, "every call journaled with the job");
        // Each prompt holds the shared rubric and its own criterion, no other.
        let prompt = |i: usize| {
            s.judge[i]
                .request
                .iter()
                .map(|m| m.content.as_str())
                .collect::<String>()
        };
        assert!(prompt(0).contains("Judge the reply only.\nStates the refund window."));
        assert!(!prompt(0).contains("Is warm."));
        assert!(prompt(2).contains("Is warm.") && !prompt(2).contains("refund window"));
        assert_eq!(
            s.parts,
            [
                ("window".to_string(), 1.0),
                ("tone".to_string(), 0.0),
                ("next step".to_string(), 0.0)
            ]
        );
        // Binary: the answer passes when it meets every criterion.
        assert_eq!(s.value, 0.0);
        let (s, _) = judged(&format!("{{kind: judge, criteria: {CRITERIA}}}"), "S", None);
        assert_eq!(s.value, 1.0, "{:?}", s.parts);
        // 0-10: their mean (10, 4, 4 of 10).
        let (s, keys) = judged(
            &format!("{{kind: judge, scale: 0-10, criteria: {CRITERIA}}}"),
            "refund window",
            None,
        );
        assert_eq!(keys.len(), 3);
        assert!((s.value - 0.6).abs() < 1e-12, "{}", s.value);
        assert_eq!(s.parts[0], ("window".to_string(), 1.0));
        // And what `--budget` counts for it: a call per criterion and vote.
        let spec: GradeSpec =
            serde_saphyr::from_str(&format!("{{kind: judge, votes: 3, criteria: {CRITERIA}}}"))
                .unwrap();
        assert_eq!(spec.judge_calls(), 9);
        let case = promptgauge_suite::Case {
            location: promptgauge_suite::FilePos::line(Path::new("c.jsonl"), 1),
            ..promptgauge_suite::testing::case()
        };
        let held = spec.scorer(Path::new(".")).unwrap().calls(
            &case,
            &[promptgauge_suite::ChatMessage::new("user", "?")],
            10,
        );
        assert_eq!(held.count, 9, "what --budget holds back for a job");
    }

    #[test]
    fn each_criterion_s_verdict_is_cached_apart() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Arc::new(std::sync::Mutex::new(
            promptgauge_client::cache::Cache::open(&dir.path().join("cache.jsonl")).unwrap(),
        ));
        let grade = format!("{{kind: judge, criteria: {CRITERIA}}}");
        let (first, keys) = judged(&grade, "refund window", Some(cache.clone()));
        assert_eq!(keys.len(), 3);
        // Asked again, every criterion's own verdict comes from the cache: none is sent,
        // and none is another criterion's.
        let (again, keys) = judged(&grade, "nothing matches", Some(cache));
        assert!(keys.is_empty(), "{keys:?}");
        assert!(again.judge.iter().all(|c| c.cached));
        assert_eq!(again.parts, first.parts);
    }
}
