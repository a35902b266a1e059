//! Scorers made of scorers: `all` (every one passes: the lowest score), `any` (one passes:
//! the highest) and `mean` (a weighted mean).

use std::sync::Arc;

use super::scorer::{CaseError, Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer};
use super::spec_error::SpecError;
use promptgauge_client::Usage;
use promptgauge_suite::Case;

/// How the parts' scores become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Combine {
    All,
    Any,
    Mean,
}

/// Several scorers on one answer.
#[derive(Debug)]
pub(super) struct Combined {
    pub(crate) how: Combine,
    pub(crate) parts: Vec<Arc<dyn Scorer>>,
    /// For `mean`: one weight per part (all 1 when not given).
    pub(crate) weights: Vec<f64>,
    /// Each part's name, for its figures (docs/guide/scorers.md, "Parts").
    pub(crate) names: Vec<String>,
    /// Which parts read an agent loop's trajectory (`tool_sequence`, `tool_args`,
    /// `max_steps`): with some of each, the answer's and the trajectory's scores are parts
    /// too, `answer` and `trajectory`.
    pub(crate) trajectory: Vec<bool>,
}

impl Combined {
    /// The parts' values made one, as `how` says, over the parts `take` keeps (`None`
    /// when it keeps none).
    fn fold(&self, values: &[f64], take: impl Fn(usize) -> bool) -> Option<f64> {
        let kept: Vec<(f64, f64)> = values
            .iter()
            .zip(&self.weights)
            .enumerate()
            .filter(|(i, _)| take(*i))
            .map(|(_, (v, w))| (*v, *w))
            .collect();
        if kept.is_empty() {
            return None;
        }
        Some(match self.how {
            Combine::All => kept.iter().map(|k| k.0).fold(1.0, f64::min),
            Combine::Any => kept.iter().map(|k| k.0).fold(0.0, f64::max),
            Combine::Mean => {
                let total: f64 = kept.iter().map(|k| k.1).sum();
                if total > 0.0 {
                    kept.iter().map(|(v, w)| v * w).sum::<f64>() / total
                } else {
                    kept.iter().map(|k| k.0).sum::<f64>() / kept.len() as f64
                }
            }
        })
    }

    /// The named parts of a combined score, as [`merged`] orders them.
    fn named(&self, scores: &[Score]) -> Vec<(String, f64)> {
        let values: Vec<f64> = scores.iter().map(|s| s.value).collect();
        let own = self.names.iter().cloned().zip(values.clone()).collect();
        let theirs = self.names.iter().zip(scores).flat_map(|(parent, s)| {
            s.parts
                .iter()
                .map(move |(name, v)| (parent.clone(), name.clone(), *v))
        });
        let both = if reads_both(&self.trajectory) {
            [
                self.fold(&values, |i| !self.trajectory[i]),
                self.fold(&values, |i| self.trajectory[i]),
            ]
        } else {
            [None, None]
        };
        merged(own, theirs, both)
    }
}

/// Whether some of a combined score's parts read an agent loop's trajectory and some its
/// answer: then `answer` and `trajectory` are parts too.
pub(crate) fn reads_both(trajectory: &[bool]) -> bool {
    trajectory.iter().any(|t| *t) && trajectory.iter().any(|t| !*t)
}

/// A combined score's parts, in order: each part's own (`own`), then what the parts report
/// of theirs (`theirs`: the part's name, its part's name, the value — a `fields` part's
/// fields, a judge's criteria) under their own names, or `PART.NAME` when another part has
/// the name already (a field `priority` beside a scorer named `priority`), then `answer` and
/// `trajectory` (`both`, when [`reads_both`]) unless a part is named so. One rule for the
/// values an answer gets and the names a bench declares before it runs
/// (`SpecExt::part_names`).
pub(crate) fn merged<T>(
    own: Vec<(String, T)>,
    theirs: impl IntoIterator<Item = (String, String, T)>,
    both: [Option<T>; 2],
) -> Vec<(String, T)> {
    let mut out = own;
    let taken = |out: &[(String, T)], name: &str| out.iter().any(|(n, _)| n == name);
    for (parent, name, value) in theirs {
        if !taken(&out, &name) {
            out.push((name, value));
        } else {
            let long = format!("{parent}.{name}");
            if !taken(&out, &long) {
                out.push((long, value));
            }
        }
    }
    let [answer, trajectory] = both;
    for (name, value) in [("answer", answer), ("trajectory", trajectory)] {
        if let Some(v) = value.filter(|_| !taken(&out, name)) {
            out.push((name.to_string(), v));
        }
    }
    out
}

