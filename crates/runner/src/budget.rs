//! `--budget USD`: a spending cap the run keeps while it sends (docs/guide/budget.md). Before a
//! job is sent its most possible cost is held back — its prompt at the input price, its
//! completion ceiling (`max_tokens`) at the output price, and its judge's calls at the
//! judge's price — and once it finishes, what it was billed takes the hold's place. A job
//! whose hold would take the spent and the held past the budget is not sent, nor is any
//! after it: the run ends with them not run, for a resume with a larger budget.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::JobRecord;
use crate::job_record::HeldBack;
use promptgauge_client::ChatMessage;
use promptgauge_grade::Scorer;
use promptgauge_suite::{Bench, Job, Price};

/// The completion a request without `max_tokens` is held back for: such a request has no
/// ceiling, and `check` says to set one.
pub const UNBOUNDED_COMPLETION: u64 = 4096;

/// The completion a judge call without `max_tokens` is held back for.
pub const UNBOUNDED_JUDGE_COMPLETION: u64 = 1024;

/// The prices a run's jobs are costed at.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    /// Each endpoint's (lane's) price, by `Job::endpoint`: the batch price for a batching
    /// lane.
    pub lanes: Vec<Option<Price>>,
    /// The judge's.
    pub judge: Option<Price>,
    /// The judge's completion ceiling.
    pub judge_completion: u64,
}

impl Prices {
    /// What one job is held for, in tokens: its prompt (its files by the rule that counts
    /// most), its completion ceiling and its scorer's model calls, each reply at the
    /// judge's ceiling (only the scorer's when its answer is `cached`).
    pub(crate) fn held(
        &self,
        bench: &Bench,
        job: &Job,
        messages: &[ChatMessage],
        scorer: &dyn Scorer,
        cached: bool,
    ) -> HeldBack {
        let completion = bench
            .max_tokens(job.variant)
            .unwrap_or(UNBOUNDED_COMPLETION);
        let calls = scorer.calls(&bench.cases[job.case], messages, completion);
        HeldBack {
            prompt_tokens: if cached {
                0
            } else {
                promptgauge_suite::prompt_tokens(messages)
            },
            completion_tokens: if cached { 0 } else { completion },
            scorer_calls: calls.count,
            scorer_prompt_tokens: calls.prompt_tokens,
            scorer_completion_tokens: calls.count * self.judge_completion,
        }
    }

    /// The most one job may cost: what it is [`Prices::held`] for, at its endpoint's price
    /// and the judge's.
    pub fn ceiling(
        &self,
        bench: &Bench,
        job: &Job,
        messages: &[ChatMessage],
        scorer: &dyn Scorer,
        cached: bool,
    ) -> f64 {
        let held = self.held(bench, job, messages, scorer, cached);
        let answer = match self.lanes.get(usize::from(job.endpoint)) {
            Some(Some(p)) => p.cost(&promptgauge_client::Usage {
                prompt_tokens: held.prompt_tokens,
                completion_tokens: held.completion_tokens,
                ..Default::default()
            }),
            _ => 0.0,
        };
        let scorer = self.judge.as_ref().map_or(0.0, |p| {
            p.cost(&promptgauge_client::Usage {
                prompt_tokens: held.scorer_prompt_tokens,
                completion_tokens: held.scorer_completion_tokens,
                ..Default::default()
            })
        });
        answer + scorer
    }

    /// The most a scorer's model calls cost at the judge's price (each reply at the
    /// judge's completion ceiling); `None` when the judge has no price.
    pub fn calls_cost(&self, calls: promptgauge_grade::scorer::Calls) -> Option<f64> {
        self.judge.as_ref().map(|p| {
            p.cost(&promptgauge_client::Usage {
                prompt_tokens: calls.prompt_tokens,
                completion_tokens: calls.count * self.judge_completion,
                ..Default::default()
            })
        })
    }

    /// What these attempts were billed, at the price of endpoint `lane`.
    pub fn attempts_billed(&self, attempts: &[promptgauge_client::Attempt], lane: usize) -> f64 {
        match self.lanes.get(lane).cloned().flatten() {
            Some(price) => attempts
                .iter()
                .filter_map(|a| a.usage.as_ref())
                .map(|u| price.cost(u))
                .sum(),
            None => 0.0,
        }
    }

