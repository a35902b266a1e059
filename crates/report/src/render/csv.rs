//! `summary.csv`: one row per variant (per cell of the grid in a run of several endpoints),
//! for spreadsheets.

use crate::compare::{Axis, Comparison};
use crate::{Exporter, Summary, VariantSummary};

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

    fn render(&self, summary: &Summary) -> Result<String, crate::ReportError> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let (judged, grid) = (summary.run.judge.is_some(), summary.is_grid());
        w.write_record(header(summary))?;
        for v in &summary.variants {
            let on = |axis: Axis| {
                summary.comparisons.iter().find(|c| {
                    c.variant == v.name && c.family.as_ref().is_none_or(|f| f.axis == axis)
                })
            };
            let mut row = row(summary, v, on(Axis::Variants));
            if judged {
                row.extend(judge_cells(summary, v));
            }
            if grid {
                row.extend(grid_cells(v, on(Axis::Endpoints)));
            }
            w.write_record(&row)?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| crate::ReportError::Encode(e.error().to_string()))?;
        String::from_utf8(bytes).map_err(|e| crate::ReportError::Encode(e.to_string()))
    }
}

/// The header: the judge's columns with a judge, the grid's in a run of several
/// endpoints.
fn header(summary: &Summary) -> Vec<&str> {
    // A scored run's headline is the mean score, not accuracy: the column says which.
    let mut header: Vec<&str> = HEADER
        .iter()
        .map(|h| match *h {
            "accuracy" => summary.measure(),
            "cost_per_correct_usd" if summary.is_scored() => "cost_per_point_usd",
            _ => h,
        })
        .collect();
    if summary.run.judge.is_some() {
        header.extend(JUDGE_HEADER);
    }
    if summary.is_grid() {
        header.extend(GRID_HEADER);
    }
    header
}

/// A variant's row under [`HEADER`], `c` its comparison with the baseline.
fn row(summary: &Summary, v: &VariantSummary, c: Option<&Comparison>) -> Vec<String> {
    // The cell's endpoint's model, in a run of several.
    let model = summary
        .run
        .endpoints
        .iter()
        .find(|e| e.endpoint.is_some() && e.endpoint == v.endpoint)
        .unwrap_or(&summary.run.provider);
    vec![
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
        num(summary.cost_per(v)),
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
    ]
}

/// A variant's cells under [`JUDGE_HEADER`].
fn judge_cells(summary: &Summary, v: &VariantSummary) -> [String; 10] {
    let l = v.labelled.as_ref();
    [
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
    ]
}

/// A cell's cells under [`GRID_HEADER`], `m` its comparison across endpoints.
fn grid_cells(v: &VariantSummary, m: Option<&Comparison>) -> [String; 8] {
    let m = m.filter(|m| m.family.is_some());
    [
        v.endpoint.clone().unwrap_or_default(),
        v.variant.clone().unwrap_or_default(),
        m.map(|m| m.against.clone()).unwrap_or_default(),
        num(m.and_then(|m| m.difference)),
        num(m.and_then(|m| m.ci_low)),
        num(m.and_then(|m| m.ci_high)),
        num(m.and_then(|m| m.p_holm)),
        m.map(|m| m.verdict.words().to_string()).unwrap_or_default(),
    ]
}
