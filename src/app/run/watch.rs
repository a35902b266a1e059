//! The listeners that stop a run early: its first jobs all failing alike, an outage; and
//! the batch notes said as they happen.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::Prepared;
use promptgauge_runner as runner;
use promptgauge_runner::events::Listener;
use promptgauge_runner::record::StopReason;

/// The listeners that stop sending early: when the first jobs all fail the same way
/// (a wrong model, URL or key), and when most jobs fail the same passing way (an outage).
/// In a run of several endpoints an outage is watched per endpoint, and stops only that
/// endpoint's lane: the others go on.
pub(super) fn watchers(
    p: &Prepared,
    dispatch: &CancellationToken,
    lanes: &[runner::Lane],
) -> (FirstFailures, Outage) {
    let gates = p.gates();
    let outage = if p.grid.is_empty() {
        Outage::new((2 * gates).clamp(8, 32), dispatch.clone())
    } else {
        Outage::per_endpoint(
            p.grid
                .iter()
                .zip(lanes)
                .map(|(g, lane)| {
                    let window = (2 * g.gates()).clamp(8, 32);
                    (g.name().to_string(), window, lane.dispatch.clone())
                })
                .collect(),
        )
    };
    (
        FirstFailures::new(gates.clamp(3, 32), dispatch.clone()),
        outage,
    )
}

/// Says each provider batch's submission and end on stderr.
/// `--best` without the live line: each arm out, and the answer, said as they are reached
/// (the journal keeps them; a log should show them).
pub(super) struct SearchNotes(pub(super) promptgauge_runner::sequential::Decisions);

impl Listener for SearchNotes {
    fn on(&mut self, _: &runner::RunEvent<'_>) -> std::io::Result<()> {
        let reached: Vec<_> = self.0.lock().map(|q| q.clone()).unwrap_or_default();
        for line in reached
            .iter()
            .filter_map(promptgauge_report::listeners::progress::search_line)
        {
            note!("{line}");
        }
        Ok(())
    }
}

pub(super) struct BatchNotes;

impl Listener for BatchNotes {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        use promptgauge_runner::batch::BatchStep;
        let runner::RunEvent::Batch(b) = event else {
            return Ok(());
        };
        let id = promptgauge_report::visible(b.id.as_deref().unwrap_or(&b.name), 80);
        let at = b
            .endpoint
            .as_ref()
            .map(|e| format!(" at endpoint {e}"))
            .unwrap_or_default();
        match b.step {
            BatchStep::Submitted => note!("batch {id}{at}: submitted"),
            BatchStep::Ended => {
                let [done, failed, total] = b.counts.unwrap_or_default();
                let status = promptgauge_report::visible(b.status.as_deref().unwrap_or(""), 40);
                note!("batch {id}{at}: {status}, {done} of {total} answered, {failed} failed");
            }
            BatchStep::Left => {
                note!("batch {id}{at}: still running when --batch-wait passed; left for a resume")
            }
            BatchStep::Disowned => note!(
                "batch {id}{at}: found by its size and time, but its results are not this run's; its jobs are submitted again"
            ),
            BatchStep::Polled | BatchStep::Submitting => {}
        }
        Ok(())
    }
}

/// How a job's error begins when its `command` scorer failed it.
pub(super) const COMMAND_SCORER_FAILED: &str = "could not be scored: the scorer `";

/// How a job's error begins when its `expr` scorer failed it.
const EXPR_SCORER_FAILED: &str = "could not be scored: the expression `";

/// Stops a run whose first jobs all failed the same way for a reason waiting will not
/// cure (a 4xx other than 408/429: a wrong model, a wrong path, a bad parameter; a
/// `command` scorer that fails every answer alike): the rest would fail the same way, at
/// the same cost in time (and, for the scorer, in answers paid for and thrown away).
pub(super) struct FirstFailures {
    watch: usize,
    seen: Vec<(Option<u16>, String)>,
    dispatch: tokio_util::sync::CancellationToken,
    /// The shared cause (with its hint) once the watched jobs all failed alike, and
    /// whether the scorer failed them (their answers came back) rather than the provider.
    tripped: Option<(String, bool)>,
}

