//! `--junit FILE`: one test case per (case, variant[, repeat]); a wrong answer is a failure
//! carrying the expected and extracted answers, a job without an answer is an error.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::Summary;
use promptgauge_runner::journal::{JobRecord, JobStatus};

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
    promptgauge_client::protocol::truncate(text, 2000)
}

/// JUnit test cases as they arrive, spooled to a file so that answers never pile up in
/// memory; [`JunitSpool::render`] assembles the XML in plan order at the end.
/// How a test case ended, as JUnit counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Passed,
    Failure,
    Error,
    /// The provider withheld the answer (`content_filter`).
    Skipped,
}

pub struct JunitSpool {
    path: PathBuf,
    file: Option<std::io::BufWriter<File>>,
    /// (variant, job, offset, length, how it ended) per test case.
    entries: Vec<(usize, usize, u64, u32, Mark)>,
    written: u64,
    bench: String,
    repeats: bool,
    error: Option<std::io::Error>,
}

impl JunitSpool {
    /// A spool at `path` (created now; an error is kept and reported at render time).
    pub(crate) fn create(path: PathBuf, bench: &str, repeats: bool) -> JunitSpool {
        let (file, error) = match File::create(&path) {
            Ok(f) => (Some(std::io::BufWriter::new(f)), None),
            Err(e) => (None, Some(e)),
        };
        JunitSpool {
            path,
            file,
            entries: Vec::new(),
            written: 0,
            bench: bench.to_string(),
            repeats,
            error,
        }
    }

    /// Adds the test case of one job of variant `arm`.
    pub(crate) fn add(&mut self, arm: usize, r: &JobRecord) {
        let Some(file) = &mut self.file else { return };
        let name = if self.repeats {
            format!("{} #{}", r.case_id, r.repeat + 1)
        } else {
            r.case_id.clone()
        };
        let time = r.latency_ms.unwrap_or(0.0) / 1000.0;
        // A run of several endpoints: `promptgauge.BENCH.ENDPOINT.VARIANT`, so a dashboard
        // groups each endpoint's cases apart.
        let class = match &r.endpoint {
            Some(e) => format!("{}.{}", escape(e), escape(&r.variant)),
            None => escape(&r.variant),
        };
        let mut case = format!(
            "    <testcase classname=\"promptgauge.{}.{class}\" name=\"{}\" time=\"{time:.3}\"",
            escape(&self.bench),
            escape(&name)
        );
        let mark = close_case(&mut case, r);
        if let Err(e) = file.write_all(case.as_bytes()) {
            self.error = Some(e);
            self.file = None;
            return;
        }
        self.entries
            .push((arm, r.job, self.written, case.len() as u32, mark));
        self.written += case.len() as u64;
    }

    /// The JUnit XML: one suite per variant (in the summary's order), test cases in plan
    /// order. Removes the spool.
    pub fn render(self, summary: &Summary) -> std::io::Result<String> {
        let mut out = Vec::new();
        self.write_to(summary, &mut out)?;
        String::from_utf8(out).map_err(std::io::Error::other)
    }

    /// Writes the JUnit XML to `out`, copying each test case from the spool: memory holds
    /// only the index. Removes the spool.
    pub(crate) fn write_to(
        mut self,
        summary: &Summary,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let result = self.assemble(summary, out);
        drop(self.file.take());
        let _ = std::fs::remove_file(&self.path);
        result
    }

    /// (tests, failures, errors, skipped) of variant `arm`.
    fn count(&self, arm: usize) -> (usize, usize, usize, usize) {
        let mine = self.entries.iter().filter(|e| e.0 == arm);
        mine.fold((0, 0, 0, 0), |(t, f, e, s), x| {
            (
                t + 1,
                f + usize::from(x.4 == Mark::Failure),
                e + usize::from(x.4 == Mark::Error),
                s + usize::from(x.4 == Mark::Skipped),
            )
        })
    }

    fn assemble(&mut self, summary: &Summary, out: &mut dyn Write) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(std::io::Error::new(
                e.kind(),
                format!(
                    "cannot spool the JUnit report to {}: {e}",
                    self.path.display()
                ),
            ));
        }
        if let Some(f) = &mut self.file {
            f.flush()?;
        }
        let mut spool = File::open(&self.path)?;
        self.entries.sort_by_key(|e| (e.0, e.1));
        let arms = summary.variants.len();
        let count = |arm: usize| self.count(arm);
        let totals = (0..arms).map(count).fold((0, 0, 0, 0), |a, b| {
            (a.0 + b.0, a.1 + b.1, a.2 + b.2, a.3 + b.3)
        });
        let mut out = std::io::BufWriter::new(out);
        write!(
            out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"promptgauge {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\"{}>\n",
            escape(&summary.run.bench),
            totals.0,
            totals.1,
            totals.2,
            skipped(totals.3)
        )?;
        let mut buf = Vec::new();
        for (arm, v) in summary.variants.iter().enumerate() {
            let (tests, f, e, s) = count(arm);
            writeln!(
                out,
                "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{f}\" errors=\"{e}\"{}>",
                escape(&v.name),
                skipped(s)
            )?;
            write_properties(&mut out, summary, v)?;
            for &(_, _, offset, len, _) in self.entries.iter().filter(|e| e.0 == arm) {
                buf.resize(len as usize, 0);
                spool.seek(SeekFrom::Start(offset))?;
                spool.read_exact(&mut buf)?;
                out.write_all(&buf)?;
            }
            out.write_all(b"  </testsuite>\n")?;
        }
        out.write_all(b"</testsuites>\n")?;
        out.flush()
    }
}

