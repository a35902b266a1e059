//! Reports: the terminal table and the files of a run folder. Each file format is one
//! small [`Exporter`]; adding a format touches one new file and the list in [`exporters`].

pub mod aggregate;
pub mod causes;
pub mod compare;
mod csv;
pub(crate) mod gates;
pub mod history;
pub mod html;
pub mod job_rows;
pub mod jobs_csv;
mod json;
pub mod junit;
pub mod labels;
pub mod markdown;
pub(crate) mod progress;
pub mod prompts;
pub mod rows;
pub mod sequential;
mod shown;
pub mod sinks;
pub mod summary;
pub(crate) mod table;
pub(crate) mod tables;
pub(crate) mod terminal;
pub(crate) mod verbose;

pub use aggregate::{Aggregator, AggregatorSettings, RunResult};
pub use summary::{ProviderInfo, RunInfo, Summary, VariantSummary};

/// Writes a summary in one format.
pub trait Exporter {
    /// The file the format is written to in a run folder.
    fn file_name(&self) -> &'static str;
    /// The summary in this format.
    fn render(&self, summary: &Summary) -> Result<String, ReportError>;
}

/// Why a report could not be made.
#[derive(Debug)]
pub enum ReportError {
    /// A file could not be written.
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A summary could not be encoded (JSON or CSV).
    Encode(String),
}

impl ReportError {
    /// `path` could not be written.
    pub fn write(path: &std::path::Path, source: impl Into<std::io::Error>) -> Self {
        ReportError::Write {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
            ReportError::Encode(e) => write!(f, "cannot encode the summary: {e}"),
        }
    }
}

impl std::error::Error for ReportError {}

impl From<serde_json::Error> for ReportError {
    fn from(e: serde_json::Error) -> Self {
        ReportError::Encode(e.to_string())
    }
}

impl From<::csv::Error> for ReportError {
    fn from(e: ::csv::Error) -> Self {
        ReportError::Encode(e.to_string())
    }
}

/// Every summary format written into a run folder.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(json::Json),
        Box::new(csv::Csv),
        Box::new(markdown::Markdown),
    ]
}

/// `72.5%`
pub(crate) fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), |x| format!("{:.1}%", x * 100.0))
}

/// `[63.1, 80.2]`
pub fn interval(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("[{:.1}, {:.1}]", lo * 100.0, hi * 100.0),
        _ => "–".into(),
    }
}

/// `840 ms` or `2.31 s`
pub(crate) fn millis(x: Option<f64>) -> String {
    match x {
        None => "–".into(),
        Some(x) if x < 1000.0 => format!("{x:.0} ms"),
        Some(x) => format!("{:.2} s", x / 1000.0),
    }
}

/// Dollars with three significant digits for small amounts: `$12.40`, `$0.0123`, `$0.0000125`.
pub(crate) fn usd(x: Option<f64>) -> String {
    match x {
        None => "–".into(),
        Some(x) if x >= 1.0 => format!("${x:.2}"),
        Some(x) if x <= 0.0 => "$0".into(),
        Some(x) => {
            let decimals = (2 - x.log10().floor() as i32).clamp(2, 12) as usize;
            format!("${x:.decimals$}")
        }
    }
}