impl FirstFailures {
    fn new(watch: usize, dispatch: tokio_util::sync::CancellationToken) -> Self {
        FirstFailures {
            watch,
            seen: Vec::new(),
            dispatch,
            tripped: None,
        }
    }

    /// Whether the first jobs all failed alike and the sending was stopped.
    pub(super) fn stopped(&self) -> bool {
        self.tripped.is_some()
    }

    /// Why the run stopped, once the sending is over: how many of the run's jobs were
    /// sent and how many were not, as the tally counts them. Jobs already in flight when
    /// the watch tripped finish, and a small run may have sent every job by then: then
    /// none is said to be "not sent".
    pub(super) fn reason(&self, tally: &runner::RunTally) -> Option<StopReason> {
        let (cause, answered) = self.tripped.as_ref()?;
        let sent = tally.finished;
        let total = sent + tally.not_run;
        let jobs = |n: usize| if n == 1 { "job" } else { "jobs" };
        let how = if *answered {
            "sent and answered"
        } else {
            "sent"
        };
        let said = if tally.not_run == 0 {
            format!(
                "the first {} jobs all failed the same way (all {total} {} of the run were {how}): {cause}",
                self.watch,
                jobs(total)
            )
        } else {
            format!(
                "the first {} jobs all failed the same way, so the run stopped: {sent} of its {total} {} were {how}, {} not sent: {cause}",
                self.watch,
                jobs(total),
                tally.not_run
            )
        };
        Some(StopReason::Refused(said))
    }
}

impl Listener for FirstFailures {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        let runner::RunEvent::JobFinished { record, .. } = event else {
            return Ok(());
        };
        // A batch's results come all at once, long after it was sent: its own failures
        // (a refused batch, an expired one) are said with it.
        if record.batch.is_some() {
            return Ok(());
        }
        if self.seen.len() >= self.watch || self.tripped.is_some() {
            return Ok(());
        }
        let status = record.failure_status();
        // A scorer of the bench's own that cannot score (a `command` that crashes at
        // start, an expression that fails on every answer) fails every answer after it
        // was paid for.
        let scorer_broken = [COMMAND_SCORER_FAILED, EXPR_SCORER_FAILED]
            .iter()
            .any(|p| record.error_line().starts_with(p));
        let lasting = scorer_broken
            || matches!(status, Some(s) if (400..500).contains(&s) && s != 408 && s != 429);
        if record.status != promptgauge_runner::journal::JobStatus::Failed || !lasting {
            // One job that got through (or failed for a passing reason) ends the watch.
            self.watch = 0;
            return Ok(());
        }
        self.seen.push((status, record.error_line().to_string()));
        if self.seen.len() == self.watch && self.seen.iter().all(|c| *c == self.seen[0]) {
            let (status, cause) = &self.seen[0];
            let hint = promptgauge_report::causes::hint(*status, cause)
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            self.tripped = Some((format!("{cause}{hint}"), scorer_broken));
            self.dispatch.cancel();
        }
        Ok(())
    }
}

/// How close together the failures that stop a run as an outage must be.
pub(super) const OUTAGE_SPAN: Duration = Duration::from_secs(120);

/// Stops sending when the server looks down: of the last `window` jobs, at least four in
/// five failed the same passing way (the same 5xx, no connection, the same timeout) within
/// [`OUTAGE_SPAN`]. Otherwise every remaining job would spend its attempts in seconds and
/// be final; stopped, they are sent by `--resume --retry-failed` once the server is back.
/// With one endpoint the whole run stops; in a run of several, each endpoint is watched
/// over its own latest jobs and only its lane stops (the others go on).
pub(super) struct Outage {
    /// Per endpoint (one, unnamed, with one endpoint): its window of latest jobs.
    watched: Vec<Watched>,
    /// Each outage seen, as said.
    whys: Vec<String>,
    pub(super) stopped: Option<StopReason>,
}