/// `mean`'s weights: one per part of `parts` (all 1 when not `given`), none negative nor
/// all 0.
pub(crate) fn weights(given: Option<&[f64]>, parts: usize) -> Result<Vec<f64>, SpecError> {
    match given {
        None => Ok(vec![1.0; parts]),
        Some(w) if w.len() != parts => Err(SpecError::WeightCount {
            weights: w.len(),
            parts,
        }),
        Some(w) if w.iter().any(|x| !x.is_finite() || *x < 0.0) || w.iter().sum::<f64>() <= 0.0 => {
            Err(SpecError::Weights)
        }
        Some(w) => Ok(w.to_vec()),
    }
}

fn add_usage(total: &mut Option<Usage>, more: Option<Usage>) {
    if let Some(u) = more {
        let t = total.get_or_insert_with(Usage::default);
        t.prompt_tokens = t.prompt_tokens.saturating_add(u.prompt_tokens);
        t.completion_tokens = t.completion_tokens.saturating_add(u.completion_tokens);
        t.cached_tokens = t.cached_tokens.saturating_add(u.cached_tokens);
        t.reasoning_tokens = t.reasoning_tokens.saturating_add(u.reasoning_tokens);
        t.estimated |= u.estimated;
    }
}

impl Scorer for Combined {
    fn calls(
        &self,
        case: &Case,
        messages: &[promptgauge_client::ChatMessage],
        answer_tokens: u64,
    ) -> super::scorer::Calls {
        self.parts
            .iter()
            .map(|p| p.calls(case, messages, answer_tokens))
            .fold(Default::default(), |a, b| a + b)
    }

