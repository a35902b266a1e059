//! `summary.md`: the table as Markdown, for pull requests and step summaries.

use super::compare::RunComparison;
use super::{Exporter, Summary, interval, millis, notes, pct, usd};

/// `summary.md`, also what `--markdown` appends.
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
        if !s.failures.is_empty() {
            out.push_str("## Why jobs failed\n\n");
            for line in super::causes::lines(&s.failures) {
                out.push_str(&format!("- {}\n", line.replace("\n    → ", " — ")));
            }
            out.push('\n');
        }
        let measure = s.measure();
        out.push_str(&format!(
            "| variant | {measure} | {conf}% CI | {} | failed | TTFT p50 | latency p50 / p90 / p99 | tokens in / out | cost | cost per correct |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            s.count_label().replace('/', " / ")
        ));
        for v in &s.variants {
            let est = if v.tokens.estimated { "~" } else { "" };
            out.push_str(&format!(
                "| {}{} | {} | {} | {} / {} | {} | {} | {} / {} / {} | {est}{} / {est}{} | {} | {} |\n",
                v.name,
                if v.baseline { " (baseline)" } else { "" },
                pct(v.headline().0),
                interval(v.headline().1, v.headline().2),
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
        if !s.comparisons.is_empty() {
            let baseline = s.variants.first().map_or("baseline", |v| v.name.as_str());
            out.push_str(&format!(
                "\n## Paired against {baseline}\n\n| variant | both right | only variant | only {baseline} | both wrong | difference | {} | p (Holm) | verdict |\n|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
                super::compare::ci_header(&s.comparisons, s.run.confidence)
            ));
            for c in &s.comparisons {
                let [both, only_v, only_r, neither, difference, ci, p, verdict] = c.cells();
                out.push_str(&format!(
                    "| {} | {both} | {only_v} | {only_r} | {neither} | {difference} | {ci} | {p} | **{verdict}** |\n",
                    c.variant
                ));
            }
            out.push('\n');
            for c in &s.comparisons {
                out.push_str(&format!("- {}\n", c.sentence));
            }
            if let Some(note) = super::compare::levels_note(&s.comparisons, s.run.confidence) {
                out.push_str(&format!("\n{note}\n"));
            }
        }
        if let Some(d) = &s.detectable {
            out.push_str(&format!("\n{}\n", d.sentence(s.run.confidence)));
        }
        if let Some(judge) = &s.run.judge {
            out.push_str(&format!(
                "\n## Judge\n\nJudged by `{}` at {}.\n\n| variant | calls | tokens in / out | cost | votes agree | labels | agrees with people | kappa | passes what people fail | fails what people pass | {} as people would score |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
                judge.model,
                judge.base_url,
                s.measure()
            ));
            for v in &s.variants {
                let t = v.judge_tokens.unwrap_or_default();
                let l = v.labelled.as_ref();
                out.push_str(&format!(
                    "| {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                    v.name,
                    v.judge_calls,
                    t.prompt,
                    t.completion,
                    usd(v.judge_cost_usd),
                    pct(v.judge_agreement),
                    l.map_or(0, |l| l.labels),
                    l.map_or("–".into(), |l| format!(
                        "{} {}",
                        pct(l.agreement),
                        interval(l.agreement_low, l.agreement_high)
                    )),
                    l.and_then(|l| l.kappa)
                        .map_or("–".into(), |k| format!("{k:.2}")),
                    pct(l.and_then(|l| l.judge_passes_people_fail)),
                    pct(l.and_then(|l| l.judge_fails_people_pass)),
                    l.map_or("–".into(), |l| format!(
                        "{} {}",
                        pct(l.corrected),
                        interval(l.corrected_low, l.corrected_high)
                    )),
                ));
            }
        }
        if !s.replicas.is_empty() {
            out.push_str("\n## Replicas\n\n| base URL | attempts | answered | failed | latency p50 | p90 |\n|---|---:|---:|---:|---:|---:|\n");
            for r in &s.replicas {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} |\n",
                    r.base_url,
                    r.attempts,
                    r.answered,
                    r.failed,
                    millis(r.latency_ms.p50),
                    millis(r.latency_ms.p90)
                ));
            }
        }
        if !s.gates.is_empty() {
            out.push_str("\n## Gates\n\n");
            for g in &s.gates {
                let mark = if g.passed {
                    "✅ passed"
                } else {
                    "❌ **failed**"
                };
                out.push_str(&format!("- {mark} `{}`: {}\n", g.gate, g.reason));
            }
        }
        if !s.slices.is_empty() {
            out.push_str(&format!(
                "\n## By tag\n\n| tag | variant | {} | CI | {} |\n|---|---|---:|---:|---:|\n",
                s.measure(),
                s.count_label().replace('/', " / ")
            ));
            for sl in &s.slices {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} / {} |\n",
                    sl.tag,
                    sl.variant,
                    pct(sl.accuracy),
                    interval(sl.ci_low, sl.ci_high),
                    sl.correct,
                    sl.n
                ));
            }
        }
        Ok(out)
    }
}

/// `compare.md`: two runs side by side.
pub(crate) fn render_comparison(c: &RunComparison) -> String {
    let comparisons = || c.variants.iter().map(|v| &v.comparison);
    let ci = super::compare::ci_header(comparisons(), c.confidence);
    let mut out = format!(
        "# promptgauge compare\n\n- **A**: `{}`, model `{}` at {}\n- **B**: `{}`, model `{}` at {}\n\n| variant | accuracy A | accuracy B | B − A | {ci} | p (Holm) | verdict | latency p50 A / B | p90 A / B | cost A / B |\n|---|---:|---:|---:|---:|---:|---|---:|---:|---:|\n",
        c.run_a.dir, c.run_a.model, c.run_a.base_url, c.run_b.dir, c.run_b.model, c.run_b.base_url,
    );
    for v in &c.variants {
        let [.., difference, ci, p, verdict] = v.comparison.cells();
        out.push_str(&format!(
            "| {} | {} {} | {} {} | {difference} | {ci} | {p} | **{verdict}** | {} / {} | {} / {} | {} / {} |\n",
            v.name,
            pct(v.a.accuracy),
            interval(v.a.ci_low, v.a.ci_high),
            pct(v.b.accuracy),
            interval(v.b.ci_low, v.b.ci_high),
            millis(v.a.latency_ms.p50),
            millis(v.b.latency_ms.p50),
            millis(v.a.latency_ms.p90),
            millis(v.b.latency_ms.p90),
            usd(v.a.cost_usd),
            usd(v.b.cost_usd),
        ));
    }
    out.push('\n');
    for v in &c.variants {
        out.push_str(&format!("- {}\n", v.comparison.sentence));
    }
    if let Some(note) = super::compare::levels_note(comparisons(), c.confidence) {
        out.push_str(&format!("\n{note}\n"));
    }
    for note in super::terminal::coverage_notes(c) {
        out.push_str(&format!("\n> {note}\n"));
    }
    out
}
