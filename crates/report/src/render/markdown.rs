//! `summary.md`: the table as Markdown, for pull requests and step summaries.

pub(crate) use super::escape::md_text;
use crate::compare::RunComparison;
use crate::{Exporter, Summary, notes, tables};

/// `summary.md`, also what `--markdown` appends.
pub struct Markdown;

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "summary.md"
    }

    fn render(&self, s: &Summary) -> Result<String, crate::ReportError> {
        // A level-2 title and level-3 sections: the file goes into step summaries and pull
        // request comments beside other content, and a baseline comparison nests inside.
        let mut out = title(s);
        decisions(&mut out, s);
        for note in notes(s) {
            out.push_str(&format!("> **{}**\n\n", md_text(&note)));
        }
        figures(&mut out, s);
        details(&mut out, s);
        Ok(out)
    }
}

/// The title, and what was run where.
fn title(s: &Summary) -> String {
    if s.is_grid() {
        format!(
            "## promptgauge: {}\n\n{}: {} ({} to {}).\n\n",
            md_text(&s.run.bench),
            s.shape(),
            md_text(&s.endpoint_list().join("; ")),
            s.run.started_at,
            s.run.finished_at.as_deref().unwrap_or("unfinished"),
        )
    } else {
        format!(
            "## promptgauge: {}\n\n{} cases × {} variants on {} at {} ({} to {}).\n\n",
            md_text(&s.run.bench),
            s.run.cases,
            s.variants.len(),
            md_code(&s.run.provider.model),
            md_code(&s.run.provider.base_url),
            s.run.started_at,
            s.run.finished_at.as_deref().unwrap_or("unfinished"),
        )
    }
}

/// What a reviewer needs first: did the gates pass, and what was decided.
fn decisions(out: &mut String, s: &Summary) {
    if !s.gates.is_empty() {
        out.push_str("### Gates\n\n");
        for g in &s.gates {
            let mark = match g.outcome {
                crate::gates::GateOutcome::Passed => "✅ passed",
                crate::gates::GateOutcome::Failed => "❌ **failed**",
                crate::gates::GateOutcome::Inconclusive => "⚠️ **inconclusive**",
            };
            out.push_str(&format!(
                "- {mark} {}: {}\n",
                md_code(&g.gate),
                md_text(&g.reason)
            ));
        }
        out.push('\n');
    }
    if s.is_grid() {
        for axis in crate::compare::Axis::BOTH {
            if s.on_axis(axis).next().is_none() {
                continue;
            }
            out.push_str(&format!("### {}\n\n", axis.heading()));
            for c in s.on_axis(axis) {
                out.push_str(&format!("- {}\n", md_text(&c.sentence)));
            }
            out.push('\n');
        }
    } else if !s.comparisons.is_empty() {
        out.push_str(if s.searched() {
            "### Against the baseline (descriptions: the search's answer is the verdict)\n\n"
        } else {
            "### Verdicts\n\n"
        });
        for c in &s.comparisons {
            out.push_str(&format!("- {}\n", md_text(&c.sentence)));
        }
        out.push('\n');
    }
}

/// The tables of figures: the grid, the variants, the paired comparisons, and what
/// qualifies them.
fn figures(out: &mut String, s: &Summary) {
    if s.is_grid() {
        out.push_str("### Variants × endpoints\n\n");
        out.push_str(&tables::grid(s).markdown());
        out.push('\n');
    }
    out.push_str("### Variants\n\n");
    out.push_str(&tables::variants(s).markdown());
    if s.is_grid() {
        for axis in crate::compare::Axis::BOTH {
            if s.on_axis(axis).next().is_some() {
                out.push_str(&format!("\n#### {}\n\n", axis.heading()));
                out.push_str(&tables::paired_axis(s, axis).markdown());
            }
        }
    } else if !s.comparisons.is_empty() {
        let baseline = s.variants.first().map_or("baseline", |v| v.name.as_str());
        let baseline = md_cell(baseline);
        out.push_str(&format!("\n### Paired against {baseline}\n\n"));
        out.push_str(&tables::paired(s).markdown());
    }
    if let Some(note) = crate::compare::levels_note(&s.comparisons, s.run.confidence) {
        out.push_str(&format!("\n{note}\n"));
    }
    if let Some(d) = &s.detectable {
        out.push_str(&format!("\n{}\n", d.sentence(s.run.confidence)));
    }
    parts(out, s);
}

