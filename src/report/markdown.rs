//! `summary.md`: the table as Markdown, for pull requests and step summaries.

use super::{Exporter, Summary, interval, millis, notes, pct, usd};

pub struct Markdown;

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "summary.md"
    }

    fn render(&self, s: &Summary) -> anyhow::Result<String> {
        let conf = (s.run.confidence * 100.0).round();
        let mut out = format!(
            "# promptgauge: {}\n\n{} cases × {} variants on `{}` at {} ({} to {}).\n\n",
            s.run.bench,
            s.run.cases,
            s.variants.len(),
            s.run.provider.model,
            s.run.provider.base_url,
            s.run.started_at,
            s.run.finished_at.as_deref().unwrap_or("unfinished"),
        );
        for note in notes(s) {
            out.push_str(&format!("> **{note}**\n\n"));
        }
        out.push_str(&format!(
            "| variant | accuracy | {conf}% CI | correct / n | failed | TTFT p50 | latency p50 / p90 / p99 | tokens in / out | cost | cost per correct |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        ));
        for v in &s.variants {
            let est = if v.tokens.estimated { "~" } else { "" };
            out.push_str(&format!(
                "| {}{} | {} | {} | {} / {} | {} | {} | {} / {} / {} | {est}{} / {est}{} | {} | {} |\n",
                v.name,
                if v.baseline { " (baseline)" } else { "" },
                pct(v.accuracy),
                interval(v.ci_low, v.ci_high),
                v.correct,
                v.n,
                v.failed,
                millis(v.ttft_ms.p50),
                millis(v.latency_ms.p50),
                millis(v.latency_ms.p90),
                millis(v.latency_ms.p99),
                v.tokens.prompt,
                v.tokens.completion,
                usd(v.cost_usd),
                usd(v.cost_per_correct_usd),
            ));
        }
        Ok(out)
    }
}