/// Closes a test case's opening tag in `case` with what became of its job: passed, a
/// wrong answer, withheld or failed.
fn close_case(case: &mut String, r: &JobRecord) -> Mark {
    let mut mark = Mark::Passed;
    match (r.status, r.score()) {
        (JobStatus::Graded, Some(1.0)) => case.push_str("/>\n"),
        (JobStatus::Graded, score) => {
            mark = Mark::Failure;
            let message = wrong_answer(r, score);
            case.push_str(&format!(
                ">\n      <failure type=\"wrong_answer\" message=\"{}\">{}</failure>\n    </testcase>\n",
                escape(&message),
                escape(&short(&r.output))
            ));
        }
        (JobStatus::Filtered, _) => {
            mark = Mark::Skipped;
            case.push_str(&format!(
                ">\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                escape(&short(r.error.as_deref().unwrap_or(
                    "the provider withheld the answer (content filter)"
                )))
            ));
        }
        (JobStatus::Failed, _) => {
            mark = Mark::Error;
            let mut message = r.error.clone().unwrap_or_else(|| "no answer".into());
            let status = r.attempts.last().and_then(|a| a.status);
            if let Some(hint) = crate::causes::hint(status, &message) {
                message = format!("{message} — {hint}");
            }
            case.push_str(&format!(
                ">\n      <error type=\"no_answer\" message=\"{}\">{} attempts</error>\n    </testcase>\n",
                escape(&short(&message)),
                r.attempts.len()
            ));
        }
    }
    mark
}

/// Why a graded answer failed its test case: what was expected and extracted, or what the
/// judge said and why; with its score when it has some.
fn wrong_answer(r: &JobRecord, score: Option<f64>) -> String {
    // A judge's verdict is not an extracted answer: say what it said, and why.
    let message = if r.judge.is_empty() {
        format!(
            "expected {}, extracted {}",
            r.expected.join(" or "),
            r.extracted.as_deref().unwrap_or("nothing")
        )
    } else {
        let why = crate::reason_of(r)
            .map(|w| format!(" ({})", w.trim_start_matches("judge: ")))
            .unwrap_or_default();
        let against = if r.expected.is_empty() {
            "judged by its criteria".to_string()
        } else {
            format!("expected {}", r.expected.join(" or "))
        };
        format!(
            "the judge said {}{why}; {against}",
            r.extracted.as_deref().unwrap_or("nothing")
        )
    };
    match score.filter(|&s| s > 0.0) {
        Some(score) => format!("score {score:.2}: {message}"),
        None => message,
    }
}

/// ` skipped="N"`, said only when some were: runs without withheld answers read as before.
fn skipped(n: usize) -> String {
    if n > 0 {
        format!(" skipped=\"{n}\"")
    } else {
        String::new()
    }
}

/// What a CI dashboard can chart per variant; the judge is costed apart.
fn write_properties(
    out: &mut impl Write,
    summary: &Summary,
    v: &crate::VariantSummary,
) -> std::io::Result<()> {
    let mut properties = vec![
        ("accuracy", v.accuracy.map(|x| format!("{x:.6}"))),
        ("mean_score", v.mean_score.map(|x| format!("{x:.6}"))),
        ("cost_usd", v.cost_usd.map(|x| format!("{x:.6}"))),
    ];
    if v.judge_calls > 0 {
        properties.push(("judge_calls", Some(v.judge_calls.to_string())));
        properties.push((
            "judge_cost_usd",
            v.judge_cost_usd.map(|x| format!("{x:.6}")),
        ));
        if summary.run.self_judged {
            properties.push(("self_judged", Some("true".into())));
        }
    }
    let properties: Vec<_> = properties
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
    if properties.is_empty() {
        return Ok(());
    }
    out.write_all(b"    <properties>\n")?;
    for (name, value) in properties {
        writeln!(
            out,
            "      <property name=\"{name}\" value=\"{}\"/>",
            escape(&value)
        )?;
    }
    out.write_all(b"    </properties>\n")
}

#[cfg(test)]
mod tests {
    use super::{JobRecord, JunitSpool, escape};
    use std::io::Write;

    #[test]
    fn a_judged_answer_fails_with_what_the_judge_said_and_why() {
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 0, "case_id": "sum", "variant": "v", "repeat": 0,
            "status": "graded", "outcome": "complete", "output": "It is 58.",
            "finish_reason": "stop", "expected": ["59"], "extracted": "no", "correct": false,
            "score": 0.0, "error": null, "attempts": [], "ttft_ms": null, "latency_ms": null,
            "model": null,
            "score_detail": {"votes": [{"score": 0.0, "reason": "58 is not 59."}], "agreement": 1.0},
            "judge": [{"vote": 0, "request": [], "reply": "VERDICT: no", "score": 0.0,
                       "usage": null, "latency_ms": null, "attempts": 1}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
                      "reasoning_tokens": 0, "estimated": false}
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut spool = JunitSpool::create(dir.path().join("spool"), "b", false);
        spool.add(0, &record);
        spool.file.as_mut().unwrap().flush().unwrap();
        let text = std::fs::read_to_string(dir.path().join("spool")).unwrap();
        assert!(
            text.contains("message=\"the judge said no (58 is not 59.); expected 59\""),
            "{text}"
        );
        assert!(!text.contains("extracted no"), "{text}");
    }

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\u{FFFD}"
        );
    }
}