/// One endpoint's latest jobs, and what stops its sending.
pub(super) struct Watched {
    /// Its name in records (`None`: the run's one endpoint).
    endpoint: Option<String>,
    window: usize,
    /// The last jobs: each a transient failure's (signature, when, cause), or `None`.
    recent: std::collections::VecDeque<Option<(String, tokio::time::Instant, String)>>,
    dispatch: CancellationToken,
    stopped: bool,
}

impl Outage {
    fn new(window: usize, dispatch: CancellationToken) -> Self {
        Outage {
            watched: vec![Watched::new(None, window, dispatch)],
            whys: Vec::new(),
            stopped: None,
        }
    }

    /// Each endpoint by its name, with its window and its lane's dispatch token.
    fn per_endpoint(endpoints: Vec<(String, usize, CancellationToken)>) -> Self {
        Outage {
            watched: endpoints
                .into_iter()
                .map(|(name, window, dispatch)| Watched::new(Some(name), window, dispatch))
                .collect(),
            whys: Vec::new(),
            stopped: None,
        }
    }
}

impl Watched {
    fn new(endpoint: Option<String>, window: usize, dispatch: CancellationToken) -> Self {
        Watched {
            endpoint,
            window,
            recent: std::collections::VecDeque::new(),
            dispatch,
            stopped: false,
        }
    }

    /// Hears one of its jobs; says why it stopped, when this job showed an outage.
    fn hear(&mut self, record: &promptgauge_runner::JobRecord) -> Option<String> {
        let entry = record.failed_transiently().then(|| {
            let (outcome, status) = record.failure_outcome();
            let signature = format!("{status:?}/{}", outcome.map_or("", |o| o.as_str()));
            (
                signature,
                tokio::time::Instant::now(),
                record.error_line().to_string(),
            )
        });
        self.recent.push_back(entry);
        if self.recent.len() > self.window {
            self.recent.pop_front();
        }
        if self.recent.len() < self.window {
            return None;
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (sig, _, _) in self.recent.iter().flatten() {
            *counts.entry(sig.as_str()).or_default() += 1;
        }
        let (sig, n) = counts.into_iter().max_by_key(|(_, n)| *n)?;
        if 5 * n < 4 * self.window {
            return None;
        }
        let same: Vec<&(String, tokio::time::Instant, String)> = self
            .recent
            .iter()
            .flatten()
            .filter(|(s, _, _)| s == sig)
            .collect();
        let (first, last) = (same[0].1, same[same.len() - 1].1);
        let span = last.duration_since(first);
        if span > OUTAGE_SPAN {
            return None;
        }
        let cause = same[same.len() - 1].2.clone();
        self.stopped = true;
        self.dispatch.cancel();
        Some(match &self.endpoint {
            None => format!(
                "{n} of the last {} jobs failed the same way within {:.0} s, so the rest were not sent: {cause}",
                self.window,
                span.as_secs_f64().ceil()
            ),
            Some(name) => format!(
                "endpoint {name}: {n} of its last {} jobs failed the same way within {:.0} s, so its other jobs were not sent (the other endpoints' were): {cause}",
                self.window,
                span.as_secs_f64().ceil()
            ),
        })
    }
}

impl Listener for Outage {
    fn on(&mut self, event: &runner::RunEvent<'_>) -> std::io::Result<()> {
        let runner::RunEvent::JobFinished { record, .. } = event else {
            return Ok(());
        };
        if record.cached || record.batch.is_some() {
            return Ok(());
        }
        let Some(watched) = self
            .watched
            .iter_mut()
            .find(|w| w.endpoint == record.endpoint)
        else {
            return Ok(());
        };
        if watched.stopped {
            return Ok(());
        }
        if let Some(why) = watched.hear(record) {
            // Each endpoint's outage is said, the first first.
            self.whys.push(why);
            self.stopped = Some(StopReason::outage(self.whys.join("; ")));
        }
        Ok(())
    }
}
