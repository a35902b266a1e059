//! Scorers of an agent loop's trajectory (docs/guide/tools.md): which tools it called and
//! in what order (`tool_sequence`), with which arguments (`tool_args`), and in how many
//! calls (`max_steps`). Each reads the loop's steps, never the final answer's text; each is
//! a pass or a fail, and combines with the others and with answer scorers as every scorer
//! does (`all`, `any`, `mean`).

use super::scorer::{ScoreFuture, ScoreInput, Scorer, ready};
use super::{Score, ScoreContext};

use promptgauge_suite::grading::SequenceOrder;
use promptgauge_suite::tools::args_hold;
use serde_json::Value;

/// `tool_sequence`.
#[derive(Debug)]
pub(crate) struct ToolSequence {
    pub(crate) tools: Vec<String>,
    pub(crate) order: SequenceOrder,
}

impl Scorer for ToolSequence {
    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let made: Vec<&str> = input.answer.steps.iter().map(|s| s.tool.as_str()).collect();
        let pass = match self.order {
            SequenceOrder::InOrder => {
                let mut rest = made.iter();
                self.tools.iter().all(|t| rest.any(|m| m == t))
            }
            SequenceOrder::AnyOrder => {
                let (mut want, mut got) = (self.tools.clone(), made.clone());
                want.sort();
                got.sort_unstable();
                want.iter().map(String::as_str).eq(got.iter().copied())
            }
            SequenceOrder::Subset => self.tools.iter().all(|t| made.contains(&t.as_str())),
        };
        ready(Score::binary(pass, Some(made.join(" → "))))
    }
}

/// `tool_args`.
#[derive(Debug)]
pub(crate) struct ToolArgs {
    pub(crate) tool: String,
    pub(crate) args: Value,
}

impl Scorer for ToolArgs {
    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let calls: Vec<&str> = input
            .answer
            .steps
            .iter()
            .filter(|s| s.tool == self.tool)
            .map(|s| s.arguments.as_str())
            .collect();
        let pass = calls
            .iter()
            .any(|a| serde_json::from_str::<Value>(a).is_ok_and(|got| args_hold(&self.args, &got)));
        let extracted = (!calls.is_empty()).then(|| {
            calls
                .iter()
                .map(|a| format!("{}({a})", self.tool))
                .collect::<Vec<_>>()
                .join("; ")
        });
        ready(Score::binary(pass, extracted))
    }
}

/// `max_steps`.
#[derive(Debug)]
pub(crate) struct MaxSteps {
    pub(crate) steps: u32,
}

impl Scorer for MaxSteps {
    fn score<'a>(&'a self, input: ScoreInput<'a>, _: &'a ScoreContext) -> ScoreFuture<'a> {
        let made = input.answer.steps.len();
        ready(Score::binary(
            made <= self.steps as usize,
            Some(format!("{made} calls")),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Answer;
    use promptgauge_suite::tools::ToolStep;

    fn steps(calls: &[(&str, &str)]) -> Answer {
        Answer {
            steps: calls
                .iter()
                .enumerate()
                .map(|(i, (tool, args))| ToolStep {
                    turn: i as u32,
                    tool: tool.to_string(),
                    arguments: args.to_string(),
                    result: String::new(),
                    error: false,
                    call_id: String::new(),
                })
                .collect(),
            ..Answer::default()
        }
    }

    async fn value(scorer: &dyn Scorer, answer: &Answer) -> f64 {
        let case = promptgauge_suite::Case {
            location: promptgauge_suite::FilePos::line(std::path::Path::new("c.jsonl"), 1),
            ..promptgauge_suite::testing::case()
        };
        let input = ScoreInput {
            key: "k",
            repeat: 0,
            case: &case,
            messages: &[],
            answer,
        };
        scorer
            .score(input, &ScoreContext::default())
            .await
            .unwrap()
            .value
    }

    #[tokio::test]
    async fn a_trajectory_is_scored_by_its_calls() {
        let made = steps(&[
            ("search", r#"{"q": "rain"}"#),
            ("get_weather", r#"{"city": "Oslo", "unit": "c"}"#),
            ("search", r#"{"q": "umbrella"}"#),
        ]);
        let seq = |tools: &[&str], order| ToolSequence {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            order,
        };
        use SequenceOrder::*;
        assert_eq!(
            value(&seq(&["search", "get_weather"], InOrder), &made).await,
            1.0
        );
        assert_eq!(
            value(&seq(&["get_weather", "search"], InOrder), &made).await,
            1.0
        );
        assert_eq!(
            value(&seq(&["get_weather", "get_weather"], InOrder), &made).await,
            0.0
        );
        assert_eq!(
            value(&seq(&["search", "search", "get_weather"], AnyOrder), &made).await,
            1.0
        );
        assert_eq!(
            value(&seq(&["search", "get_weather"], AnyOrder), &made).await,
            0.0
        );
        assert_eq!(value(&seq(&["get_weather"], Subset), &made).await, 1.0);
        assert_eq!(value(&seq(&["book"], Subset), &made).await, 0.0);
        let args = |tool: &str, args: Value| ToolArgs {
            tool: tool.into(),
            args,
        };
        assert_eq!(
            value(
                &args("get_weather", serde_json::json!({"city": "Oslo"})),
                &made
            )
            .await,
            1.0
        );
        assert_eq!(
            value(
                &args("get_weather", serde_json::json!({"city": "Lima"})),
                &made
            )
            .await,
            0.0
        );
        assert_eq!(
            value(&args("search", serde_json::json!({"q": "umbrella"})), &made).await,
            1.0
        );
        // Paths into the arguments: a JSON Pointer, or a JSONPath.
        assert_eq!(
            value(
                &args("get_weather", serde_json::json!({"/city": "Oslo"})),
                &made
            )
            .await,
            1.0
        );
        assert_eq!(
            value(
                &args("get_weather", serde_json::json!({"$.city": "Lima"})),
                &made
            )
            .await,
            0.0
        );
        assert_eq!(value(&MaxSteps { steps: 3 }, &made).await, 1.0);
        assert_eq!(value(&MaxSteps { steps: 2 }, &made).await, 0.0);
    }
}
