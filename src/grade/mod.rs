//! Graders (docs/guide/scorers.md, "The mechanical scorers") and the [`Scorer`] shape they share with every other scorer. Each
//! records what it extracted, so a person can see why a job failed. This file builds a
//! bench's scorers from its specs ([`scorers_for`], [`SpecExt::scorer`]); what the scorers
//! share lies in files below it: the shape (`scorer.rs`), what the run lends them
//! (`context.rs`), a model call (`call.rs`), a spec's errors (`spec_error.rs`), the text
//! graders and their readers (`text.rs`), the judge's prompt (`judge_prompt.rs`).

mod call;
pub(crate) mod combine;
pub mod command;
mod context;
pub mod embedding;
pub mod judge;
mod judge_prompt;
pub(crate) mod scorer;
mod spec_error;
pub(crate) mod structured;
mod text;
mod trajectory;

pub(crate) use crate::suite::GradeSpec;
use crate::suite::grading::GradePart;
pub use scorer::{Answer, Score, ScoreContext, ScoreError, ScoreInput, Scorer};
pub(crate) use scorer::{CaseError, JudgeCall};
pub(crate) use spec_error::SpecError;
pub(crate) use text::Grader;
pub(crate) use text::{last_number, parse_number};

use std::path::Path;
use std::sync::Arc;

use crate::suite::{Bench, Case, InputError, InputErrors};

/// Each case's scorer, in the bench's case order: its own `grade`, or the bench's.
pub(crate) type Scorers = Vec<Arc<dyn Scorer>>;

/// Builds every case's scorer, and checks each case's expected answer against it: a
/// scorer that cannot be built (a regex that does not compile, a judge prompt with an
/// error) or that could never accept a case's expected answer is a bench bug, reported
/// with the file and line to fix. No network.
pub fn scorers_for(bench: &Bench) -> Result<Scorers, InputErrors> {
    let dir = bench.dir();
    let shared = bench.grade.scorer(dir).map_err(|e| {
        InputError::new(bench.location_of("grade"), e.to_string()).fix("fix the bench's `grade`")
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
pub(crate) fn part_names(bench: &Bench) -> Vec<String> {
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

/// The names of an `all`/`any`/`mean`'s parts: each its `name:`, or its kind (numbered from
/// the second of a kind: `tool_args`, `tool_args 2`).
fn names_of(of: &[GradePart]) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(of.len());
    for p in of {
        let name = match &p.name {
            Some(n) => n.clone(),
            None => {
                let kind = p.spec.kind();
                let mut name = kind.to_string();
                let mut n = 1;
                while names.contains(&name) {
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
    let bad = name.is_empty()
        || name.trim() != name
        || name.chars().any(|c| c == '=' || c == ',' || c.is_control());
    if bad {
        return Err(SpecError::PartName(name.to_string()));
    }
    Ok(())
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
    criteria: &[crate::suite::grading::Criterion],
    rubric: Option<&str>,
    scale: crate::suite::Scale,
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
        crate::suite::Scale::Binary => combine::Combine::All,
        crate::suite::Scale::TenPoint => combine::Combine::Mean,
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
pub(crate) trait SpecExt {
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError>;
    fn shape(&self) -> Shape;
    fn part_names(&self, case: &Case) -> Vec<String>;
    #[cfg(test)]
    fn compile(&self) -> Result<Grader, SpecError>;
}

impl SpecExt for GradeSpec {
    /// The scorer this spec describes; files it names (a schema, a judge prompt) are read
    /// relative to `dir`. The error says what is wrong in the user's terms.
    fn scorer(&self, dir: &Path) -> Result<Arc<dyn Scorer>, SpecError> {
        if let Some(scorer) = trajectory::scorer_of(self) {
            return Ok(scorer);
        }
        Ok(match self {
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
            GradeSpec::All { of } => combined(combine::Combine::All, vec![1.0; of.len()], of, dir)?,
            GradeSpec::Any { of } => combined(combine::Combine::Any, vec![1.0; of.len()], of, dir)?,
            GradeSpec::Mean { of, weights } => {
                let weights = combine::weights(weights.as_deref(), of.len())?;
                combined(combine::Combine::Mean, weights, of, dir)?
            }
            text => Arc::new(Grader::new(text)?),
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
            _ => Shape::Text,
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
                let theirs = of.iter().flat_map(|p| unit(p.spec.part_names(case)));
                combine::merged(unit(names_of(of)), theirs, [both, both])
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
            | GradeSpec::Embedding { .. } => Vec::new(),
        }
    }

    /// A text grader: its regex compiled once, its path parsed once. Errors for the
    /// structured and model-graded kinds (use [`GradeSpec::scorer`]).
    #[cfg(test)]
    fn compile(&self) -> Result<Grader, SpecError> {
        Grader::new(self)
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
}