    fn looks_for(&self, case: &Case) -> Option<&'static str> {
        // Its answer yields nothing only when every part's does: name what the parts look
        // for only when every part looks for the same thing.
        let wanted: Vec<Option<&'static str>> =
            self.parts.iter().map(|p| p.looks_for(case)).collect();
        match wanted.first() {
            Some(Some(first)) if wanted.iter().all(|w| *w == Some(*first)) => Some(first),
            _ => None,
        }
    }

    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a> {
        Box::pin(async move {
            let mut scores = Vec::with_capacity(self.parts.len());
            let mut judge = Vec::new();
            let mut usage = None;
            for part in &self.parts {
                match part.score(input, context).await {
                    Ok(s) => scores.push(s),
                    Err(mut e) => {
                        // One part could not score: neither can the whole.
                        judge.append(&mut e.judge);
                        add_usage(&mut usage, e.usage);
                        return Err(ScoreError {
                            message: e.message,
                            judge,
                            usage,
                            stopped: e.stopped,
                        });
                    }
                }
            }
            let values: Vec<f64> = scores.iter().map(|s| s.value).collect();
            let value = self.fold(&values, |_| true).unwrap_or(0.0);
            let parts = self.named(&scores);
            let extracted: Vec<String> =
                scores.iter().filter_map(|s| s.extracted.clone()).collect();
            let detail = serde_json::json!({
                "of": scores.iter().map(|s| serde_json::json!({
                    "score": s.value,
                    "extracted": s.extracted,
                    "detail": s.detail,
                })).collect::<Vec<_>>()
            });
            for s in scores {
                judge.extend(s.judge);
                add_usage(&mut usage, s.usage);
            }
            Ok(Score {
                value,
                extracted: (!extracted.is_empty()).then(|| extracted.join(" | ")),
                usage,
                detail: Some(detail),
                judge,
                parts,
            })
        })
    }

    fn check(&self, case: &Case) -> Result<(), CaseError> {
        self.parts.iter().try_for_each(|p| p.check(case))
    }

    fn uses_judge(&self) -> bool {
        self.parts.iter().any(|p| p.uses_judge())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Answer, Compile, GradeSpec, SpecExt};

    #[test]
    fn all_any_and_mean_combine_the_parts() {
        let case = Case {
            expected: vec!["42".into()],
            ..promptgauge_suite::testing::case()
        };
        let number: Arc<dyn Scorer> =
            Arc::new(GradeSpec::Number { tolerance: 0.0 }.compile().unwrap());
        let exact: Arc<dyn Scorer> = Arc::new(GradeSpec::default().compile().unwrap());
        let answer = Answer {
            text: "It is 42.".into(),
            ..Answer::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let run = |how, weights: Vec<f64>| {
            let c = Combined {
                how,
                parts: vec![number.clone(), exact.clone()],
                weights,
                names: vec!["number".into(), "exact".into()],
                trajectory: vec![false, false],
            };
            rt.block_on(c.score(
                ScoreInput {
                    key: "k",
                    repeat: 0,
                    case: &case,
                    messages: &[],
                    answer: &answer,
                },
                &ScoreContext::default(),
            ))
            .unwrap()
        };
        assert_eq!(run(Combine::All, vec![1.0, 1.0]).value, 0.0);
        assert_eq!(run(Combine::Any, vec![1.0, 1.0]).value, 1.0);
        assert_eq!(run(Combine::Mean, vec![3.0, 1.0]).value, 0.75);
        let s = run(Combine::Mean, vec![1.0, 1.0]);
        assert_eq!(s.extracted.as_deref(), Some("42 | It is 42."));
        assert_eq!(s.detail.unwrap()["of"][0]["score"], 1.0);
        assert_eq!(s.parts, [("number".into(), 1.0), ("exact".into(), 0.0)]);
    }

    #[test]
    fn a_combined_score_s_parts_come_its_own_then_its_parts_then_answer_and_trajectory() {
        let own = vec![("fields".to_string(), 0.5), ("steps".to_string(), 1.0)];
        let theirs = [
            ("fields".to_string(), "steps".to_string(), 0.0),
            ("fields".to_string(), "category".to_string(), 1.0),
        ];
        // A field named as another part is kept under its part's name.
        assert_eq!(
            merged(own.clone(), theirs.clone(), [Some(0.5), Some(1.0)]),
            [
                ("fields".to_string(), 0.5),
                ("steps".to_string(), 1.0),
                ("fields.steps".to_string(), 0.0),
                ("category".to_string(), 1.0),
                ("answer".to_string(), 0.5),
                ("trajectory".to_string(), 1.0),
            ]
        );
        assert_eq!(merged(own, theirs, [None, None]).len(), 4);
        assert!(reads_both(&[true, false]));
        assert!(!reads_both(&[true, true]) && !reads_both(&[false]));
    }

    fn case(expected: serde_json::Value) -> Case {
        Case {
            id: "c".into(),
            vars: Default::default(),
            expected: vec![match &expected {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            }],
            expected_json: Some(expected).filter(|e| !e.is_string()),
            ..promptgauge_suite::testing::case()
        }
    }

    /// The score `yaml`'s scorer gives `answer` for `case`.
    fn scored(yaml: &str, case: &Case, answer: &Answer) -> Score {
        let spec: GradeSpec = serde_saphyr::from_str(yaml).unwrap();
        let scorer = spec.scorer(std::path::Path::new(".")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(scorer.score(
            ScoreInput {
                key: "k",
                repeat: 0,
                case,
                messages: &[],
                answer,
            },
            &ScoreContext::default(),
        ))
        .unwrap()
    }

    fn names(s: &Score) -> Vec<&str> {
        s.parts.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn parts_go_by_their_name_or_their_kind_numbered_from_the_second() {
        let c = case(serde_json::json!("42"));
        let answer = Answer {
            text: "42".into(),
            ..Answer::default()
        };
        let s = scored(
            "{kind: all, of: [{kind: exact}, {kind: number, name: close enough}, {kind: regex, pattern: '\\d+'}, {kind: regex, pattern: '^4'}, {kind: regex, pattern: 'x'}]}",
            &c,
            &answer,
        );
        assert_eq!(
            names(&s),
            ["exact", "close enough", "regex", "regex 2", "regex 3"]
        );
        let values: Vec<f64> = s.parts.iter().map(|p| p.1).collect();
        assert_eq!(values, [1.0, 1.0, 1.0, 1.0, 0.0]);
        assert_eq!(s.value, 0.0, "all: the lowest part");
        // A name a part is given is never another's by kind: the unnamed `exact`s skip
        // `exact 2`, and an unnamed part does not take the name a later one is given.
        let s = scored(
            "{kind: any, of: [{kind: exact, name: exact 2}, {kind: exact}, {kind: exact}]}",
            &c,
            &answer,
        );
        assert_eq!(names(&s), ["exact 2", "exact", "exact 3"]);
        assert_eq!(s.value, 1.0);
        let s = scored(
            "{kind: all, of: [{kind: exact}, {kind: regex, pattern: 'x', name: exact}]}",
            &c,
            &answer,
        );
        assert_eq!(
            s.parts,
            [("exact 2".to_string(), 1.0), ("exact".to_string(), 0.0)]
        );
    }

    #[test]
    fn a_part_s_own_parts_follow_under_their_names_or_their_part_s_when_taken() {
        let c = case(serde_json::json!({"category": "billing", "priority": "high"}));
        let answer = Answer {
            text: r#"{"category": "billing", "priority": "low"}"#.into(),
            ..Answer::default()
        };
        let s = scored(
            "{kind: mean, of: [{kind: fields, name: triage}, {kind: json_schema, name: priority, schema: {type: object}}]}",
            &c,
            &answer,
        );
        // `priority` is the schema part's name already: the field of that name goes by its
        // part's, never lost nor mistaken for the schema's.
        assert_eq!(
            names(&s),
            ["triage", "priority", "category", "triage.priority"]
        );
        assert_eq!(
            s.parts,
            [
                ("triage".to_string(), 0.5),
                ("priority".to_string(), 1.0),
                ("category".to_string(), 1.0),
                ("triage.priority".to_string(), 0.0)
            ]
        );
        assert_eq!(s.value, 0.75);
    }

    fn steps(tools: &[(&str, &str)]) -> Vec<promptgauge_suite::tools::ToolStep> {
        tools
            .iter()
            .enumerate()
            .map(|(i, (tool, args))| promptgauge_suite::tools::ToolStep {
                turn: i as u32,
                tool: tool.to_string(),
                arguments: args.to_string(),
                result: "ok".into(),
                error: false,
                call_id: String::new(),
            })
            .collect()
    }

    #[test]
    fn an_agent_s_answer_and_trajectory_are_parts_made_as_the_whole_is() {
        let c = case(serde_json::json!("wear a coat"));
        let answer = Answer {
            text: "wear a coat".into(),
            steps: steps(&[("get_weather", r#"{"city": "Oslo"}"#), ("search", "{}")]),
            ..Answer::default()
        };
        let all = "{kind: all, of: [{kind: exact}, {kind: contains}, {kind: tool_args, tool: get_weather, args: {city: Oslo}}, {kind: tool_args, tool: search, args: {q: coat}}, {kind: max_steps, steps: 3}]}";
        let s = scored(all, &c, &answer);
        assert_eq!(
            names(&s),
            [
                "exact",
                "contains",
                "tool_args",
                "tool_args 2",
                "max_steps",
                "answer",
                "trajectory"
            ]
        );
        let part = |s: &Score, name: &str| s.parts.iter().find(|(n, _)| n == name).unwrap().1;
        // `all`: the answer's parts both pass; one of the trajectory's fails.
        assert_eq!(part(&s, "answer"), 1.0);
        assert_eq!(part(&s, "trajectory"), 0.0);
        assert_eq!(s.value, 0.0);
        // `mean`: each side is the weighted mean of its own parts.
        let mean = "{kind: mean, weights: [3, 1, 1, 1, 2], of: [{kind: exact}, {kind: regex, pattern: 'x'}, {kind: tool_args, tool: get_weather, args: {city: Oslo}}, {kind: tool_args, tool: search, args: {q: coat}}, {kind: max_steps, steps: 3}]}";
        let s = scored(mean, &c, &answer);
        assert_eq!(part(&s, "answer"), 0.75);
        assert_eq!(part(&s, "trajectory"), 0.75);
        assert_eq!(s.value, (3.0 + 1.0 + 2.0) / 8.0);
        // Parts that all read the answer, or all the trajectory, make no such pair.
        let s = scored(
            "{kind: all, of: [{kind: exact}, {kind: contains}]}",
            &c,
            &answer,
        );
        assert_eq!(names(&s), ["exact", "contains"]);
        let s = scored(
            "{kind: all, of: [{kind: tool_sequence, tools: [get_weather, search]}, {kind: max_steps, steps: 1}]}",
            &c,
            &answer,
        );
        assert_eq!(names(&s), ["tool_sequence", "max_steps"]);
        // A part named `answer` keeps its name; the made one is not added under it.
        let s = scored(
            "{kind: all, of: [{kind: regex, pattern: 'x', name: answer}, {kind: max_steps, steps: 3}]}",
            &c,
            &answer,
        );
        assert_eq!(names(&s), ["answer", "max_steps", "trajectory"]);
        assert_eq!(part(&s, "answer"), 0.0);
    }
}