/// Each named part's figures per variant and its verdicts against the baseline.
fn parts(out: &mut String, s: &Summary) {
    if s.parts.is_empty() {
        return;
    }
    out.push_str(&format!(
        "\n### Parts\n\n{}",
        md_text(&super::notes::parts_intro(s))
    ));
    if let Some(line) = super::notes::parts_sequential(s) {
        out.push_str(&format!(" {}", md_text(&line)));
    }
    out.push_str("\n\n");
    out.push_str(&tables::parts(s).markdown());
    let comparisons = s.parts.iter().flat_map(|p| &p.comparisons);
    if let Some(note) = crate::compare::levels_note(comparisons, s.run.confidence) {
        out.push_str(&format!("\n{note}\n"));
    }
}

/// Why jobs failed, the judge, the replicas and the tags.
fn details(out: &mut String, s: &Summary) {
    if !s.failures.is_empty() {
        out.push_str("\n### Why jobs failed\n\n");
        for line in crate::causes::lines(&s.failures) {
            out.push_str(&format!(
                "- {}\n",
                md_text(&line.replace("\n    → ", " — "))
            ));
        }
    }
    if let Some(judge) = &s.run.judge {
        out.push_str(&format!(
            "\n### Judge\n\nJudged by {} at {}.\n\n",
            md_code(&judge.model),
            md_code(&judge.base_url),
        ));
        out.push_str(&tables::judge(s).markdown());
    }
    if !s.replicas.is_empty() {
        out.push_str("\n### Replicas\n\n");
        out.push_str(&tables::replicas(s).markdown());
    }
    if !s.slices.is_empty() {
        out.push_str("\n### By tag\n\n");
        out.push_str(&tables::by_tag(s).markdown());
    }
}

/// `--markdown FILE`: the summary (and the baseline comparison) appended, as
/// `$GITHUB_STEP_SUMMARY` expects.
pub(super) struct Appended(pub(super) std::path::PathBuf);

impl super::output::Output for Appended {
    fn destination(&self) -> super::output::Destination {
        super::output::Destination::Append(self.0.clone())
    }

    fn render<'r>(
        &self,
        run: &'r mut super::output::RunReport<'_>,
    ) -> Result<Option<super::output::Body<'r>>, crate::ReportError> {
        let mut md = Markdown.render(&run.result.summary)?;
        if let Some(b) = run.baseline {
            md.push_str("\n### Against the baseline run\n\n");
            md.push_str(&comparison_body(b));
        }
        Ok(Some(super::output::Body::Text(md)))
    }
}

/// `compare.md`: two runs side by side.
pub(crate) fn render_comparison(c: &RunComparison) -> String {
    format!("## promptgauge compare\n\n{}", comparison_body(c))
}

/// A comparison's runs, table and sentences, without a title: nested under a run's summary
/// (the baseline section) or under `compare.md`'s own.
pub(crate) fn comparison_body(c: &RunComparison) -> String {
    let comparisons = || c.variants.iter().map(|v| &v.comparison);
    let mut out = format!(
        "- **A**: {}, model {} at {}\n- **B**: {}, model {} at {}\n\n",
        md_code(&c.run_a.dir),
        md_code(&c.run_a.model),
        md_code(&c.run_a.base_url),
        md_code(&c.run_b.dir),
        md_code(&c.run_b.model),
        md_code(&c.run_b.base_url),
    );
    out.push_str(&tables::comparison(c).markdown());
    out.push('\n');
    for v in &c.variants {
        out.push_str(&format!("- {}\n", md_text(&v.comparison.sentence)));
    }
    if let Some(note) = crate::compare::levels_note(comparisons(), c.confidence) {
        out.push_str(&format!("\n{note}\n"));
    }
    for note in crate::terminal::coverage_notes(c) {
        out.push_str(&format!("\n> {note}\n"));
    }
    out
}

/// A table cell: as [`md_text`] (a `|` would end the cell).
fn md_cell(text: &str) -> String {
    md_text(text)
}

/// A code span holding `text` literally: fenced with more backticks than it contains.
pub(crate) fn md_code(text: &str) -> String {
    let shown = crate::visible(text, 300);
    let longest = shown.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    let pad = if shown.starts_with('`') || shown.ends_with('`') {
        " "
    } else {
        ""
    };
    // In a table a `|` would still end the cell, code span or not.
    format!("{fence}{pad}{}{pad}{fence}", shown.replace('|', "\\|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_elsewhere_renders_literally() {
        let hostile = "boom [click](https://evil.example) ![x](https://evil.example/i.png) <img src=x> @octocat **bold** | cell";
        let shown = md_text(hostile);
        for markup in [
            "[click](",
            "![x](",
            "<img",
            "@octocat",
            "**bold**",
            "** | cell",
        ] {
            assert!(!shown.contains(markup), "{markup} in {shown}");
        }
        assert!(shown.contains("&lt;img src=x&gt;"));
        assert_eq!(md_code("a`b"), "``a`b``");
    }
}
