//! Where attempts go: one or more replicas of an endpoint, each with its own concurrency
//! gate. An attempt takes a permit from whichever healthy replica frees one first, so a slow
//! replica never holds a backlog (work stealing). A replica that keeps failing is benched
//! for a while. With `adaptive`, each gate shrinks on 429s (or when the rate-limit headers
//! run low) and grows back after a window of successes (AIMD).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::select_all;
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

/// Consecutive failures that bench a replica (when others exist).
const BENCH_AFTER: u32 = 3;
/// How long a benched replica rests; doubles each time it is benched again, up to 5 min.
const BENCH_FOR: Duration = Duration::from_secs(15);
/// At most one cut per this long, so one burst of 429s does not collapse the gate.
const CUT_COOLDOWN: Duration = Duration::from_millis(500);
/// No growth this soon after a cut: let the cut show its effect first.
const GROW_AFTER_CUT: Duration = Duration::from_secs(2);

/// A change worth recording in the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolEvent {
    /// `concurrency` or `benched`.
    pub event: String,
    pub replica: usize,
    pub base_url: String,
    /// For `concurrency`: the gate's size before and after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<usize>,
    /// For `benched`: for how long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub for_ms: Option<u64>,
    pub reason: String,
}

/// A concurrency gate whose size can change while permits are out.
pub(crate) struct Gate {
    sem: Semaphore,
    limit: AtomicUsize,
    max: usize,
    /// Permits to retire as they come back (after a cut).
    debt: AtomicUsize,
    successes: AtomicUsize,
    last_cut: Mutex<Option<Instant>>,
}

/// A permit of a gate; dropping it returns it (or retires it after a cut).
pub(crate) struct Permit<'a> {
    gate: &'a Gate,
    permit: Option<SemaphorePermit<'a>>,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            let owed = self
                .gate
                .debt
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| d.checked_sub(1));
            if owed.is_ok() {
                p.forget();
            }
        }
    }
}

impl Gate {
    /// A gate of `size` permits (at least one).
    pub(crate) fn new(size: usize) -> Self {
        let size = size.max(1);
        Gate {
            sem: Semaphore::new(size),
            limit: AtomicUsize::new(size),
            max: size,
            debt: AtomicUsize::new(0),
            successes: AtomicUsize::new(0),
            last_cut: Mutex::new(None),
        }
    }

    /// How many permits it gives out now.
    pub(crate) fn limit(&self) -> usize {
        self.limit.load(Ordering::SeqCst)
    }

    async fn acquire(&self) -> Option<Permit<'_>> {
        self.sem.acquire().await.ok().map(|p| Permit {
            gate: self,
            permit: Some(p),
        })
    }

    fn try_acquire(&self) -> Option<Permit<'_>> {
        self.sem.try_acquire().ok().map(|p| Permit {
            gate: self,
            permit: Some(p),
        })
    }

    /// Halves the gate (not below 1); returns (from, to) when it changed.
    fn cut(&self) -> Option<(usize, usize)> {
        let mut last = self.last_cut.lock().ok()?;
        let now = Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < CUT_COOLDOWN) {
            return None;
        }
        let from = self.limit();
        let to = (from / 2).max(1);
        if to == from {
            return None;
        }
        *last = Some(now);
        self.limit.store(to, Ordering::SeqCst);
        self.successes.store(0, Ordering::SeqCst);
        // Retire idle permits now, the rest as they come back.
        let mut owed = from - to;
        while owed > 0 {
            match self.sem.try_acquire() {
                Ok(p) => {
                    p.forget();
                    owed -= 1;
                }
                Err(_) => break,
            }
        }
        self.debt.fetch_add(owed, Ordering::SeqCst);
        Some((from, to))
    }

    /// Counts a success; after two full windows of them (and not soon after a cut) the gate
    /// grows by one.
    fn grow(&self) -> Option<(usize, usize)> {
        let from = self.limit();
        if from >= self.max {
            return None;
        }
        if self.successes.fetch_add(1, Ordering::SeqCst) + 1 < 2 * from {
            return None;
        }
        let recent_cut = self
            .last_cut
            .lock()
            .ok()
            .and_then(|t| *t)
            .is_some_and(|t| t.elapsed() < GROW_AFTER_CUT);
        if recent_cut {
            return None;
        }
        self.successes.store(0, Ordering::SeqCst);
        self.limit.store(from + 1, Ordering::SeqCst);
        let owed = self
            .debt
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| d.checked_sub(1));
        if owed.is_err() {
            self.sem.add_permits(1);
        }
        Some((from, from + 1))
    }
}

/// One endpoint serving the model, with its own gate and health.
pub(crate) struct Replica {
    /// As shown and stored: without credentials.
    pub base_url: String,
    /// Where requests go (may carry credentials; never shown).
    pub url: String,
    /// `url` as it may be shown.
    pub shown_url: String,
    pub gate: Gate,
    failures: AtomicU32,
    benched_until: Mutex<Option<Instant>>,
    benchings: AtomicU32,
}

