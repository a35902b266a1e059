//! The lines that qualify a run's tables, said under them in the terminal, summary.md and
//! report.html: the simulator, failures, estimates, what the run paid.

use crate::figures::{labels, sequential};
use crate::text::{millis, usd};
use crate::{Summary, VariantSummary};

/// Lines that qualify the table: the simulator, failures, estimates.
pub fn notes(summary: &Summary) -> Vec<String> {
    let mut notes = Vec::new();
    run_notes(summary, &mut notes);
    answer_notes(summary, &mut notes);
    source_notes(summary, &mut notes);
    judge_notes(summary, &mut notes);
    if summary.variants.iter().any(|v| v.tokens.estimated) {
        notes.push("~ Some token counts are estimates: the server sent no usage.".to_string());
    }
    if summary.run.repeats > 1 {
        notes.push(format!(
            "With repeats: {} the case is the unit: intervals are widened by the design effect, and comparisons test the per-case mean scores (the same verdict as one answer per case when the repeats agree).",
            summary.run.repeats
        ));
    }
    notes.extend(summary.variants.iter().filter_map(repeats_note));
    if let Some(s) = &summary.sequential {
        notes.push(sequential::note(s));
        if let Some(line) = s.best.as_ref().and_then(|b| judged_search_note(summary, b)) {
            notes.push(line);
        }
    }
    if let Some(line) = spent_note(summary) {
        notes.push(line);
    }
    notes.extend(unpriced_notes(summary));
    if let Some(line) = loops_note(summary) {
        notes.push(line);
    }
    if let Some(line) = answer_time_note(summary) {
        notes.push(line);
    }
    notes
}

/// What the parts' figures are, said above their table: the same answers, per part, and
/// against what each arm is compared.
pub(crate) fn parts_intro(summary: &Summary) -> String {
    let conf = (summary.run.confidence * 100.0).round();
    let against = if summary.is_grid() {
        "each cell against the cells it is compared with on each axis".to_string()
    } else {
        let baseline = summary
            .variants
            .first()
            .map_or("the baseline", |v| v.name.as_str());
        format!("each variant against {baseline}")
    };
    format!(
        "Per-part figures of the same answers: each part's accuracy (its mean score when the part is not scored 0 or 1) per variant with its {conf}% interval, and {against}, paired by case, Holm within each part."
    )
}

/// With `--until-decided` or `--best`, what the parts' verdicts are not.
pub(crate) fn parts_sequential(summary: &Summary) -> Option<String> {
    (summary.sequential.is_some() || summary.searched()).then(|| {
        "These part verdicts are fixed-sample tests on the cases measured, descriptions only: when to stop was decided on the whole score.".to_string()
    })
}

/// Said under every table of a run the built-in simulator answered.
pub(crate) const SIMULATED_NOTE: &str = "SIMULATED PROVIDER: these numbers come from promptgauge's built-in fake model, not a real one. Set --base-url to measure a real model.";

/// What the run was: simulated, stopped early, incomplete; answers cut at max_tokens,
/// or in which the scorer found nothing.
fn run_notes(summary: &Summary, notes: &mut Vec<String>) {
    if summary.run.provider.simulated {
        notes.push(SIMULATED_NOTE.to_string());
    }
    if let Some(why) = &summary.run.stopped {
        notes.push(format!("The run stopped early: {why}"));
    }
    if !summary.complete {
        // Jobs a sequential decision made unnecessary are not missing.
        let missing = summary
            .run
            .jobs_planned
            .saturating_sub(summary.jobs_finished)
            .saturating_sub(summary.sequential.as_ref().map_or(0, |s| s.jobs_not_needed));
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
            // The variant's own reading (`extract:`) found nothing, before any scorer.
            let mark = promptgauge_suite::extract::LOOKS_FOR_MARK;
            let (who, what) = match f.looked_for.strip_prefix(mark) {
                Some(what) => ("its extract:", what),
                None => ("the scorer", f.looked_for.as_str()),
            };
            notes.push(format!(
                "{}: {who} found no {} in {} of {} answers, e.g. \"{}\": check that the prompt asks for the format {who} reads.",
                v.name,
                what.trim_start_matches("a ").trim_start_matches("an "),
                f.answers,
                v.n,
                f.example
            ));
        }
    }
}

