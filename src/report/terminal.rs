//! The table printed at the end of a run.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::{Summary, interval, millis, notes, pct, usd};

/// Renders the summary for a terminal (or a log when not one).
pub fn render(s: &Summary) -> String {
    let conf = (s.run.confidence * 100.0).round();
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(vec![
            "variant".to_string(),
            "accuracy".to_string(),
            format!("{conf}% CI"),
            "correct/n".to_string(),
            "failed".to_string(),
            "TTFT p50".to_string(),
            "latency p50/p90/p99".to_string(),
            "tok/s".to_string(),
            "tokens in/out".to_string(),
            "cost".to_string(),
            "$/correct".to_string(),
        ]);
    for v in &s.variants {
        let est = if v.tokens.estimated { "~" } else { "" };
        table.add_row(vec![
            format!("{}{}", v.name, if v.baseline { " *" } else { "" }),
            pct(v.accuracy),
            interval(v.ci_low, v.ci_high),
            format!("{}/{}", v.correct, v.n),
            v.failed.to_string(),
            millis(v.ttft_ms.p50),
            format!(
                "{} / {} / {}",
                millis(v.latency_ms.p50),
                millis(v.latency_ms.p90),
                millis(v.latency_ms.p99)
            ),
            v.output_tokens_per_s
                .map_or_else(|| "–".into(), |x| format!("{x:.0}")),
            format!("{est}{} / {est}{}", v.tokens.prompt, v.tokens.completion),
            usd(v.cost_usd),
            usd(v.cost_per_correct_usd),
        ]);
    }
    for i in 1..11 {
        if let Some(col) = table.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut out = format!(
        "{}: {} cases × {} variants, model {} at {}\n{table}\n* baseline\n",
        s.run.bench,
        s.run.cases,
        s.variants.len(),
        s.run.provider.model,
        s.run.provider.base_url
    );
    for note in notes(s) {
        out.push_str(&note);
        out.push('\n');
    }
    out
}
