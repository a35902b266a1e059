//! `summary.csv`: one row per variant, for spreadsheets.

use super::{Exporter, Summary};

pub(super) struct Csv;

const HEADER: [&str; 34] = [
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
];

fn num(x: Option<f64>) -> String {
    x.map(|x| format!("{x}")).unwrap_or_default()
}

impl Exporter for Csv {
    fn file_name(&self) -> &'static str {
        "summary.csv"
    }

    fn render(&self, summary: &Summary) -> anyhow::Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(HEADER)?;
        for v in &summary.variants {
            let c = summary.comparisons.iter().find(|c| c.variant == v.name);
            w.write_record([
                v.name.clone(),
                v.baseline.to_string(),
                v.jobs.to_string(),
                v.n.to_string(),
                v.correct.to_string(),
                num(v.accuracy),
                num(v.ci_low),
                num(v.ci_high),
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
                summary.run.provider.model.clone(),
                summary.run.provider.simulated.to_string(),
                num(v.design_effect),
                num(c.and_then(|c| c.difference)),
                num(c.and_then(|c| c.ci_low)),
                num(c.and_then(|c| c.ci_high)),
                num(c.and_then(|c| c.p_value)),
                num(c.and_then(|c| c.p_holm)),
                c.map(|c| c.verdict.words().to_string()).unwrap_or_default(),
            ])?;
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }
}