    /// What a finished job was billed, at the price of its endpoint (`lane`).
    pub fn billed(&self, record: &JobRecord, lane: usize) -> f64 {
        let price = self.lanes.get(lane).cloned().flatten();
        record.cost_usd(price.as_ref(), self.judge.as_ref())
    }
}

/// The budget of a run: what it may spend, what it has, and what its jobs in flight hold.
#[derive(Debug)]
pub struct Budget {
    limit: f64,
    prices: Prices,
    ledger: Mutex<Ledger>,
    reached: AtomicBool,
}

#[derive(Debug, Default)]
struct Ledger {
    spent: f64,
    /// Each job in flight's hold, and its lane, by plan position.
    held: HashMap<usize, (f64, usize)>,
    holding: f64,
    /// The hold that did not fit, when one did not.
    refused: Option<f64>,
    /// What the finished steps of agent loops still in flight cost, by plan position: in
    /// `spent` already, so their job's bill adds only the rest.
    steps_paid: HashMap<usize, f64>,
}

impl Budget {
    /// A budget of `limit` USD of which `spent` went to earlier sessions of the run.
    pub fn new(limit: f64, spent: f64, prices: Prices) -> Budget {
        Budget {
            limit,
            prices,
            ledger: Mutex::new(Ledger {
                spent,
                ..Default::default()
            }),
            reached: AtomicBool::new(false),
        }
    }

    pub(crate) fn prices(&self) -> &Prices {
        &self.prices
    }

    pub fn limit(&self) -> f64 {
        self.limit
    }

    /// Holds back `usd` for job `index` at `lane` before it is sent; `false` (and the
    /// budget is reached: nothing more is sent) when the spent, the held and this would go
    /// past the budget.
    pub(crate) fn hold(&self, index: usize, lane: usize, usd: f64) -> bool {
        if self.reached() {
            return false;
        }
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        // Reserved already (a batch a resume adopts, then submitted anew when it was never
        // created): held once.
        if l.held.contains_key(&index) {
            return true;
        }
        if !self.admits(&mut l, usd) {
            return false;
        }
        l.held.insert(index, (usd, lane));
        true
    }

    /// Whether `usd` more fits beside what is spent and held: held when it does; when it
    /// does not, the budget is reached (nothing more is sent).
    fn admits(&self, l: &mut Ledger, usd: f64) -> bool {
        if l.spent + l.holding + usd > self.limit {
            l.refused = Some(usd);
            self.reached.store(true, Ordering::SeqCst);
            return false;
        }
        l.holding += usd;
        true
    }

    /// Holds back `usd` more for job `index` (an agent loop's next step, whose request
    /// carries what the steps before it returned); `false` when it does not fit, and then
    /// nothing more is sent.
    pub(crate) fn hold_more(&self, index: usize, lane: usize, usd: f64) -> bool {
        if self.reached() {
            return false;
        }
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if !self.admits(&mut l, usd) {
            return false;
        }
        l.held.entry(index).or_insert((0.0, lane)).0 += usd;
        true
    }

