//! The named parts of a run's score (docs/guide/view.md, "Parts"): a run page shows each
//! part's figures per variant — its mean with the interval, and the paired verdict against
//! the baseline — from the run's summary.json; the compare page shows each part's figures
//! in both runs side by side. Part and variant names are the bench's: escaped, never markup.

use std::fmt::Write as _;
use std::path::Path;

use promptgauge_report::compare::{Comparison, Verdict};
use promptgauge_report::html::esc;
use promptgauge_report::parts::PartFigures;
use promptgauge_report::{Summary, interval, pct};

/// The id of the parts section: a page that already has one (a compare page drawn with
/// its own) gets no second one; a run's report.html has one, which the run page's replaces.
pub(super) const ID: &str = "parts";

/// The largest summary.json read for its parts (a run's summary is well under this).
const MAX_SUMMARY_BYTES: u64 = 256 * 1024 * 1024;

/// The run's summary.json in `folder`, when it is there and readable.
pub(super) fn summary_in(folder: &Path) -> Option<Summary> {
    let bytes =
        promptgauge_base::files::read_capped(&folder.join("summary.json"), MAX_SUMMARY_BYTES)
            .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether `html` already holds a parts section.
pub(super) fn has_section(html: &str) -> bool {
    html.contains(&format!("id=\"{ID}\""))
}

/// `section` in `html`: in place of the report's own parts section (report.html's
/// `<section id="parts">`, whose table `view`'s replaces, rows marked by part and variant),
/// else before the closing `</body>` (at the end when it has none).
pub(super) fn with_section(html: &str, section: &str) -> String {
    let open = format!("<section id=\"{ID}\">");
    if let Some(start) = html.find(&open)
        && let Some(len) = html[start..].find("</section>")
    {
        let end = start + len + "</section>".len();
        return format!("{}{section}{}", &html[..start], &html[end..]);
    }
    match html.rfind("</body>") {
        Some(i) => format!("{}{section}\n{}", &html[..i], &html[i..]),
        None => format!("{html}{section}"),
    }
}

/// A run's parts table: one row per part and arm, with the arm's mean, its interval, the
/// answers it counts, and its paired verdict against the baseline. `None` without parts.
pub(super) fn run_section(summary: &Summary) -> Option<String> {
    if summary.parts.is_empty() {
        return None;
    }
    let conf = summary.run.confidence * 100.0;
    let mut b = format!(
        "<section id=\"{ID}\"><h2>Parts ({conf}% intervals)</h2><p class=\"muted\">Each named part of the score, per variant: an accuracy for a part scored 0 or 1, else the mean score; against the baseline paired by case, as the whole score (Holm within each part).</p>\
         <table id=\"parts-table\"><thead><tr><th>part</th><th title=\"the cases the part scored: the cases its check applies to\">cases</th><th>variant</th><th>mean</th><th>interval</th><th>n</th><th>against the baseline</th></tr></thead><tbody>"
    );
    for part in &summary.parts {
        for (i, arm) in part.variants.iter().enumerate() {
            let against = if i == 0 && part.comparison(&arm.name).is_none() {
                "baseline".to_string()
            } else {
                verdicts(part, &arm.name)
            };
            let _ = write!(
                b,
                "<tr data-part=\"{p}\" data-variant=\"{v}\"><td>{p}</td><td class=\"n\">{cases}</td><td>{v}</td><td class=\"n\">{mean}</td><td class=\"n\">{ci}</td><td class=\"n\">{n}</td><td>{against}</td></tr>",
                p = esc(&part.name),
                v = esc(&arm.name),
                mean = pct(arm.mean),
                ci = interval(arm.ci_low, arm.ci_high),
                n = arm.n,
                cases = if i == 0 {
                    part.cases.to_string()
                } else {
                    String::new()
                },
                against = esc(&against),
            );
        }
    }
    b.push_str("</tbody></table></section>");
    Some(b)
}

/// The arm's verdicts against what it is compared with (one in a run of one endpoint;
/// one per question in a grid): `better than plain: +6.2 points [1.0, 11.4]`.
fn verdicts(part: &PartFigures, arm: &str) -> String {
    let made: Vec<&Comparison> = part
        .comparisons
        .iter()
        .filter(|c| c.variant == arm)
        .collect();
    if made.is_empty() {
        return "–".into();
    }
    made.iter()
        .map(|c| {
            let words = match c.verdict {
                Verdict::Better => format!("better than {}", c.against),
                Verdict::Worse => format!("worse than {}", c.against),
                Verdict::NotDistinguishable => {
                    format!("not distinguishable from {}", c.against)
                }
                Verdict::NoData => return format!("no case graded for both it and {}", c.against),
            };
            match c.difference {
                Some(d) => format!(
                    "{words}: {} {}",
                    promptgauge_report::compare::points(d),
                    interval(c.ci_low, c.ci_high)
                ),
                None => words,
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The compare page's parts table: each part's figures per variant in run A and run B,
/// side by side (a part or variant one run lacks shows "–"). `None` when neither has parts.
pub(super) fn compare_section(a: &Summary, b: &Summary) -> Option<String> {
    if a.parts.is_empty() && b.parts.is_empty() {
        return None;
    }
    // The parts in A's order, then those only B has; each part's arms likewise.
    let mut names: Vec<&str> = a.parts.iter().map(|p| p.name.as_str()).collect();
    for p in &b.parts {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    let find = |s: &'_ Summary, name: &str| -> Option<PartFigures> {
        s.parts.iter().find(|p| p.name == name).cloned()
    };
    let mut out = format!(
        "<section id=\"{ID}\"><h2>Parts</h2><p class=\"muted\">Each named part of the score, per variant, in run A and in run B (an accuracy for a part scored 0 or 1, else the mean score), each with its run's interval. The verdicts above are the whole score's: a part's change from A to B is not tested here.</p>\
         <table id=\"parts-table\"><thead><tr><th>part</th><th>variant</th><th>A</th><th>A interval</th><th>B</th><th>B interval</th></tr></thead><tbody>"
    );
    for name in names {
        let (pa, pb) = (find(a, name), find(b, name));
        let mut arms: Vec<&str> = Vec::new();
        for p in pa.iter().chain(pb.iter()) {
            for v in &p.variants {
                if !arms.contains(&v.name.as_str()) {
                    arms.push(&v.name);
                }
            }
        }
        for arm in arms {
            let cell = |p: &Option<PartFigures>| {
                p.as_ref()
                    .and_then(|p| p.variant(arm))
                    .map_or(("–".to_string(), "–".to_string()), |v| {
                        (pct(v.mean), interval(v.ci_low, v.ci_high))
                    })
            };
            let ((ma, ia), (mb, ib)) = (cell(&pa), cell(&pb));
            let _ = write!(
                out,
                "<tr data-part=\"{p}\" data-variant=\"{v}\"><td>{p}</td><td>{v}</td><td class=\"n\">{ma}</td><td class=\"n\">{ia}</td><td class=\"n\">{mb}</td><td class=\"n\">{ib}</td></tr>",
                p = esc(name),
                v = esc(arm),
            );
        }
    }
    out.push_str("</tbody></table></section>");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use promptgauge_report::parts::PartVariant;

    fn part(name: &str, arms: &[(&str, f64)]) -> PartFigures {
        PartFigures {
            name: name.into(),
            cases: 10,
            binary: true,
            variants: arms
                .iter()
                .map(|(n, m)| PartVariant {
                    name: (*n).into(),
                    n: 10,
                    mean: Some(*m),
                    ci_low: Some(m - 0.1),
                    ci_high: Some(m + 0.1),
                })
                .collect(),
            comparisons: Vec::new(),
        }
    }

    fn summary(parts: Vec<PartFigures>) -> Summary {
        let mut s: Summary =
            serde_json::from_str(include_str!("../../../tests/golden/example/summary.json"))
                .unwrap();
        s.parts = parts;
        s
    }

    #[test]
    fn a_part_named_as_markup_is_shown_as_text() {
        let s = summary(vec![part(
            "<img src=x onerror=alert(1)>",
            &[("plain", 0.5)],
        )]);
        let html = run_section(&s).unwrap();
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(html.contains("<td class=\"n\">50.0%</td><td class=\"n\">[40.0, 60.0]</td>"));
        assert!(run_section(&summary(Vec::new())).is_none());
    }

    #[test]
    fn the_compare_table_sets_both_runs_side_by_side() {
        let a = summary(vec![part("category", &[("plain", 0.5)])]);
        let b = summary(vec![
            part("category", &[("plain", 0.7), ("careful", 0.9)]),
            part("priority", &[("plain", 0.2)]),
        ]);
        let html = compare_section(&a, &b).unwrap();
        assert!(html.contains("<td>category</td><td>plain</td><td class=\"n\">50.0%</td><td class=\"n\">[40.0, 60.0]</td><td class=\"n\">70.0%</td>"), "{html}");
        assert!(html.contains("<td>category</td><td>careful</td><td class=\"n\">–</td><td class=\"n\">–</td><td class=\"n\">90.0%</td>"), "{html}");
        assert!(
            html.contains("<td>priority</td><td>plain</td><td class=\"n\">–</td>"),
            "{html}"
        );
        assert!(with_section("<body>x</body>", &html).ends_with("</section>\n</body>"));
    }
}