/// Answers apart from the others: withheld, a random sample of the cases, refusals, usage
/// the provider could not have billed.
fn answer_notes(summary: &Summary, notes: &mut Vec<String>) {
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
    if let Some(s) = &summary.run.search_shard {
        let out = match s.arms_out.as_slice() {
            [] => String::new(),
            arms => format!(
                " It did not send {}: the merge it ran after had shown {} out.",
                arms.join(", "),
                if arms.len() == 1 { "it" } else { "them" }
            ),
        };
        notes.push(format!(
            "Shard {} of a --best search: a shard sends its block of the search's seeded order whole and searches nothing itself; `promptgauge merge` over the shards searches them in order and gives the answer (docs/guide/best.md, \"In shards\").{out}",
            s.shard
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
}

/// Where answers came from (the batch API, the cache) and what the journal held twice
/// or did not plan.
fn source_notes(summary: &Summary, notes: &mut Vec<String>) {
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
}

/// A judge: whether it judges itself, and what people's labels say of it.
fn judge_notes(summary: &Summary, notes: &mut Vec<String>) {
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

/// What each variant's agent loops did: requests and tool calls a job, and the calls given
/// back as errors.
fn loops_note(summary: &Summary) -> Option<String> {
    let each: Vec<String> = summary
        .variants
        .iter()
        .filter_map(|v| {
            let l = v.loops.filter(|l| l.jobs > 0)?;
            let per = |n: u64| n as f64 / l.jobs as f64;
            Some(format!(
                "{} {:.1} requests and {:.1} tool calls a job, {} given back as errors",
                v.name,
                per(l.requests),
                per(l.calls),
                l.call_errors
            ))
        })
        .collect();
    (!each.is_empty()).then(|| format!("Agent loops: {}.", each.join("; ")))
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

/// `--best` over a judge's scores: the answer is the judge's best. With people's labels,
/// each arm's score as people would give it, and a warning when those put an arm above
/// the answer's (intervals apart).
fn judged_search_note(
    summary: &Summary,
    best: &promptgauge_runner::sequential::BestSummary,
) -> Option<String> {
    if summary.variants.iter().all(|v| v.judge_calls == 0) {
        return None;
    }
    let corrected: Vec<(&str, f64, f64, f64)> = summary
        .variants
        .iter()
        .filter_map(|v| {
            let l = v.labelled.as_ref()?;
            Some((
                v.name.as_str(),
                l.corrected?,
                l.corrected_low?,
                l.corrected_high?,
            ))
        })
        .collect();
    if corrected.is_empty() {
        return Some(
            "The search ranked the judge's scores: its answer is the judge's best. With people's labels, the reports set each arm's score as people would give it beside it.".to_string(),
        );
    }
    let each: Vec<String> = corrected
        .iter()
        .map(|(n, c, lo, hi)| {
            format!(
                "{n} {:.1}% [{:.1}, {:.1}]",
                c * 100.0,
                lo * 100.0,
                hi * 100.0
            )
        })
        .collect();
    let named_high = corrected
        .iter()
        .filter(|(n, ..)| best.named.iter().any(|b| b == n))
        .map(|&(_, _, _, hi)| hi)
        .fold(f64::NEG_INFINITY, f64::max);
    let above: Vec<&str> = corrected
        .iter()
        .filter(|&&(n, _, lo, _)| !best.named.iter().any(|b| b == n) && lo > named_high)
        .map(|&(n, ..)| n)
        .collect();
    let verdict = if named_high == f64::NEG_INFINITY {
        "the answer's arms have too few labels to set beside them (a correction needs 10 labelled cases)".to_string()
    } else if above.is_empty() {
        "no arm's lies wholly above the answer's".to_string()
    } else {
        format!(
            "{} {} wholly above the answer's: the judge's best is not people's; check the judge against the labels (docs/guide/judge.md) before trusting the answer",
            above.join(", "),
            if above.len() == 1 { "lies" } else { "lie" }
        )
    };
    Some(format!(
        "The search ranked the judge's scores. As people would score them (corrected by their labels, fixed-sample intervals): {}; {verdict}.",
        each.join(", ")
    ))
}

/// Each endpoint a real server answered at without a price: its cells' cost is "–", and
/// how to price it (docs/guide/endpoints.md, "Price follows the endpoint").
fn unpriced_notes(summary: &Summary) -> Vec<String> {
    let run = &summary.run;
    let endpoints: Vec<&crate::ProviderInfo> = if run.endpoints.is_empty() {
        vec![&run.provider]
    } else {
        run.endpoints.iter().collect()
    };
    endpoints
        .into_iter()
        .filter(|e| !e.simulated)
        .filter(|e| {
            summary
                .variants
                .iter()
                .filter(|v| run.endpoints.is_empty() || v.endpoint == e.endpoint)
                .any(|v| v.n > 0 && v.cost_usd.is_none())
        })
        .map(|e| {
            let (who, flag) = match (&e.endpoint, run.endpoints.is_empty()) {
                (Some(name), false) => (format!("endpoint {name} ("), format!("--price {name}=IN,OUT")),
                _ => ("the run's endpoint (".to_string(), "--price IN,OUT".to_string()),
            };
            format!(
                "Unpriced: {who}model {} at {}) had no price given for it, so its answers have no cost (–) and --budget and --max-cost refuse it; a price belongs to its endpoint, never another model's. Price it with {flag} (USD per million prompt and answer tokens; {} for a server that costs nothing) or a `price:` on its endpoint in the bench.",
                e.model,
                e.base_url,
                flag.replace("IN,OUT", "0")
            )
        })
        .collect()
}

/// The flaky cases shown by id before "and N more".
const FLAKY_SHOWN: usize = 20;

/// With repeats: a variant's pass@k and pass^k, and its flaky cases (repeats disagree).
fn repeats_note(v: &VariantSummary) -> Option<String> {
    use crate::text::{interval, pct};
    let p = v.repeats.pass_k.as_ref()?;
    let flaky = match v.repeats.flaky.as_slice() {
        [] => "no flaky case (every case's repeats agree)".to_string(),
        ids => {
            let shown = ids[..ids.len().min(FLAKY_SHOWN)].join(", ");
            let more = ids.len().saturating_sub(FLAKY_SHOWN);
            format!(
                "{} flaky (repeats disagree): {shown}{}",
                if ids.len() == 1 {
                    "1 case".to_string()
                } else {
                    format!("{} cases", ids.len())
                },
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        }
    };
    Some(format!(
        "{}: pass@{k} {} {} (right at least once in {k}), pass^{k} {} {} (right all {k} times), over {} cases; {flaky}.",
        v.name,
        pct(Some(p.pass_at_k)),
        interval(p.pass_at_k_ci_low, p.pass_at_k_ci_high),
        pct(Some(p.pass_all_k)),
        interval(p.pass_all_k_ci_low, p.pass_all_k_ci_high),
        p.cases,
        k = p.k,
    ))
}
