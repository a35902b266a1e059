//! `--junit FILE`: one test case per (case, variant[, repeat]); a wrong answer is a failure
//! carrying the expected and extracted answers, a job without an answer is an error.

use std::collections::BTreeMap;
use std::path::Path;

use super::Summary;
use crate::runner::journal::{self, JobRecord, JobStatus};

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows only these control characters.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn short(text: &str) -> String {
    crate::client::protocol::truncate(text, 2000)
}

/// Renders the JUnit XML for a run, test cases in plan order within each variant.
pub fn render(
    summary: &Summary,
    journal_path: &Path,
    keys: &journal::PlanKeys,
) -> std::io::Result<String> {
    let mut by_variant: BTreeMap<String, Vec<JobRecord>> = BTreeMap::new();
    journal::read_planned(journal_path, keys, |r| {
        by_variant.entry(r.variant.clone()).or_default().push(r)
    })?;
    let repeats = summary.run.repeats > 1;
    let mut suites = String::new();
    let (mut tests, mut failures, mut errors) = (0, 0, 0);
    for v in &summary.variants {
        let mut records = by_variant.remove(&v.name).unwrap_or_default();
        records.sort_by_key(|r| r.job);
        let (mut f, mut e) = (0, 0);
        let mut cases = String::new();
        for r in &records {
            let name = if repeats {
                format!("{} #{}", r.case_id, r.repeat + 1)
            } else {
                r.case_id.clone()
            };
            let time = r.latency_ms.unwrap_or(0.0) / 1000.0;
            cases.push_str(&format!(
                "    <testcase classname=\"promptgauge.{}.{}\" name=\"{}\" time=\"{time:.3}\"",
                escape(&summary.run.bench),
                escape(&v.name),
                escape(&name)
            ));
            match (r.status, r.score()) {
                (JobStatus::Graded, Some(s)) if s == 1.0 => cases.push_str("/>\n"),
                (JobStatus::Graded, _) => {
                    f += 1;
                    let message = format!(
                        "expected {}, extracted {}",
                        r.expected.join(" or "),
                        r.extracted.as_deref().unwrap_or("nothing")
                    );
                    cases.push_str(&format!(
                        ">\n      <failure type=\"wrong_answer\" message=\"{}\">{}</failure>\n    </testcase>\n",
                        escape(&message),
                        escape(&short(&r.output))
                    ));
                }
                (JobStatus::Failed, _) => {
                    e += 1;
                    let message = r.error.clone().unwrap_or_else(|| "no answer".into());
                    cases.push_str(&format!(
                        ">\n      <error type=\"no_answer\" message=\"{}\">{} attempts</error>\n    </testcase>\n",
                        escape(&short(&message)),
                        r.attempts.len()
                    ));
                }
            }
        }
        tests += records.len();
        failures += f;
        errors += e;
        suites.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{f}\" errors=\"{e}\">\n{cases}  </testsuite>\n",
            escape(&v.name),
            records.len()
        ));
    }
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"promptgauge {}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">\n{suites}</testsuites>\n",
        escape(&summary.run.bench)
    ))
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{FFFD}"
        );
    }
}