/// A word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside written `'\''`). A printed command is
/// pasted: a folder `my reports` or a bench named `b $(touch PWNED)` must arrive as one
/// argument, never run.
///
/// A word holding control characters (a folder named with an escape sequence) is written
/// in ANSI-C quotes, `$'…\x1b…'` (bash, zsh, ksh, dash ≥ 0.5.12): pasted, it names the same
/// folder, and printed, it holds nothing a terminal obeys.
pub fn shell_quote(word: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return std::borrow::Cow::Borrowed(word);
    }
    if word.chars().any(obeyed) {
        let mut out = String::from("$'");
        for c in word.chars() {
            match c {
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if obeyed(c) || c == '\n' || c == '\t' => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        return std::borrow::Cow::Owned(out);
    }
    std::borrow::Cow::Owned(format!("'{}'", word.replace('\'', "'\\''")))
}

/// A path as a shell word: see [`shell_quote`]. A relative path that starts with `-` is
/// written `./-…`, so the command it is pasted into does not take it for a flag.
pub fn shell_path(path: &std::path::Path) -> String {
    let shown = path.display().to_string();
    if shown.starts_with('-') {
        return shell_quote(&format!("./{shown}")).into_owned();
    }
    shell_quote(&shown).into_owned()
}

/// Whether a terminal would obey `c` instead of showing it: control characters (ESC, BEL, a
/// carriage return, backspace, the C1 controls such as U+009B CSI), the bidirectional
/// overrides and marks that make a line read differently from what it holds (U+202A–202E,
/// U+2066–2069, U+200E/200F, U+061C), and the line and paragraph separators some terminals
/// break lines at (U+2028/2029).
fn obeyed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Text fit for a terminal: what a server or a model wrote (an error body, an echoed model
/// name, an answer) may hold escape sequences — an OSC 52 clipboard write, a window title, a
/// clear screen, a carriage return that overwrites a line. Every such character is shown as
/// `\u{1b}`, never obeyed; newlines and tabs stay. Everything promptgauge prints passes
/// through here.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(obeyed) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if obeyed(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text a model or a server wrote, fit for one line of a report: line breaks shown as `⏎`,
/// other control characters (escapes a terminal would obey) as `\u{1b}`, cut to `max`
/// characters with `…`.
pub(crate) fn visible(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.trim().chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('⏎'),
            c if obeyed(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Why a job scored as it did, in words: the judge's reasons (each vote's), a schema
/// violation, a scorer's error, or why a job failed.
pub(crate) fn reason_of(r: &crate::runner::journal::JobRecord) -> Option<String> {
    use crate::runner::journal::JobStatus;
    if r.status != JobStatus::Graded {
        return r.error.clone();
    }
    r.score_detail.as_ref().and_then(|d| {
        let votes: Vec<String> = d
            .get("votes")
            .and_then(serde_json::Value::as_array)
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.get("reason").and_then(serde_json::Value::as_str))
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        if !votes.is_empty() {
            return Some(format!("judge: {}", votes.join(" / ")));
        }
        d.get("violation")
            .or_else(|| d.get("error"))
            .and_then(serde_json::Value::as_str)
            .map(String::from)
    })
}

/// Lines that qualify the table: the simulator, failures, estimates.
pub(crate) fn notes(summary: &Summary) -> Vec<String> {
    let mut notes = Vec::new();
    if summary.run.provider.simulated {
        notes.push("SIMULATED PROVIDER: these numbers come from promptgauge's built-in fake model, not a real one. Set --base-url to measure a real model.".to_string());
    }
    if let Some(why) = &summary.run.stopped {
        notes.push(format!("The run stopped early: {why}"));
    }
    if !summary.complete {
        let missing = summary
            .run
            .jobs_planned
            .saturating_sub(summary.jobs_finished);
        notes.push(format!(
            "INCOMPLETE: {} of {} jobs failed and {missing} did not run; failed jobs are not counted as wrong.",
            summary.jobs_failed, summary.run.jobs_planned
        ));
    }
    let truncated: u64 = summary.variants.iter().map(|v| v.truncated).sum();
    if truncated > 0 {
        notes.push(format!(
            "{truncated} answers hit max_tokens (finish_reason: length); they were graded as given."
        ));
    }
    for v in &summary.variants {
        // Most answers gave the scorer nothing to compare: a format mismatch (or an
        // import comparing with the wrong thing), not a bad prompt.
        if let Some(f) = v.nothing_found.as_ref().filter(|f| f.answers * 2 > v.n) {
            notes.push(format!(
                "{}: the scorer found no {} in {} of {} answers, e.g. \"{}\": check that the prompt asks for the format the scorer reads.",
                v.name,
                f.looked_for.trim_start_matches("a ").trim_start_matches("an "),
                f.answers,
                v.n,
                f.example
            ));
        }
    }
    let filtered: u64 = summary.variants.iter().map(|v| v.filtered).sum();
    if filtered > 0 {
        let each: Vec<String> = summary
            .variants
            .iter()
            .filter(|v| v.filtered > 0)
            .map(|v| format!("{} {}", v.name, v.filtered))
            .collect();
        notes.push(format!(
            "{filtered} answers were withheld by the provider's content filter (finish_reason: content_filter; {}): they are counted apart, neither right, wrong nor failed, and left out of every figure and comparison (a case none of whose answers came back on one side is not paired).",
            each.join(", ")
        ));
    }
    if let (Some(seed), Some(n)) = (summary.run.order_seed, summary.cases_measured)
        && n < summary.run.cases
    {
        notes.push(format!(
            "{n} of {} cases, drawn at random (seed {seed}): a run that may stop early sends its cases in a seeded random order, so the cases measured are a random sample of the bench's, not its first (the same seed draws the same; a resume keeps it).",
            summary.run.cases
        ));
    }
    let refused: u64 = summary.variants.iter().map(|v| v.refused).sum();
    if refused > 0 {
        let each: Vec<String> = summary
            .variants
            .iter()
            .filter(|v| v.refused > 0)
            .map(|v| format!("{} {} of {}", v.name, v.refused, v.n))
            .collect();
        notes.push(format!(
            "{refused} answers were refusals (the model declined; {}): each is an answer that failed with the cause \"refused\", scored 0 and counted in every figure, on every protocol alike.",
            each.join(", ")
        ));
    }
    let anomalies: u64 = summary.variants.iter().map(|v| v.usage_anomalies).sum();
    if anomalies > 0 {
        let each: Vec<String> = summary
            .variants
            .iter()
            .filter(|v| v.usage_anomalies > 0)
            .map(|v| format!("{} {}", v.name, v.usage_anomalies))
            .collect();
        let example = summary
            .variants
            .iter()
            .find_map(|v| v.usage_anomaly_example.as_deref())
            .unwrap_or_default();
        notes.push(format!(
            "provider accounting anomaly: {anomalies} jobs were billed for usage their requests could not have produced ({}; e.g. {example}). What the provider reported is counted as spent, since it is what it says it billed: check its bill before trusting these costs.",
            each.join(", ")
        ));
    }
    let batched: u64 = summary.variants.iter().map(|v| v.batched).sum();
    if batched > 0 {
        let sum = |f: fn(&VariantSummary) -> Option<f64>| -> Option<f64> {
            summary.variants.iter().map(f).sum()
        };
        let costs = sum(|v| v.batched_cost_usd).zip(sum(|v| v.batched_streaming_cost_usd));
        notes.push(match costs {
            Some((paid, streamed)) if paid < streamed => format!(
                "{batched} answers came through the provider's batch API (--batch): they cost ${paid:.4} at the batch price, where streaming them would have cost ${streamed:.4}. Nobody waited on them: they are in no latency figure."
            ),
            Some((paid, _)) => format!(
                "{batched} answers came through the provider's batch API (--batch): they cost ${paid:.4}, costed at the streaming price because the price gives no batch price (set price.batch_discount: 0.5, or batch_input_per_mtok and batch_output_per_mtok). They are in no latency figure."
            ),
            None => format!(
                "{batched} answers came through the provider's batch API (--batch): nobody waited on them, so they are in no latency figure."
            ),
        });
    }
    let cached: u64 = summary.variants.iter().map(|v| v.cached).sum();
    if cached > 0 {
        notes.push(format!("{cached} answers came from the response cache (--cache): nothing was sent for them, and they are not in the latency figures."));
    }
    if summary.duplicate_records > 0 || summary.records_outside_plan > 0 {
        notes.push(format!(
            "The journal held {} duplicate record(s) (the first of each was kept) and {} record(s) of jobs this run did not plan (ignored).",
            summary.duplicate_records, summary.records_outside_plan
        ));
    }
    if summary.variants.iter().any(|v| v.tokens.saturated) {
        notes.push("Some token totals reached 2^64 − 1 and stopped there: the server reported impossible counts.".to_string());
    }
    if let Some(judge) = &summary.run.judge {
        if summary.run.self_judged {
            notes.push(format!(
                "THE JUDGE IS THE MODEL UNDER TEST ({}): models tend to favour their own answers, so these scores may be too kind. Set judge.model (and judge.base_url) to another model.",
                judge.model
            ));
        }
        let labels: u64 = summary
            .variants
            .iter()
            .filter_map(|v| v.labelled.as_ref())
            .map(|l| l.labels)
            .sum();
        if labels == 0 {
            notes.push(format!(
                "Scores come from a judge ({}): they are its opinion of the answers, and a judge is wrong sometimes. To see how often, label a sample yourself: promptgauge label {} --sample 30; the reports then show how far the judge agrees with you and the {} as people would give it.",
                judge.model,
                summary.run.folder.as_deref().unwrap_or("RUN_DIR"),
                summary.measure()
            ));
        } else {
            notes.push(format!(
                "People labelled {labels} judged answers: the judge table shows how often the judge agrees with them (a score of ½ or more counts as a pass), and each variant's {} as people would score it (prediction-powered inference, the case as the unit, once a variant has {} labelled cases, or people's scores alone when every judged answer is labelled); comparisons with labels on both sides use it.",
                summary.measure(),
                labels::MIN_LABELS
            ));
        }
    }
    if summary.variants.iter().any(|v| v.tokens.estimated) {
        notes.push("~ Some token counts are estimates: the server sent no usage.".to_string());
    }
    if summary.run.repeats > 1 {
        notes.push(format!(
            "With repeats: {} the case is the unit: intervals are widened by the design effect, and comparisons test the per-case mean scores (the same verdict as one answer per case when the repeats agree).",
            summary.run.repeats
        ));
    }
    if let Some(s) = &summary.sequential {
        notes.push(sequential::note(s));
    }
    if let Some(line) = spent_note(summary) {
        notes.push(line);
    }
    if let Some(line) = answer_time_note(summary) {
        notes.push(line);
    }
    notes
}

/// What the run paid against the list price of its answers, when they differ.
fn spent_note(summary: &Summary) -> Option<String> {
    let list: f64 = summary.variants.iter().filter_map(|v| v.cost_usd).sum();
    let spent: f64 = summary.variants.iter().filter_map(|v| v.spent_usd).sum();
    let priced = summary.variants.iter().any(|v| v.spent_usd.is_some());
    if !priced || (spent - list).abs() <= 0.005 * list.max(1e-12) {
        return None;
    }
    let estimated = if summary.variants.iter().any(|v| v.spent_estimated) {
        " (partly estimated: some attempts reported no usage)"
    } else {
        ""
    };
    Some(format!(
        "Spent {}{estimated}: every attempt the provider answered, retries and failed jobs included, answers from the cache free. The cost column is the list price of the graded answers, {} in all: what running them again would cost.",
        usd(Some(spent)),
        usd(Some(list))
    ))
}

/// Time to answer (retries and backoff included) where it differs from the answering
/// attempt's latency.
fn answer_time_note(summary: &Summary) -> Option<String> {
    let slower = summary.variants.iter().any(
        |v| matches!((v.answer_ms.p90, v.latency_ms.p90), (Some(a), Some(l)) if a > 1.1 * l + 1.0),
    );
    if !slower {
        return None;
    }
    let each: Vec<String> = summary
        .variants
        .iter()
        .map(|v| {
            format!(
                "{} {} / {}",
                v.name,
                millis(v.answer_ms.p50),
                millis(v.answer_ms.p90)
            )
        })
        .collect();
    Some(format!(
        "Time to answer, p50 / p90 (from the first attempt sent, retries and backoff included; the latency column is the answering attempt alone): {}.",
        each.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_paths_paste_back_as_the_same_argument() {
        let words = [
            "reports/run 1",
            "b $(touch PWNED)",
            "it's",
            "esc\u{1b}]0;title\u{7}\\back'q",
        ];
        for word in words {
            let quoted = shell_quote(word);
            assert!(!quoted.chars().any(obeyed), "{quoted}");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("printf '%s' {quoted}")])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{quoted}");
        }
        assert_eq!(shell_path(std::path::Path::new("-dash/b")), "./-dash/b");
        assert_eq!(shell_path(std::path::Path::new("/abs/-x")), "/abs/-x");
    }

    #[test]
    fn formats() {
        assert_eq!(usd(Some(12.4)), "$12.40");
        assert_eq!(usd(Some(0.0123)), "$0.0123");
        assert_eq!(usd(Some(0.0000125)), "$0.0000125");
        assert_eq!(usd(None), "–");
        assert_eq!(pct(Some(0.875)), "87.5%");
        assert_eq!(interval(Some(0.772), Some(0.935)), "[77.2, 93.5]");
        assert_eq!(millis(Some(2310.0)), "2.31 s");
    }
}
