//! What a plan may cost, before anything is sent (`check`, and `--budget` at the start of a
//! run), and the prices a run's budget holds its jobs at (docs/guide/budget.md).

use super::{Failure, Prepared};
use crate::error::UsageError;
use promptgauge_client::attachment::FileTokens;
use promptgauge_report::ProviderInfo;
use promptgauge_report::usd as shown;
use promptgauge_runner::budget::{Prices, UNBOUNDED_COMPLETION, UNBOUNDED_JUDGE_COMPLETION};
use promptgauge_suite::{Job, Price};

/// Why a plan with files given by URL may cost more than its files will.
pub(super) const BY_URL: &str = "files given by URL are counted at the most a provider bills for them, their bytes being unknown before they are sent (an image at the largest size, a PDF at limits.max_pdf_pages pages)";

/// The cost of a plan's jobs, estimated: the prompts exactly as rendered (tokens estimated
/// from their length), the completions at most their `max_tokens`, the judge's calls at
/// most theirs.
#[derive(Debug, Default)]
pub(super) struct Estimate {
    pub prompt_tokens: u64,
    /// The sum of the jobs' completion ceilings; `None` when a variant has no `max_tokens`.
    pub completion_tokens: Option<u64>,
    /// Whether any job has a price.
    pub priced: bool,
    /// The prompts' cost.
    pub input: f64,
    /// The completions' at most; `None` when a variant has no `max_tokens`.
    pub output: Option<f64>,
    /// The judge's calls at most (their prompts with the answers at their ceilings, their
    /// replies at the judge's `max_tokens`, or 1,024 tokens).
    pub judge: f64,
    /// Judge calls are made and the judge has no price.
    pub judge_unpriced: bool,
    /// The plan is a `--best` search, which usually stops well before its last job.
    pub search: bool,
    /// Some job carries a file given by URL, counted at the most a provider bills for it
    /// (its bytes are not known before it is sent: a PDF at `limits.max_pdf_pages` pages).
    pub by_url: bool,
}

impl Estimate {
    /// The most the plan may cost; `None` when a completion has no ceiling.
    pub(super) fn at_most(&self) -> Option<f64> {
        self.output.map(|o| self.input + o + self.judge)
    }
}

/// The prices the run's jobs are costed at, lane by lane (each endpoint's own, or the
/// bench's; a batching endpoint's at its batch price), and the judge's: its own, or the
/// bench's when it is the model under test.
pub(super) fn prices(p: &Prepared, judge: Option<&super::settings::ResolvedJudge>) -> Prices {
    let at = |price: Option<&Price>, batch: bool| {
        price.map(|price| {
            if batch {
                price.batched()
            } else {
                price.clone()
            }
        })
    };
    let lanes = if p.grid.is_empty() {
        vec![at(p.bench.price.as_ref(), p.endpoint.batch)]
    } else {
        p.grid
            .iter()
            .map(|g| at(g.price.as_ref(), g.endpoint.batch))
            .collect()
    };
    // The judge's own price counts whatever scorer spends it (a judge, embeddings, a
    // command reporting usage); the bench's, when the judge is the model under test.
    let own = p.bench.judge.as_ref().and_then(|s| s.price.clone());
    let judge_price = own.or_else(|| {
        judge
            .filter(|j| j.info.same_model(&provider_info(p)))
            .and_then(|_| p.bench.price.clone())
    });
    let judge_completion = judge
        .and_then(|j| {
            j.params
                .get("max_completion_tokens")
                .or_else(|| j.params.get("max_tokens"))
                .and_then(serde_json::Value::as_u64)
        })
        .unwrap_or(UNBOUNDED_JUDGE_COMPLETION);
    Prices {
        lanes,
        judge: judge_price,
        judge_completion,
    }
}

/// Whether a job's answer is in the response cache (`--cache`): it costs nothing.
pub(super) type IsCached<'a> = &'a dyn Fn(&Job, &[promptgauge_client::ChatMessage]) -> bool;

/// [`IsCached`], owned: what a run builds from its response cache.
pub(super) type CachedTest = Box<dyn Fn(&Job, &[promptgauge_client::ChatMessage]) -> bool>;