/// How an attempt went, as far as the pool cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    Ok,
    /// 429, or rate-limit headers running low.
    Throttled,
    /// A server-side failure: 5xx, a broken or silent stream, no connection.
    Failed,
    /// The request's fault (4xx): says nothing about the replica.
    Neutral,
}

/// The replicas of one endpoint, and which one an attempt goes to.
pub(crate) struct Pool {
    pub replicas: Vec<Replica>,
    adaptive: bool,
    next: AtomicUsize,
    events: Mutex<Vec<PoolEvent>>,
}

impl Pool {
    /// `endpoints`: each replica's base URL (as the user gave it) and the URL requests go to.
    pub(crate) fn new(endpoints: &[(String, String)], concurrency: usize, adaptive: bool) -> Self {
        Pool {
            replicas: endpoints
                .iter()
                .map(|(base, url)| Replica {
                    base_url: super::secrets::redact_url(base),
                    url: url.clone(),
                    shown_url: super::secrets::redact_url(url),
                    gate: Gate::new(concurrency),
                    failures: AtomicU32::new(0),
                    benched_until: Mutex::new(None),
                    benchings: AtomicU32::new(0),
                })
                .collect(),
            adaptive,
            next: AtomicUsize::new(0),
            events: Mutex::new(Vec::new()),
        }
    }

    /// Permits across all replicas: how many attempts may be in flight at once.
    pub(crate) fn capacity(&self) -> usize {
        self.replicas.iter().map(|r| r.gate.max).sum()
    }

    fn benched(&self, i: usize, now: Instant) -> Option<Instant> {
        self.replicas[i]
            .benched_until
            .lock()
            .ok()
            .and_then(|b| *b)
            .filter(|&until| until > now)
    }

    /// Waits for a permit on a healthy replica; the first free one wins.
    pub(crate) async fn acquire(&self) -> (usize, Permit<'_>) {
        loop {
            let now = Instant::now();
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            let n = self.replicas.len();
            let mut healthy: Vec<usize> = (0..n)
                .map(|k| (start + k) % n)
                .filter(|&i| self.benched(i, now).is_none())
                .collect();
            if healthy.is_empty() {
                // Everyone is resting. Waiting for a bench to end would make a job wait
                // longer for a failing endpoint than its own deadlines allow: send to the
                // replica due back first, as if there were one endpoint, and let the job's
                // retries and deadlines decide.
                let mut all: Vec<usize> = (0..n).collect();
                all.sort_by_key(|&i| self.benched(i, now));
                healthy = all;
            }
            for &i in &healthy {
                if let Some(p) = self.replicas[i].gate.try_acquire() {
                    return (i, p);
                }
            }
            let waits = healthy.iter().map(|&i| {
                let gate = &self.replicas[i].gate;
                Box::pin(async move { (i, gate.acquire().await) })
            });
            // Re-check now and then: a benched replica may come back meanwhile.
            let recheck = tokio::time::sleep(Duration::from_secs(1));
            tokio::select! {
                ((i, permit), _, _) = select_all(waits) => {
                    if let Some(p) = permit {
                        let now = Instant::now();
                        let everyone_benched = (0..n).all(|k| self.benched(k, now).is_some());
                        if everyone_benched || self.benched(i, now).is_none() {
                            return (i, p);
                        }
                    }
                }
                _ = recheck => {}
            }
        }
    }

    /// Benches replica `i` now, as if it had failed [`BENCH_AFTER`] times in a row (a
    /// replica that did not answer the preflight): attempts go to the others, and it is
    /// tried again when its rest ends. With one replica, nothing changes.
    pub(crate) fn bench(&self, i: usize, why: &str) {
        if self.replicas.len() < 2 || i >= self.replicas.len() {
            return;
        }
        let r = &self.replicas[i];
        let times = r.benchings.fetch_add(1, Ordering::SeqCst).min(4);
        let rest = BENCH_FOR * 2u32.pow(times);
        if let Ok(mut until) = r.benched_until.lock() {
            *until = Some(Instant::now() + rest);
        }
        self.event(i, "benched", None, Some(rest), why);
    }

    /// Records how an attempt on replica `i` went.
    pub(crate) fn report(&self, i: usize, health: Health, why: &str) {
        let r = &self.replicas[i];
        match health {
            Health::Ok => {
                r.failures.store(0, Ordering::SeqCst);
                if self.adaptive
                    && let Some((from, to)) = r.gate.grow()
                {
                    self.event(
                        i,
                        "concurrency",
                        Some((from, to)),
                        None,
                        "sustained success",
                    );
                }
            }
            Health::Throttled => {
                if self.adaptive
                    && let Some((from, to)) = r.gate.cut()
                {
                    self.event(i, "concurrency", Some((from, to)), None, why);
                }
            }
            Health::Failed => {
                let failures = r.failures.fetch_add(1, Ordering::SeqCst) + 1;
                if self.replicas.len() > 1 && failures >= BENCH_AFTER {
                    r.failures.store(0, Ordering::SeqCst);
                    let times = r.benchings.fetch_add(1, Ordering::SeqCst).min(4);
                    let rest = BENCH_FOR * 2u32.pow(times);
                    if let Ok(mut until) = r.benched_until.lock() {
                        *until = Some(Instant::now() + rest);
                    }
                    self.event(
                        i,
                        "benched",
                        None,
                        Some(rest),
                        &format!("{failures} failures in a row; last: {why}"),
                    );
                }
            }
            Health::Neutral => {}
        }
    }

