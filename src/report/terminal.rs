//! The table printed at the end of a run.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use super::compare::{RunComparison, RunSide};
use super::{Summary, interval, millis, notes, pct, usd};

/// Renders the summary for a terminal (or a log when not one).
pub(crate) fn render(s: &Summary) -> String {
    let conf = (s.run.confidence * 100.0).round();
    let mut table = Table::new();
    table
        .load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(vec![
            "variant".to_string(),
            s.measure().to_string(),
            format!("{conf}% CI"),
            s.count_label().to_string(),
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
            pct(v.headline().0),
            interval(v.headline().1, v.headline().2),
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
    if !s.comparisons.is_empty() {
        out.push_str(&comparison_table(s));
        out.push('\n');
        for c in &s.comparisons {
            out.push_str(&c.sentence);
            out.push('\n');
        }
        if let Some(note) = super::compare::levels_note(&s.comparisons, s.run.confidence) {
            out.push_str(&note);
            out.push('\n');
        }
    }
    if let Some(d) = &s.detectable {
        out.push_str(&d.sentence(s.run.confidence));
        out.push('\n');
    }
    if !s.slices.is_empty() {
        out.push_str(&slice_table(s));
        out.push('\n');
    }
    if let Some(judge) = &s.run.judge {
        out.push_str(&judge_table(s, judge));
        out.push('\n');
    }
    for r in &s.replicas {
        out.push_str(&format!(
            "replica {}: {} attempts, {} answered, {} failed, latency p50 {} p90 {}\n",
            r.base_url,
            r.attempts,
            r.answered,
            r.failed,
            millis(r.latency_ms.p50),
            millis(r.latency_ms.p90)
        ));
    }
    for note in notes(s) {
        out.push_str(&note);
        out.push('\n');
    }
    if !s.failures.is_empty() {
        out.push_str("Why jobs failed:\n");
        for line in super::causes::lines(&s.failures) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out
}

fn table(header: Vec<String>) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header);
    t
}

fn comparison_table(s: &Summary) -> String {
    let baseline = s.variants.first().map_or("baseline", |v| v.name.as_str());
    let mut t = table(vec![
        format!("vs {baseline}"),
        "both right".into(),
        "only variant".into(),
        format!("only {baseline}"),
        "both wrong".into(),
        "difference".into(),
        super::compare::ci_header(&s.comparisons, s.run.confidence),
        "p (Holm)".into(),
        "verdict".into(),
    ]);
    for c in &s.comparisons {
        let mut row = vec![c.variant.clone()];
        row.extend(c.cells());
        t.add_row(row);
    }
    for i in 1..8 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    t.to_string()
}

/// Who judged, what it cost, and (with labels) how it fared against people.
fn judge_table(s: &Summary, judge: &super::ProviderInfo) -> String {
    let labelled = s.variants.iter().any(|v| v.labelled.is_some());
    let mut header = vec![
        "judged by".to_string(),
        "calls".into(),
        "tokens in/out".into(),
        "cost".into(),
        "votes agree".into(),
    ];
    if labelled {
        header.extend([
            "labels".to_string(),
            "agrees with people".into(),
            "κ".into(),
            format!("{} as people would score", s.measure()),
        ]);
    }
    let mut t = table(header);
    for v in &s.variants {
        let tokens = v.judge_tokens.unwrap_or_default();
        let mut row = vec![
            format!("{} ← {}", v.name, judge.model),
            v.judge_calls.to_string(),
            format!("{} / {}", tokens.prompt, tokens.completion),
            usd(v.judge_cost_usd),
            pct(v.judge_agreement),
        ];
        if labelled {
            match &v.labelled {
                Some(l) => row.extend([
                    l.labels.to_string(),
                    format!(
                        "{} {}",
                        pct(l.agreement),
                        interval(l.agreement_low, l.agreement_high)
                    ),
                    l.kappa.map_or("–".into(), |k| format!("{k:.2}")),
                    format!(
                        "{} {}",
                        pct(l.corrected),
                        interval(l.corrected_low, l.corrected_high)
                    ),
                ]),
                None => row.extend(["0".to_string(), "–".into(), "–".into(), "–".into()]),
            }
        }
        t.add_row(row);
    }
    t.to_string()
}

fn slice_table(s: &Summary) -> String {
    let mut header = vec!["tag".to_string()];
    header.extend(s.variants.iter().map(|v| v.name.clone()));
    let mut t = table(header);
    for chunk in s.slices.chunks(s.variants.len().max(1)) {
        let mut row = vec![chunk[0].tag.clone()];
        row.extend(chunk.iter().map(|sl| {
            format!(
                "{} {} n={}",
                pct(sl.accuracy),
                interval(sl.ci_low, sl.ci_high),
                sl.n
            )
        }));
        t.add_row(row);
    }
    t.to_string()
}

/// Renders `promptgauge compare` for a terminal.
pub(crate) fn render_comparison(c: &RunComparison) -> String {
    let side = |label: &str, s: &RunSide| {
        format!(
            "{label}: {} — model {}{} at {} ({})\n",
            s.dir,
            s.model,
            if s.simulated { " (SIMULATED)" } else { "" },
            s.base_url,
            s.started_at
        )
    };
    let mut out = side("A", &c.run_a) + &side("B", &c.run_b);
    let mut t = table(vec![
        "variant".into(),
        "accuracy A".into(),
        "accuracy B".into(),
        "B − A".into(),
        super::compare::ci_header(c.variants.iter().map(|v| &v.comparison), c.confidence),
        "p (Holm)".into(),
        "verdict".into(),
        "latency p50 A / B".into(),
        "p90 A / B".into(),
        "cost A / B".into(),
    ]);
    for v in &c.variants {
        let [.., difference, ci, p, verdict] = v.comparison.cells();
        t.add_row(vec![
            v.name.clone(),
            format!(
                "{} {}",
                pct(v.a.accuracy),
                interval(v.a.ci_low, v.a.ci_high)
            ),
            format!(
                "{} {}",
                pct(v.b.accuracy),
                interval(v.b.ci_low, v.b.ci_high)
            ),
            difference,
            ci,
            p,
            verdict,
            format!(
                "{} / {}",
                millis(v.a.latency_ms.p50),
                millis(v.b.latency_ms.p50)
            ),
            format!(
                "{} / {}",
                millis(v.a.latency_ms.p90),
                millis(v.b.latency_ms.p90)
            ),
            format!("{} / {}", usd(v.a.cost_usd), usd(v.b.cost_usd)),
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    for v in &c.variants {
        out.push_str(&v.comparison.sentence);
        out.push('\n');
    }
    if let Some(note) =
        super::compare::levels_note(c.variants.iter().map(|v| &v.comparison), c.confidence)
    {
        out.push_str(&note);
        out.push('\n');
    }
    for line in coverage_notes(c) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// What the two runs do not share, said out loud.
pub(crate) fn coverage_notes(c: &RunComparison) -> Vec<String> {
    let list = |ids: &[String]| {
        let shown: Vec<&str> = ids.iter().take(10).map(String::as_str).collect();
        let more = if ids.len() > 10 {
            format!(" and {} more", ids.len() - 10)
        } else {
            String::new()
        };
        format!("{}{more}", shown.join(", "))
    };
    let mut notes = Vec::new();
    if !c.cases_only_in_a.is_empty() {
        notes.push(format!(
            "{} cases only in A, not compared: {}",
            c.cases_only_in_a.len(),
            list(&c.cases_only_in_a)
        ));
    }
    if !c.cases_only_in_b.is_empty() {
        notes.push(format!(
            "{} cases only in B, not compared: {}",
            c.cases_only_in_b.len(),
            list(&c.cases_only_in_b)
        ));
    }
    if !c.cases_changed.is_empty() {
        notes.push(format!(
            "WARNING: {} cases have the same id but different content in A and B (variables, expected answer, grader, history or group), so they pair different questions: {}",
            c.cases_changed.len(),
            list(&c.cases_changed)
        ));
    }
    if !c.variants_only_in_a.is_empty() {
        notes.push(format!(
            "variants only in A: {}",
            c.variants_only_in_a.join(", ")
        ));
    }
    if !c.variants_only_in_b.is_empty() {
        notes.push(format!(
            "variants only in B: {}",
            c.variants_only_in_b.join(", ")
        ));
    }
    if c.run_a.simulated || c.run_b.simulated {
        notes.push("A SIMULATED run is part of this comparison.".to_string());
    }
    notes
}