/// The estimate of `jobs` at `prices`; an answer `cached` holds costs nothing (its
/// scorer's calls still count).
pub(super) fn estimate(
    p: &Prepared,
    jobs: &[Job],
    prices: &Prices,
    cached: IsCached<'_>,
) -> Result<Estimate, Failure> {
    let b = &p.bench;
    let mut e = Estimate {
        completion_tokens: Some(0),
        output: Some(0.0),
        search: p.sequential.as_ref().is_some_and(|s| s.best.is_some()),
        ..Estimate::default()
    };
    // Each endpoint's protocol, built once: its rule for what files cost.
    let default_protocol = p.endpoint.protocol.build();
    let by_endpoint: Vec<_> = p.grid.iter().map(|g| g.endpoint.protocol.build()).collect();
    for job in jobs {
        let case = &b.cases[job.case];
        let messages = b
            .render_job(job)
            .map_err(|e| Failure::Input(anyhow::anyhow!("template failed: {e}")))?;
        let ceiling = b.max_tokens(job.variant);
        let bought = !cached(job, &messages);
        e.by_url |= bought
            && messages
                .iter()
                .flat_map(|m| &m.files)
                .any(|p| p.file.url().is_some());
        // Files by the rule of the provider the job's endpoint speaks to.
        let protocol = by_endpoint
            .get(usize::from(job.endpoint))
            .unwrap_or(&default_protocol);
        let tokens = if bought {
            promptgauge_suite::prompt_tokens_by(&messages, |t: FileTokens| protocol.file_tokens(t))
        } else {
            0
        };
        e.prompt_tokens += tokens;
        e.completion_tokens = e
            .completion_tokens
            .zip(ceiling)
            .map(|(a, b)| if bought { a + b } else { a });
        if let Some(price) = prices
            .lanes
            .get(usize::from(job.endpoint))
            .cloned()
            .flatten()
            .filter(|_| bought)
        {
            e.priced = true;
            e.input += tokens as f64 * price.input_per_mtok / 1e6;
            e.output = e
                .output
                .zip(ceiling)
                .map(|(sum, max)| sum + max as f64 * price.output_per_mtok / 1e6);
        }
        let calls =
            p.scorers[job.case].calls(case, &messages, ceiling.unwrap_or(UNBOUNDED_COMPLETION));
        if calls.count > 0 || calls.prompt_tokens > 0 {
            match prices.calls_cost(calls) {
                Some(cost) => e.judge += cost,
                None => e.judge_unpriced = true,
            }
        }
    }
    Ok(e)
}

/// `--budget`: what the run needs to keep one — a price for every endpoint, and for the
/// judge when one scores — or an error that says which to add.
pub(super) fn check_priced(p: &Prepared, prices: &Prices, judged: bool) -> Result<(), UsageError> {
    if let Some((said, fix)) = p.unpriced_said() {
        return Err(UsageError::with_fix(
            format!("--budget needs to know what each request costs, and {said}"),
            format!("{fix}; or drop --budget"),
        ));
    }
    debug_assert!(prices.lanes.iter().all(Option::is_some));
    if judged && prices.judge.is_none() {
        return Err(UsageError::with_fix(
            "--budget counts what the scorers spend calling models (a judge's calls, embeddings), and the judge has no price",
            "add `price: { input_per_mtok: …, output_per_mtok: … }` to the bench's `judge:` (its price is the one scorers' calls are costed at), or drop --budget",
        ));
    }
    Ok(())
}

/// `--budget`: refuses a plan that may cost more than is left of the budget (`spent` went
/// to earlier sessions of the run), unless `--run-to-budget` says to start anyway; else the
/// line that says what it found.
pub(super) fn check_estimate(
    e: &Estimate,
    budget: f64,
    spent: f64,
    run_to_budget: bool,
) -> Result<String, UsageError> {
    let usd = |x: f64| shown(Some(x));
    let left = budget - spent;
    let earlier = if spent > 0.0 {
        format!(" ({} of it spent already)", usd(spent))
    } else {
        String::new()
    };
    let (over, what) = match e.at_most() {
        Some(most) => (
            most > left,
            format!(
                "the jobs left may cost up to {} ({} for their prompts, at most {} for their answers{})",
                usd(most),
                usd(e.input),
                usd(e.output.unwrap_or_default()),
                if e.judge > 0.0 {
                    format!(", {} for the judge's calls", usd(e.judge))
                } else {
                    String::new()
                }
            ),
        ),
        None => (
            e.input + e.judge > left,
            format!(
                "the jobs left cost {} for their prompts{} and their answers have no ceiling (set max_tokens to bound them)",
                usd(e.input),
                if e.judge > 0.0 {
                    format!(", up to {} for the judge's calls", usd(e.judge))
                } else {
                    String::new()
                }
            ),
        ),
    };
    if !over {
        return Ok(format!("budget {}{earlier}: {what}", usd(budget)));
    }
    if run_to_budget {
        return Ok(format!(
            "budget {}{earlier}: {what}; --run-to-budget: sending until the budget is reached, the rest not run",
            usd(budget)
        ));
    }
    let fix = if e.search {
        "a --best search usually stops well before its last job (`promptgauge plan --best K` says how many it takes): add --run-to-budget to send until the budget is reached, the answer then naming the arms still in play; or raise --budget"
    } else {
        "raise --budget, run fewer jobs (--limit, --variants, --shard), lower max_tokens, or add --run-to-budget to send until the budget is reached"
    };
    let fix = if e.by_url {
        format!("{BY_URL}: --fetch-urls downloads them and counts what they hold; or {fix}")
    } else {
        fix.to_string()
    };
    Err(UsageError::with_fix(
        format!(
            "{what}, over the budget of {}{earlier}; nothing was sent",
            usd(budget)
        ),
        fix,
    ))
}

/// Where the answers come from, as shown and stored (no credentials): in a run of several
/// endpoints, the baseline endpoint.
pub(super) fn provider_info(p: &Prepared) -> ProviderInfo {
    p.endpoint.info()
}