    fn event(
        &self,
        i: usize,
        kind: &str,
        change: Option<(usize, usize)>,
        rest: Option<Duration>,
        why: &str,
    ) {
        if let Ok(mut events) = self.events.lock() {
            events.push(PoolEvent {
                event: kind.to_string(),
                replica: i,
                base_url: self.replicas[i].base_url.clone(),
                from: change.map(|c| c.0),
                to: change.map(|c| c.1),
                for_ms: rest.map(|d| d.as_millis() as u64),
                reason: why.to_string(),
            });
        }
    }

    /// The changes since the last call, for the journal.
    pub(crate) fn take_events(&self) -> Vec<PoolEvent> {
        self.events
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Vec<(String, String)> {
        ["http://a/v1", "http://b/v1"]
            .map(|b| (b.to_string(), format!("{b}/chat/completions")))
            .to_vec()
    }

    #[tokio::test(start_paused = true)]
    async fn a_cut_gate_retires_permits_as_they_return_and_grows_back() {
        let gate = Gate::new(4);
        let held: Vec<_> = (0..4).map(|_| gate.try_acquire().unwrap()).collect();
        assert_eq!(gate.cut(), Some((4, 2)));
        assert_eq!(gate.cut(), None, "cooldown");
        drop(held);
        // Two permits were retired on return: only two are free now.
        let a = gate.try_acquire().unwrap();
        let b = gate.try_acquire().unwrap();
        assert!(gate.try_acquire().is_none());
        drop((a, b));
        tokio::time::advance(CUT_COOLDOWN).await;
        assert_eq!(gate.cut(), Some((2, 1)));
        // Two windows of successes, but too soon after the cut.
        assert_eq!((gate.grow(), gate.grow()), (None, None));
        tokio::time::advance(GROW_AFTER_CUT).await;
        assert_eq!(gate.grow(), Some((1, 2)));
        assert_eq!((gate.grow(), gate.grow(), gate.grow()), (None, None, None));
        assert_eq!(gate.grow(), Some((2, 3)));
        let held: Vec<_> = (0..3).map(|_| gate.try_acquire().unwrap()).collect();
        assert!(gate.try_acquire().is_none());
        assert_eq!(held.len(), gate.limit());
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_replica_is_benched_and_comes_back() {
        let pool = Pool::new(&two(), 1, false);
        for _ in 0..BENCH_AFTER {
            pool.report(0, Health::Failed, "HTTP 500");
        }
        let events = pool.take_events();
        assert_eq!(events.len(), 1);
        assert_eq!(
            (events[0].event.as_str(), events[0].replica),
            ("benched", 0)
        );
        for _ in 0..5 {
            let (i, _p) = pool.acquire().await;
            assert_eq!(i, 1, "a benched replica gets nothing");
        }
        tokio::time::advance(BENCH_FOR).await;
        let mut seen = [false; 2];
        for _ in 0..4 {
            let (i, _p) = pool.acquire().await;
            seen[i] = true;
        }
        assert_eq!(seen, [true, true]);
    }

    #[tokio::test(start_paused = true)]
    async fn with_every_replica_benched_a_job_is_sent_at_once_not_parked() {
        let pool = Pool::new(&two(), 1, false);
        for _ in 0..BENCH_AFTER {
            pool.report(0, Health::Failed, "HTTP 500");
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..BENCH_AFTER {
            pool.report(1, Health::Failed, "HTTP 500");
        }
        let start = Instant::now();
        let (i, _p) = pool.acquire().await;
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "no wait for a bench to end"
        );
        assert_eq!(i, 0, "the replica due back first");
    }

    #[test]
    fn urls_keep_the_query_and_hide_credentials() {
        let base = "https://u:secretpass@x.azure.com/openai/deployments/d?api-version=1";
        let url = crate::Protocol::url(&crate::OpenAiChat, base, "m");
        assert_eq!(
            url,
            "https://u:secretpass@x.azure.com/openai/deployments/d/chat/completions?api-version=1"
        );
        let pool = Pool::new(&[(base.to_string(), url)], 1, false);
        let r = &pool.replicas[0];
        assert_eq!(
            r.base_url,
            "https://[redacted]@x.azure.com/openai/deployments/d?api-version=1"
        );
    }
}