    /// Holds back `usd` for job `index` whatever is left: a job already sent and paid for
    /// (in a provider batch a resume adopts) is collected whatever the budget says, and
    /// what it may cost counts against what may still be sent.
    pub(crate) fn reserve(&self, index: usize, lane: usize, usd: f64) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if l.held.insert(index, (usd, lane)).is_none() {
            l.holding += usd;
        }
    }

    /// What is held for job `index` now, if anything.
    pub(crate) fn held_for(&self, index: usize) -> Option<f64> {
        let l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        l.held.get(&index).map(|(usd, _)| *usd)
    }

    /// Lets go of job `index`'s hold: it was never sent.
    pub(crate) fn release(&self, index: usize) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((usd, _)) = l.held.remove(&index) {
            l.holding = (l.holding - usd).max(0.0);
        }
    }

    /// A finished job's bill takes its hold's place (less what its loop's steps were
    /// counted for as they ended).
    pub(crate) fn settle(&self, record: &JobRecord) {
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let lane = match l.held.remove(&record.job) {
            Some((usd, lane)) => {
                l.holding = (l.holding - usd).max(0.0);
                lane
            }
            None => return,
        };
        let counted = l.steps_paid.remove(&record.job).unwrap_or(0.0);
        l.spent += self.prices.billed(record, lane) - counted;
    }

    /// An agent loop's step of job `index` ended (`attempts`, at `lane`): what it was
    /// billed is spent now, whether or not the loop ever finishes. `counted`: already in
    /// what the run spent (a step a resume took from the journal).
    pub(crate) fn step_paid(
        &self,
        index: usize,
        lane: usize,
        attempts: &[promptgauge_client::Attempt],
        counted: bool,
    ) {
        let usd = self.prices.attempts_billed(attempts, lane);
        let mut l = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        *l.steps_paid.entry(index).or_insert(0.0) += usd;
        if !counted {
            l.spent += usd;
        }
    }

    /// Whether a job was refused: nothing more is sent.
    pub fn reached(&self) -> bool {
        self.reached.load(Ordering::SeqCst)
    }

    /// What the run has spent, its earlier sessions' included.
    pub fn spent(&self) -> f64 {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner()).spent
    }

    #[cfg(test)]
    /// The hold that did not fit.
    pub(crate) fn refused(&self) -> Option<f64> {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(limit: f64) -> Budget {
        Budget::new(
            limit,
            0.25,
            Prices {
                lanes: vec![Some(Price::streaming(1.0, 2.0))],
                ..Default::default()
            },
        )
    }

    #[test]
    fn a_hold_that_would_pass_the_budget_stops_the_sending() {
        let b = budget(1.0);
        assert!(b.hold(0, 0, 0.5));
        // 0.25 spent + 0.5 held + 0.3 > 1.0.
        assert!(!b.hold(1, 0, 0.3));
        assert!(b.reached());
        assert_eq!(b.refused(), Some(0.3));
        // Once reached, even a hold that fits is refused: jobs go in plan order.
        assert!(!b.hold(2, 0, 0.0001));
    }

    #[test]
    fn a_reservation_is_held_past_the_limit_and_stops_what_would_follow() {
        let b = budget(1.0);
        // An adopted batch's jobs: held though they pass the budget.
        b.reserve(0, 0, 0.5);
        b.reserve(1, 0, 0.5);
        b.reserve(1, 0, 0.5);
        assert_eq!(b.held_for(1), Some(0.5));
        assert!(!b.reached());
        // A reserved job sent anew is held once.
        assert!(b.hold(1, 0, 0.5));
        assert_eq!(b.held_for(1), Some(0.5));
        // 0.25 spent + 1.0 held: no new job fits.
        assert!(!b.hold(2, 0, 0.0001));
    }

    #[test]
    fn a_finished_job_s_bill_takes_its_hold_s_place() {
        let b = budget(1.0);
        assert!(b.hold(7, 0, 0.7));
        let record: JobRecord = serde_json::from_value(serde_json::json!({
            "job": 7, "case_id": "c", "variant": "v", "repeat": 0,
            "status": "graded", "outcome": "complete", "output": "x", "finish_reason": "stop",
            "expected": ["x"], "extracted": null, "correct": true, "score": 1.0,
            "error": null, "attempts": [], "ttft_ms": null, "latency_ms": null, "model": null,
            "usage": {"prompt_tokens": 100_000, "completion_tokens": 50_000, "cached_tokens": 0,
                      "reasoning_tokens": 0, "estimated": false}
        }))
        .unwrap();
        b.settle(&record);
        // 0.1 for the input, 0.1 for the output.
        assert!((b.spent() - 0.45).abs() < 1e-12, "{}", b.spent());
        assert!(b.hold(8, 0, 0.55));
        // A record with no hold (replayed, or never held) is not counted twice.
        b.settle(&record);
        assert!((b.spent() - 0.45).abs() < 1e-12);
    }

    #[test]
    fn a_released_hold_frees_its_room_and_spends_nothing() {
        // 0.25 spent by earlier sessions: 0.75 left.
        let b = budget(1.0);
        assert!(b.hold(1, 0, 0.7));
        assert!(!budget(1.0).hold(2, 0, 0.7 + 0.1));
        b.release(1);
        b.release(1);
        assert_eq!(b.held_for(1), None);
        assert_eq!(b.spent(), 0.25);
        // The room it held is free again.
        assert!(b.hold(3, 0, 0.74));
    }
}
