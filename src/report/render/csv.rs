//! `summary.csv`: one row per variant (per cell of the grid in a run of several endpoints),
//! for spreadsheets.

use crate::report::{Exporter, Summary};

pub(super) struct Csv;

const HEADER: [&str; 40] = [
    "variant",
    "baseline",
    "jobs",
    "n",
    "correct",
    "accuracy",
    "ci_low",
    "ci_high",
    "failed",
    "truncated",
    "attempts",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "output_tokens_per_s",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "tokens_estimated",
    "cost_usd",
    "cost_per_correct_usd",
    "model",
    "simulated",
    "design_effect",
    "difference_vs_baseline",
    "difference_ci_low",
    "difference_ci_high",
    "p_value",
    "p_holm",
    "verdict",
    "difference_ci_level",
    "answer_p50_ms",
    "answer_p90_ms",
    "answer_p99_ms",
    "spent_usd",
    "spent_estimated",
];

/// Columns added when a judge scored the run.
const JUDGE_HEADER: [&str; 10] = [
    "judge_model",
    "judge_calls",
    "judge_cost_usd",
    "judge_votes_agree",
    "labels",
    "judge_agrees_with_people",
    "judge_kappa",
    "corrected",
    "corrected_low",
    "corrected_high",
];

/// Columns added in a run of several endpoints: the cell's endpoint and variant, and its
/// comparison on the second axis (the same variant at the baseline endpoint: "which
/// model"). The comparison columns before them are then the first axis' ("which prompt":
/// the baseline variant at the same endpoint).
const GRID_HEADER: [&str; 8] = [
    "endpoint",
    "variant_only",
    "vs_baseline_endpoint",
    "endpoint_difference",
    "endpoint_ci_low",
    "endpoint_ci_high",
    "endpoint_p_holm",
    "endpoint_verdict",
];

/// A number as a CSV cell: empty when there is none.
pub(crate) fn num(x: Option<f64>) -> String {
    x.map(|x| format!("{x}")).unwrap_or_default()
}

impl Exporter for Csv {
    fn file_name(&self) -> &'static str {
        "summary.csv"
    }

    fn render(&self, summary: &Summary) -> Result<String, crate::report::ReportError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        // A scored run's headline is the mean score, not accuracy: the column says which.
        let judged = summary.run.judge.is_some();
        let mut header: Vec<&str> = HEADER
            .iter()
            .map(|h| {
                if *h == "accuracy" {
                    summary.measure()
                } else {
                    h
                }
            })
            .collect();
        if judged {
            header.extend(JUDGE_HEADER);
        }
        let grid = summary.is_grid();
        if grid {
            header.extend(GRID_HEADER);
        }
        w.write_record(&header)?;
        use crate::report::compare::Axis;
        for v in &summary.variants {
            let on = |axis: Axis| {
                summary.comparisons.iter().find(|c| {
                    c.variant == v.name && c.family.as_ref().is_none_or(|f| f.axis == axis)
                })
            };
            let c = on(Axis::Variants);
            // The cell's endpoint's model, in a run of several.
            let model = summary
                .run
                .endpoints
                .iter()
                .find(|e| e.endpoint.is_some() && e.endpoint == v.endpoint)
                .unwrap_or(&summary.run.provider);
            let mut row = vec![
                v.name.clone(),
                v.baseline.to_string(),
                v.jobs.to_string(),
                v.n.to_string(),
                v.correct.to_string(),
                num(v.headline().0),
                num(v.headline().1),
                num(v.headline().2),
                v.failed.to_string(),
                v.truncated.to_string(),
                v.attempts.to_string(),
                num(v.ttft_ms.p50),
                num(v.ttft_ms.p90),
                num(v.ttft_ms.p99),
                num(v.latency_ms.p50),
                num(v.latency_ms.p90),
                num(v.latency_ms.p99),
                num(v.output_tokens_per_s),
                v.tokens.prompt.to_string(),
                v.tokens.completion.to_string(),
                v.tokens.cached.to_string(),
                v.tokens.reasoning.to_string(),
                v.tokens.estimated.to_string(),
                num(v.cost_usd),
                num(v.cost_per_correct_usd),
                model.model.clone(),
                model.simulated.to_string(),
                num(v.design_effect),
                num(c.and_then(|c| c.difference)),
                num(c.and_then(|c| c.ci_low)),
                num(c.and_then(|c| c.ci_high)),
                num(c.and_then(|c| c.p_value)),
                num(c.and_then(|c| c.p_holm)),
                c.map(|c| c.verdict.words().to_string()).unwrap_or_default(),
                num(c.and_then(|c| c.ci_level)),
                num(v.answer_ms.p50),
                num(v.answer_ms.p90),
                num(v.answer_ms.p99),
                num(v.spent_usd),
                v.spent_estimated.to_string(),
            ];
            if judged {
                let l = v.labelled.as_ref();
                row.extend([
                    summary
                        .run
                        .judge
                        .as_ref()
                        .map(|j| j.model.clone())
                        .unwrap_or_default(),
                    v.judge_calls.to_string(),
                    num(v.judge_cost_usd),
                    num(v.judge_agreement),
                    l.map_or(String::new(), |l| l.labels.to_string()),
                    num(l.and_then(|l| l.agreement)),
                    num(l.and_then(|l| l.kappa)),
                    num(l.and_then(|l| l.corrected)),
                    num(l.and_then(|l| l.corrected_low)),
                    num(l.and_then(|l| l.corrected_high)),
                ]);
            }
            if grid {
                let m = on(Axis::Endpoints).filter(|m| m.family.is_some());
                row.extend([
                    v.endpoint.clone().unwrap_or_default(),
                    v.variant.clone().unwrap_or_default(),
                    m.map(|m| m.against.clone()).unwrap_or_default(),
                    num(m.and_then(|m| m.difference)),
                    num(m.and_then(|m| m.ci_low)),
                    num(m.and_then(|m| m.ci_high)),
                    num(m.and_then(|m| m.p_holm)),
                    m.map(|m| m.verdict.words().to_string()).unwrap_or_default(),
                ]);
            }
            w.write_record(&row)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| crate::report::ReportError::Encode(e.error().to_string()))?;
        String::from_utf8(bytes).map_err(|e| crate::report::ReportError::Encode(e.to_string()))
    }
}
