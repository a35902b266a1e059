//! `--batch`: a lane's jobs through its endpoint's batch API instead of streamed
//! (docs/guide/batch.md). The lane's jobs are rendered as streaming would send them, split at
//! the provider's limits, and submitted; every submission is journaled before anything
//! depends on it (a `submitting` line with the batch's job keys before the batch is
//! created, a `submitted` line with the provider's id after), so a killed run's `--resume`
//! adopts what it had submitted — found in the journal, or by its name in the provider's
//! list when the crash fell between the two lines — and never pays for a job twice. Batches
//! are polled with a growing interval until they end or the wall-clock limit passes; their
//! results are scored by the same function as streamed answers (`scoring::record`) and
//! journaled job by job. A batch lane asks the same answer sources as a streaming lane's
//! workers before it buys anything (the cache, the run's own sources: `source::answer`),
//! and each batched answer is heard by them all, as a streamed one is: the provider's
//! batch takes the streamed client's place as the last source.
//!
//! With `--until-decided`, jobs go out in waves: a wave is the cases up to the sequential
//! tests' horizon; between waves the tests decide, and a decided variant's cases are never
//! submitted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod record;

pub use record::{BatchRecord, BatchSettings, BatchStep, open_batches};

use crate::client::batch::{BatchError, BatchState, Batches, EachLine};
use crate::runner::job_record::JobRecord;
use crate::runner::lane::{Lane, Message, Rendered, RunOptions, job_key};
use crate::runner::scoring::{failed_record, request_of, score};
use crate::runner::source;
use crate::suite::{Bench, Job};

/// A batch the provider holds for this lane, until it ends and its results are read.
struct Open {
    name: String,
    id: String,
    /// Its requests' `custom_id`s still without a record.
    keys: Vec<String>,
    /// Its state when last polled.
    last: Option<BatchState>,
    /// One of the batches that may be `name` (an API that keeps no metadata: found by size
    /// and time): its results say whether it is.
    guessed: bool,
}

/// A batch as the journal names it, while a resume adopts it.
struct Named {
    name: String,
    /// Its requests, as journaled.
    size: usize,
    keys: Vec<String>,
    id: Option<String>,
    at: String,
}

/// Where a batch whose id never reached the journal is in the provider's list.
enum Lost {
    /// Found by its name (OpenAI's metadata).
    Named(BatchState),
    /// Where the API keeps no metadata (Anthropic's): every batch of as many requests,
    /// created from 30 s before its `submitting` line to 2 min after its last attempt to
    /// create it (on a resume: after now), that no journal line or lane claims. Each one's
    /// results say whether it is the one.
    Candidates(Vec<BatchState>),
    /// Not there: it was never created.
    Nowhere,
}

/// Why the lane stopped before every batch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    /// Ctrl-C, SIGTERM, a refused key elsewhere, or an outage: stop at once.
    Stopped,
    /// The wall-clock limit passed.
    OutOfTime,
    /// The journal could not keep a batch's line: nothing more may depend on it.
    Journal,
}

/// One batch lane's sending, from the runner's event loop's point of view: it sends the
/// same messages as a lane's workers (a job started, a job finished) and the batches'
/// events, journaled ones acknowledged before it goes on.
pub(super) struct Driver {
    pub bench: Arc<Bench>,
    pub lane: Lane,
    pub jobs: Vec<Job>,
    pub options: RunOptions,
    pub tx: mpsc::UnboundedSender<Message>,
    pub dispatch: CancellationToken,
    pub active: Arc<AtomicUsize>,
}

impl Driver {
    pub(super) async fn drive(self) {
        let settings = self.options.batch.clone().unwrap_or_default();
        let api = self.lane.client.batches();
        let started = tokio::time::Instant::now();
        let deadline = started + settings.wait;
        // Every job of the lane by its `custom_id`, until it has a record.
        let mut waiting: HashMap<String, Job> =
            self.jobs.iter().map(|j| (self.custom_id(j), *j)).collect();
        let mut sent: HashSet<usize> = HashSet::new();
        let mut open = match self.adopt(&api, &waiting, &mut sent).await {
            Ok(open) => open,
            Err(_) => return,
        };
        let mut halt = None;
        loop {
            if self.stopped() {
                halt = Some(Halt::Stopped);
                break;
            }
            let wave = self.wave(&sent);
            if !wave.is_empty() {
                match self
                    .submit(&api, &settings, wave, &mut sent, &mut waiting)
                    .await
                {
                    Ok(mut batches) => open.append(&mut batches),
                    Err(h) => {
                        halt = Some(h);
                        break;
                    }
                }
            }
            if open.is_empty() {
                if self.all_sent(&sent) {
                    break;
                }
                self.move_horizon(&sent);
                continue;
            }
            if let Err(h) = self
                .poll(
                    &api,
                    &settings,
                    &mut open,
                    (&mut waiting, &mut sent),
                    deadline,
                )
                .await
            {
                halt = Some(h);
                break;
            }
            // Every record of the wave reaches the tests before the next wave is drawn.
            self.barrier().await;
        }
        if let Some(h) = halt {
            self.halted(h, &api, &settings, &open).await;
        }
    }

    /// Whether nothing is left to send: every job sent or decided, or the budget reached.
    fn all_sent(&self, sent: &HashSet<usize>) -> bool {
        self.options.out_of_budget()
            || self
                .jobs
                .iter()
                .all(|j| sent.contains(&j.index) || self.skipped(j))
    }

    /// `--until-decided`, with nothing out and the horizon unmoved (the tests wait on
    /// records that will not come): lets the next cases go anyway.
    fn move_horizon(&self, sent: &HashSet<usize>) {
        if let Some((h, per_case)) = &self.options.horizon {
            let next = self
                .jobs
                .iter()
                .filter(|j| !sent.contains(&j.index) && !self.skipped(j))
                .map(|j| j.index / (*per_case).max(1))
                .min()
                .unwrap_or(0);
            let limit = h.limit.load(Ordering::SeqCst);
            if next > limit {
                h.limit.store(next + h.ahead, Ordering::SeqCst);
            }
        }
    }

    /// The lane stopped before its batches ended: with `--batch-cancel` they are
    /// cancelled (unless the journal failed); out of time, each is journaled as left to a
    /// resume.
    async fn halted(&self, halt: Halt, api: &Batches, settings: &BatchSettings, open: &[Open]) {
        if halt != Halt::Journal && settings.cancel_on_stop {
            // Only batches known to be this run's: a candidate may be another's.
            for batch in open.iter().filter(|b| !b.guessed) {
                // Best effort: what the provider ran is adopted by a resume all the same.
                let _ = tokio::time::timeout(Duration::from_secs(10), api.cancel(&batch.id)).await;
            }
        }
        if halt == Halt::OutOfTime {
            let mut said: HashSet<&str> = HashSet::new();
            for batch in open {
                if !said.insert(&batch.name) {
                    continue;
                }
                let mut record =
                    BatchRecord::new(BatchStep::Left, &batch.name, self.lane.name.as_ref());
                // A candidate's id is not journaled: it may be another's, and a resume
                // looks for the batch again.
                record.id = (!batch.guessed).then(|| batch.id.clone());
                let _ = self.tx.send(Message::Batch(Box::new(record), None));
            }
        }
    }

    /// The first wait before asking the batch API again (it doubles, up to a minute): a
    /// second, or the polling interval when that is shorter.
    fn first_wait(&self) -> Duration {
        self.options
            .batch
            .as_ref()
            .map_or(Duration::from_secs(1), |s| {
                s.poll.min(Duration::from_secs(1))
            })
    }

    fn custom_id(&self, job: &Job) -> String {
        self.lane
            .client
            .batch_custom_id(&job_key(job, &self.options))
    }

    fn stopped(&self) -> bool {
        self.dispatch.is_cancelled()
            || self.lane.dispatch.is_cancelled()
            || self.lane.client.stop_token().is_cancelled()
    }

    /// Waits until the run stops (a signal, a refused key, an outage).
    async fn until_stopped(&self) {
        let stop = self.lane.client.stop_token();
        tokio::select! {
            _ = self.dispatch.cancelled() => {}
            _ = self.lane.dispatch.cancelled() => {}
            _ = stop.cancelled() => {}
        }
    }

    /// `--until-decided`: the job's variant is decided, so it is never sent.
    fn skipped(&self, job: &Job) -> bool {
        self.options.decided(&self.bench, job)
    }

    /// The jobs to submit now: every one not yet sent, or (`--until-decided`) those up to
    /// the tests' horizon whose variant is still undecided.
    fn wave(&self, sent: &HashSet<usize>) -> Vec<Job> {
        if self.options.out_of_budget() {
            return Vec::new();
        }
        let limit = self
            .options
            .horizon
            .as_ref()
            .map(|(h, per_case)| (h.limit.load(Ordering::SeqCst), (*per_case).max(1)));
        self.jobs
            .iter()
            .filter(|j| !sent.contains(&j.index) && !self.skipped(j))
            .filter(|j| limit.is_none_or(|(limit, per_case)| j.index / per_case <= limit))
            .copied()
            .collect()
    }

    /// Sends a message to the event loop and waits until its listeners have it (the
    /// journal wrote the line); `Halt::Journal` when they could not.
    async fn journaled(&self, record: BatchRecord) -> Result<(), Halt> {
        let (ack, heard) = oneshot::channel();
        let sent = self
            .tx
            .send(Message::Batch(Box::new(record), Some(ack)))
            .is_ok();
        match (sent, heard.await) {
            (true, Ok(true)) => Ok(()),
            _ => Err(Halt::Journal),
        }
    }

    /// Waits until the event loop has delivered everything sent before.
    async fn barrier(&self) {
        let (ack, heard) = oneshot::channel();
        if self.tx.send(Message::Barrier(ack)).is_ok() {
            let _ = heard.await;
        }
    }

    /// The batches a resumed run had submitted that still hold jobs without a record: from
    /// the journal, or — for one journaled as `submitting` with no `submitted` after it (a
    /// crash between the provider's accept and the journal's write) — found in the
    /// provider's list ([`Driver::find_lost`]). One not found was never created: its jobs
    /// are submitted again.
    async fn adopt(
        &self,
        api: &Batches,
        waiting: &HashMap<String, Job>,
        sent: &mut HashSet<usize>,
    ) -> Result<Vec<Open>, Halt> {
        self.claim_journaled();
        let mut listed: Option<Vec<BatchState>> = None;
        let mut open = Vec::new();
        for n in self.named(waiting) {
            let Some(found) = self.found(api, &n, &mut listed).await? else {
                continue;
            };
            let keys: Vec<String> = n
                .keys
                .into_iter()
                .filter(|k| waiting.contains_key(k))
                .collect();
            for k in &keys {
                if let Some(job) = waiting.get(k) {
                    // Its hold was reserved before any lane started (`reserve_adopted`).
                    sent.insert(job.index);
                    self.active.fetch_add(1, Ordering::SeqCst);
                    let _ = self.tx.send(Message::Started(*job));
                }
            }
            for (id, guessed) in found {
                open.push(Open {
                    name: n.name.clone(),
                    id,
                    keys: keys.clone(),
                    last: None,
                    guessed,
                });
            }
        }
        Ok(open)
    }

    /// Claims every batch the journal knows as a run's own, at every endpoint: never a
    /// candidate.
    fn claim_journaled(&self) {
        if let Ok(mut claimed) = self.options.batch_claims.lock() {
            claimed.extend(
                self.options
                    .batches
                    .iter()
                    .filter(|b| matches!(b.step, BatchStep::Submitted | BatchStep::Ended))
                    .filter_map(|b| b.id.clone()),
            );
        }
    }

    /// The batches the journal holds for this lane that still hold jobs without a record
    /// (a disowned one's jobs went out again in another).
    fn named(&self, waiting: &HashMap<String, Job>) -> Vec<Named> {
        let mut named: Vec<Named> = Vec::new();
        for b in self
            .options
            .batches
            .iter()
            .filter(|b| b.endpoint == self.lane.name)
        {
            match b.step {
                BatchStep::Submitting => named.push(Named {
                    name: b.name.clone(),
                    size: b.keys.len(),
                    keys: b.keys.clone(),
                    id: None,
                    at: b.at.clone(),
                }),
                BatchStep::Submitted => {
                    if let Some(n) = named.iter_mut().find(|n| n.name == b.name) {
                        n.id = b.id.clone();
                    }
                }
                BatchStep::Disowned => named.retain(|n| n.name != b.name),
                _ => {}
            }
        }
        named.retain(|n| n.keys.iter().any(|k| waiting.contains_key(k)));
        named
    }

    /// The provider's ids a journaled batch may be (each with whether it is a guess): its
    /// journaled id, or — never journaled — the one found in the provider's list (`listed`,
    /// asked once for all), or the candidates; `None` when it was never created.
    async fn found(
        &self,
        api: &Batches,
        n: &Named,
        listed: &mut Option<Vec<BatchState>>,
    ) -> Result<Option<Vec<(String, bool)>>, Halt> {
        if let Some(id) = &n.id {
            return Ok(Some(vec![(id.clone(), false)]));
        }
        let at = crate::clock::parse_utc(&n.at).unwrap_or(0.0);
        if listed.is_none() {
            *listed = Some(self.list(api, at).await?);
        }
        let list = listed.as_deref().unwrap_or_default();
        // Created at most as late as now (its create may have been retried long after the
        // line was written).
        let window = (at, crate::clock::now_seconds());
        Ok(match self.find_lost(list, &n.name, n.size, window) {
            Lost::Named(state) => {
                self.journal_submitted(&n.name, &state.id).await?;
                Some(vec![(state.id, false)])
            }
            Lost::Candidates(all) => Some(all.into_iter().map(|s| (s.id, true)).collect()),
            Lost::Nowhere => None,
        })
    }

    /// The batch named `name` (of `size` requests, journaled as `submitting` at `at`,
    /// seconds since 1970) in the provider's `list`, when its id never reached the journal.
    fn find_lost(&self, list: &[BatchState], name: &str, size: usize, window: (f64, f64)) -> Lost {
        let named = |s: &&BatchState| {
            s.metadata.get("promptgauge_batch").and_then(Value::as_str) == Some(name)
        };
        if let Some(s) = list.iter().find(named) {
            if let Ok(mut claimed) = self.options.batch_claims.lock() {
                claimed.insert(s.id.clone());
            }
            return Lost::Named(s.clone());
        }
        // OpenAI's batches carry their name: one not listed by it was never created.
        if self.lane.client.batch_api().keeps_names() {
            return Lost::Nowhere;
        }
        let claimed = self
            .options
            .batch_claims
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        let candidates: Vec<BatchState> = list
            .iter()
            .filter(|s| {
                s.metadata.is_null()
                    && !claimed.contains(&s.id)
                    && s.request_counts.total == size as u64
                    && s.created_at >= window.0 - 30.0
                    && s.created_at <= window.1 + 120.0
            })
            .cloned()
            .collect();
        if candidates.is_empty() {
            Lost::Nowhere
        } else {
            Lost::Candidates(candidates)
        }
    }

    /// Journals that the batch `name` is the provider's `id`, and claims it.
    async fn journal_submitted(&self, name: &str, id: &str) -> Result<(), Halt> {
        if let Ok(mut claimed) = self.options.batch_claims.lock() {
            claimed.insert(id.to_string());
        }
        let mut r = BatchRecord::new(BatchStep::Submitted, name, self.lane.name.as_ref());
        r.id = Some(id.to_string());
        self.journaled(r).await
    }

    /// The provider's list of batches created since an hour before `since` (seconds since
    /// 1970), asked again while it does not answer.
    async fn list(&self, api: &Batches, since: f64) -> Result<Vec<BatchState>, Halt> {
        let mut wait = self.first_wait();
        loop {
            match api.list_since(since - 3600.0).await {
                Ok(list) => return Ok(list),
                Err(e) if self.refused(&e) => return Err(Halt::Stopped),
                Err(e) if e.is_final() => return Ok(Vec::new()),
                Err(_) => {}
            }
            if !self.sleep(wait).await {
                return Err(Halt::Stopped);
            }
            wait = (wait * 2).min(Duration::from_secs(60));
        }
    }

    /// A refused key (401, 403) stops the whole run at once, as a streamed job's would.
    fn refused(&self, e: &BatchError) -> bool {
        let refused = matches!(
            e,
            BatchError::Http {
                status: 401 | 403,
                ..
            }
        );
        if refused {
            self.lane.client.stop_token().cancel();
        }
        refused
    }

    /// Sleeps `d` unless the run stops first; `false` when it stopped.
    async fn sleep(&self, d: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(d) => true,
            _ = self.until_stopped() => false,
        }
    }

    /// Renders `wave`, answers what the cache already holds, and submits the rest in
    /// batches no larger than the provider takes.
    async fn submit(
        &self,
        api: &Batches,
        settings: &BatchSettings,
        wave: Vec<Job>,
        sent: &mut HashSet<usize>,
        waiting: &mut HashMap<String, Job>,
    ) -> Result<Vec<Open>, Halt> {
        let (most_requests, most_bytes) = api.api.limits();
        let most_requests = settings
            .max_requests
            .map_or(most_requests, |n| n.clamp(1, most_requests));
        let client = &self.lane.client;
        let held = self.lane.held_sources(&self.options);
        let mut open = Vec::new();
        let mut lines: Vec<u8> = Vec::new();
        let mut jobs: Vec<(String, Job)> = Vec::new();
        for job in wave {
            sent.insert(job.index);
            let rendered = match request_of(&self.bench, &job, &self.lane, &self.options) {
                Ok(r) => r,
                Err(failed) => {
                    waiting.remove(&self.custom_id(&job));
                    self.finished(*failed);
                    continue;
                }
            };
            if let Some(answer) = source::answer(&held, &rendered.ask(&self.lane, &job)).await {
                waiting.remove(&self.custom_id(&job));
                if let Some(r) = self.score(&job, &rendered, answer).await {
                    self.finished(r);
                }
                continue;
            }
            if !self
                .options
                .afford(&self.bench, &job, &rendered, &self.lane)
            {
                // The budget is reached: this job and the rest of the wave are not sent.
                sent.remove(&job.index);
                break;
            }
            let mut line =
                serde_json::to_vec(&client.batch_line(&rendered.request)).unwrap_or_default();
            line.push(b'\n');
            if !jobs.is_empty()
                && (jobs.len() >= most_requests || lines.len() + line.len() > most_bytes)
            {
                open.extend(
                    self.create(api, std::mem::take(&mut lines), std::mem::take(&mut jobs))
                        .await?,
                );
            }
            lines.extend_from_slice(&line);
            jobs.push((
                client.batch_custom_id(&rendered.request.idempotency_key),
                job,
            ));
        }
        if !jobs.is_empty() {
            open.extend(self.create(api, lines, jobs).await?);
        }
        Ok(open)
    }

    /// Scores an answer into its job's record, as streamed answers are.
    async fn score(
        &self,
        job: &Job,
        rendered: &Rendered,
        answer: source::Sourced,
    ) -> Option<JobRecord> {
        score(
            &self.bench,
            job,
            rendered,
            answer,
            &self.lane,
            &self.options,
        )
        .await
    }

    /// Sends a finished job's record to the event loop.
    fn finished(&self, record: JobRecord) {
        self.options.settle(&record);
        let _ = self.tx.send(Message::Finished(Box::new(record)));
    }

    /// Creates one batch of `jobs` (their requests in `lines`): uploads its input where
    /// the API takes a file, journals `submitting`, creates it, journals `submitted`. A
    /// request the API refuses fails its jobs with the cause; one it did not answer is
    /// asked again — after looking in its list, so a batch created whose answer was lost
    /// is adopted, not created twice.
    async fn create(
        &self,
        api: &Batches,
        lines: Vec<u8>,
        jobs: Vec<(String, Job)>,
    ) -> Result<Vec<Open>, Halt> {
        let name = format!("pg-{:016x}", rand::random::<u64>());
        let file = match self.input(api, &name, &lines).await? {
            Ok(file) => file,
            Err((why, e)) => return Ok(self.refused_all(&jobs, why, &e)),
        };
        let mut record = BatchRecord::new(BatchStep::Submitting, &name, self.lane.name.as_ref());
        record.file = file.clone();
        record.keys = jobs.iter().map(|(k, _)| k.clone()).collect();
        record.reserved_usd = jobs
            .iter()
            .map(|(_, j)| self.options.held_for(j.index))
            .sum();
        self.journaled(record).await?;
        let opens = match self
            .created(api, &name, file.as_deref(), &lines, &jobs)
            .await?
        {
            Ok(opens) => opens,
            Err((why, e)) => return Ok(self.refused_all(&jobs, why, &e)),
        };
        for (_, job) in &jobs {
            self.active.fetch_add(1, Ordering::SeqCst);
            let _ = self.tx.send(Message::Started(*job));
        }
        Ok(opens)
    }

    /// A batch's input uploaded where the API takes a file (its id), asked again while the
    /// API does not answer; the API's refusal (why, and its error) when it refuses it.
    async fn input(
        &self,
        api: &Batches,
        name: &str,
        lines: &[u8],
    ) -> Result<Result<Option<String>, Refusal>, Halt> {
        let mut wait = self.first_wait();
        loop {
            match api.prepare(&format!("{name}.jsonl"), lines).await {
                Ok(file) => return Ok(Ok(file)),
                Err(e) if self.refused(&e) => return Err(Halt::Stopped),
                Err(e) if e.is_final() => {
                    let why = format!("the batch API refused the input file: {e}");
                    return Ok(Err((why, e)));
                }
                Err(_) if self.sleep(wait).await => wait = (wait * 2).min(Duration::from_secs(60)),
                Err(_) => return Err(Halt::Stopped),
            }
        }
    }

    /// The batch `name` created and journaled as `submitted` (its one open batch), asked
    /// again while the API does not answer — after looking in its list each time: where
    /// the API keeps no metadata, the batches that may be it (each read when it ends; if
    /// none is, the jobs go out again). The API's refusal when it refuses it.
    async fn created(
        &self,
        api: &Batches,
        name: &str,
        file: Option<&str>,
        lines: &[u8],
        jobs: &[(String, Job)],
    ) -> Result<Result<Vec<Open>, Refusal>, Halt> {
        let metadata = json!({"promptgauge_run": self.options.run_id, "promptgauge_batch": name});
        let endpoint_path = self.lane.client.batch_endpoint();
        let asked_at = crate::clock::now_seconds();
        let keys: Vec<String> = jobs.iter().map(|(k, _)| k.clone()).collect();
        let open = |id: String, guessed: bool| Open {
            name: name.to_string(),
            id,
            keys: keys.clone(),
            last: None,
            guessed,
        };
        let mut wait = self.first_wait();
        let state = loop {
            match api
                .submit(file, lines, endpoint_path, metadata.clone())
                .await
            {
                Ok(state) => break state,
                Err(e) if self.refused(&e) => return Err(Halt::Stopped),
                Err(e) if e.is_final() => {
                    return Ok(Err((format!("the batch API refused the batch: {e}"), e)));
                }
                Err(_) => {
                    if !self.sleep(wait).await {
                        return Err(Halt::Stopped);
                    }
                    wait = (wait * 2).min(Duration::from_secs(60));
                    // It may have been created though its answer was lost: look before
                    // creating it again.
                    let listed = self.list(api, asked_at).await?;
                    let window = (asked_at, crate::clock::now_seconds());
                    match self.find_lost(&listed, name, jobs.len(), window) {
                        Lost::Named(state) => break state,
                        Lost::Candidates(all) => {
                            return Ok(Ok(all.into_iter().map(|s| open(s.id, true)).collect()));
                        }
                        Lost::Nowhere => {}
                    }
                }
            }
        };
        self.journal_submitted(name, &state.id).await?;
        Ok(Ok(vec![open(state.id, false)]))
    }

    /// Fails `jobs` the batch API refused, with its status (a 400 is no passing failure).
    fn refused_all(&self, jobs: &[(String, Job)], why: String, e: &BatchError) -> Vec<Open> {
        let status = match e {
            BatchError::Http { status, .. } => Some(*status),
            _ => None,
        };
        for (_, job) in jobs {
            let result = self.lane.client.batch_failure(status, &why);
            self.fail(job, result, None);
        }
        Vec::new()
    }

    /// A job without an answer, as its failed record (with the batch it was in, if any).
    fn fail(&self, job: &Job, result: crate::client::JobResult, batch: Option<&str>) {
        let error = result.failure.clone().unwrap_or_else(|| "no answer".into());
        let mut r = failed_record(&self.bench, job, error, Some(result));
        r.endpoint = self.lane.name.clone();
        r.batch = batch.map(String::from);
        r.resent = self.options.resend.get(&job.index).copied().unwrap_or(0);
        self.finished(r);
    }

    /// Polls the open batches until each has ended and its results are recorded, the run
    /// stops, or the wall-clock limit passes. The wait between polls doubles while no
    /// batch ends, up to `poll_max`.
    async fn poll(
        &self,
        api: &Batches,
        settings: &BatchSettings,
        open: &mut Vec<Open>,
        (waiting, sent): (&mut HashMap<String, Job>, &mut HashSet<usize>),
        deadline: tokio::time::Instant,
    ) -> Result<(), Halt> {
        let mut wait = settings.poll;
        while !open.is_empty() {
            let mut ended_any = false;
            let mut i = 0;
            while i < open.len() {
                if self.stopped() {
                    return Err(Halt::Stopped);
                }
                let polled = self.poll_one(api, open, i, waiting, sent).await?;
                ended_any |= polled.ended;
                i = polled.next;
            }
            if open.is_empty() {
                break;
            }
            wait = if ended_any {
                settings.poll
            } else {
                (wait * 2).min(settings.poll_max)
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(Halt::OutOfTime);
            }
            if !self.sleep(wait.min(deadline - now)).await {
                return Err(Halt::Stopped);
            }
        }
        Ok(())
    }

    /// Looks at the open batch `i` once: an ended one's results are recorded (a candidate's
    /// first tell whether it is the batch) and it leaves `open`.
    async fn poll_one(
        &self,
        api: &Batches,
        open: &mut Vec<Open>,
        mut i: usize,
        waiting: &mut HashMap<String, Job>,
        sent: &mut HashSet<usize>,
    ) -> Result<Polled, Halt> {
        let state = match api.retrieve(&open[i].id).await {
            Ok(s) => s,
            Err(e) if self.refused(&e) => return Err(Halt::Stopped),
            Err(e @ BatchError::Http { status: 404, .. }) => {
                // The provider does not know it (not a passing failure: a retry pays again
                // for what the batch may have answered).
                let batch = open.remove(i);
                let why = format!("the batch API does not know batch {}: {e}", batch.id);
                self.fail_rest(&batch, waiting, Some(404), &why);
                return Ok(Polled::ended(i));
            }
            Err(_) => return Ok(Polled::running(i)),
        };
        if open[i].last.as_ref() != Some(&state) {
            let record = BatchRecord::of(
                BatchStep::Polled,
                &open[i].name,
                self.lane.name.as_ref(),
                &state,
            );
            let _ = self.tx.send(Message::Batch(Box::new(record), None));
            open[i].last = Some(state.clone());
        }
        if !state.ended() {
            return Ok(Polled::running(i));
        }
        if open[i].guessed {
            match self.candidate(api, open, i, &state, waiting, sent).await? {
                Candidate::Later => return Ok(Polled::running(i)),
                Candidate::NotOurs => return Ok(Polled::ended(i)),
                // It is now the first open batch.
                Candidate::Ours => i = 0,
            }
        }
        self.ended(api, open, i, &state, waiting).await
    }

    /// An ended candidate: its results say whether it is the batch, before any of them is
    /// recorded (the journal names it first, so a kill while its answers are recorded
    /// leaves a resume that knows it). Ours, it is journaled as such and put first in
    /// `open`, the other candidates dropped; not ours, it leaves `open`, and when no
    /// candidate is left the batch was never created: its jobs go out again (those no
    /// other batch holds).
    async fn candidate(
        &self,
        api: &Batches,
        open: &mut Vec<Open>,
        i: usize,
        state: &BatchState,
        waiting: &HashMap<String, Job>,
        sent: &mut HashSet<usize>,
    ) -> Result<Candidate, Halt> {
        let ours = match self.holds_ours(api, &open[i], state).await {
            Ok(ours) => ours,
            Err(ReadBack::Halt(h)) => return Err(h),
            // A candidate whose results cannot be read is not taken for ours.
            Err(ReadBack::Unreadable(_)) => false,
            Err(ReadBack::Later) => return Ok(Candidate::Later),
        };
        let batch = open.remove(i);
        if !ours {
            if !open.iter().any(|o| o.name == batch.name) {
                let record =
                    BatchRecord::new(BatchStep::Disowned, &batch.name, self.lane.name.as_ref());
                self.journaled(record).await?;
                for key in &batch.keys {
                    let elsewhere = open.iter().any(|o| o.keys.contains(key));
                    if let (Some(job), false) = (waiting.get(key), elsewhere) {
                        sent.remove(&job.index);
                        self.active.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            }
            return Ok(Candidate::NotOurs);
        }
        self.journal_submitted(&batch.name, &batch.id).await?;
        open.retain(|o| o.name != batch.name);
        open.insert(
            0,
            Open {
                guessed: false,
                ..batch
            },
        );
        Ok(Candidate::Ours)
    }

    /// An ended batch of ours: its results recorded (or, never readable, its jobs failed
    /// with the cause), the rest of its jobs failed as unanswered, `ended` journaled, and
    /// it leaves `open`. Results not readable this time leave it for the next poll.
    async fn ended(
        &self,
        api: &Batches,
        open: &mut Vec<Open>,
        i: usize,
        state: &BatchState,
        waiting: &mut HashMap<String, Job>,
    ) -> Result<Polled, Halt> {
        let mut why = format!(
            "batch {} ended (status {}) without an answer to this request",
            state.id, state.status
        );
        match self.read_back(api, &open[i], state, waiting).await {
            Ok(_) => {}
            Err(ReadBack::Halt(h)) => return Err(h),
            // Never readable (too large, or refused for good): its jobs fail with the
            // cause, and the batch is done with.
            Err(ReadBack::Unreadable(e)) => {
                why = format!("batch {}'s results cannot be read: {e}", state.id);
            }
            // Not read this time: polled again.
            Err(ReadBack::Later) => return Ok(Polled::running(i)),
        }
        let batch = open.remove(i);
        self.fail_rest(&batch, waiting, None, &why);
        let record = BatchRecord::of(
            BatchStep::Ended,
            &batch.name,
            self.lane.name.as_ref(),
            state,
        );
        self.journaled(record).await?;
        Ok(Polled::ended(i))
    }

    /// An ended batch's result files; a refused key stops the run, results that can never
    /// be read (beyond the size limit, a 404) are unreadable, any other failure (no answer
    /// within the deadline, a 5xx) is tried again at the next poll.
    async fn result_files(
        &self,
        api: &Batches,
        state: &BatchState,
    ) -> Result<Vec<bytes::Bytes>, ReadBack> {
        match api.result_files(state).await {
            Ok(files) => Ok(files),
            Err(e) if self.refused(&e) => Err(ReadBack::Halt(Halt::Stopped)),
            Err(e) if e.is_final() => Err(ReadBack::Unreadable(e.to_string())),
            Err(_) => Err(ReadBack::Later),
        }
    }

    /// Whether an ended candidate's results hold any of `batch`'s requests.
    async fn holds_ours(
        &self,
        api: &Batches,
        batch: &Open,
        state: &BatchState,
    ) -> Result<bool, ReadBack> {
        let files = self.result_files(api, state).await?;
        let mine: HashSet<&str> = batch.keys.iter().map(String::as_str).collect();
        Ok(EachLine::new(&files).any(|line| {
            line["custom_id"]
                .as_str()
                .is_some_and(|id| mine.contains(id))
        }))
    }

    /// Fails the jobs of `batch` still without a record.
    fn fail_rest(
        &self,
        batch: &Open,
        waiting: &mut HashMap<String, Job>,
        status: Option<u16>,
        why: &str,
    ) {
        for key in &batch.keys {
            if let Some(job) = waiting.remove(key) {
                self.active.fetch_sub(1, Ordering::SeqCst);
                let result = self.lane.client.batch_failure(status, why);
                self.fail(&job, result, Some(&batch.id));
            }
        }
    }

    /// Reads an ended batch's results back and scores each (as many at once as the lane's
    /// gate lets workers score), each job's record sent as it is made.
    async fn read_back(
        &self,
        api: &Batches,
        batch: &Open,
        state: &BatchState,
        waiting: &mut HashMap<String, Job>,
    ) -> Result<(), ReadBack> {
        let files = self.result_files(api, state).await?;
        let mine: HashSet<&str> = batch.keys.iter().map(String::as_str).collect();
        self.fail_answered_twice(&files, &mine, &batch.id, waiting);
        // A line at a time, as the scoring takes them: a batch's answers are never all
        // held parsed at once. A line that is not JSON answers nothing: its job fails as
        // unanswered.
        let answered = EachLine::new(&files).filter_map(|line| {
            let (custom_id, result) = self.lane.client.batch_result(&line);
            if !mine.contains(custom_id.as_str()) {
                return None;
            }
            waiting.remove(&custom_id).map(|job| (job, result))
        });
        let held = self.lane.held_sources(&self.options);
        let id = &batch.id;
        let scored = futures_util::stream::iter(answered)
            .map(|(job, result)| {
                let held = &held;
                async move {
                    let rendered = match request_of(&self.bench, &job, &self.lane, &self.options) {
                        Ok(r) => r,
                        Err(failed) => return Some(*failed),
                    };
                    let answer = source::Sourced {
                        result,
                        cached: false,
                    };
                    source::heard(held, &rendered.ask(&self.lane, &job), &answer);
                    let mut r = self.score(&job, &rendered, answer).await?;
                    r.batch = Some(id.clone());
                    r.latency_ms = None;
                    r.ttft_ms = None;
                    r.answer_ms = None;
                    Some(r)
                }
            })
            .buffer_unordered(self.lane.client.capacity().max(1));
        tokio::pin!(scored);
        let mut sent = 0usize;
        while let Some(record) = scored.next().await {
            match record {
                Some(r) => {
                    self.active.fetch_sub(1, Ordering::SeqCst);
                    self.finished(r);
                    sent += 1;
                    // Records go no faster than the journal keeps them: a batch's 50,000
                    // answers never wait in the channel at once.
                    if sent.is_multiple_of(256) {
                        self.barrier().await;
                    }
                }
                // Stopped while a judge was asked: left for a resume.
                None => return Err(ReadBack::Halt(Halt::Stopped)),
            }
        }
        Ok(())
    }
}

impl Driver {
    /// Fails each job the results answer more than once: which line is the answer is not
    /// for promptgauge to guess (the first is not more true than the second). The job's
    /// record holds every line given for it (`score_detail.results`) and the usage of all
    /// of them (each may be billed).
    fn fail_answered_twice(
        &self,
        files: &[bytes::Bytes],
        mine: &HashSet<&str>,
        batch: &str,
        waiting: &mut HashMap<String, Job>,
    ) {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for line in EachLine::new(files) {
            if let Some(id) = line["custom_id"].as_str().filter(|id| mine.contains(id)) {
                *seen.entry(id.to_string()).or_default() += 1;
            }
        }
        seen.retain(|_, n| *n > 1);
        if seen.is_empty() {
            return;
        }
        let mut lines: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
        for line in EachLine::new(files) {
            if let Some(id) = line["custom_id"]
                .as_str()
                .filter(|id| seen.contains_key(*id))
            {
                lines.entry(id.to_string()).or_default().push(line);
            }
        }
        for (id, given) in lines {
            let Some(job) = waiting.remove(&id) else {
                continue;
            };
            self.active.fetch_sub(1, Ordering::SeqCst);
            let mut usage: Option<crate::client::Usage> = None;
            for line in &given {
                if let Some(u) = self.lane.client.batch_result(line).1.usage {
                    let sum = usage.get_or_insert_with(Default::default);
                    sum.prompt_tokens += u.prompt_tokens;
                    sum.completion_tokens += u.completion_tokens;
                    sum.cached_tokens += u.cached_tokens;
                    sum.reasoning_tokens += u.reasoning_tokens;
                }
            }
            let result = self.lane.client.batch_failure(
                None,
                &format!(
                    "the provider returned two results for this request ({} lines with custom_id {id}): neither is scored",
                    given.len()
                ),
            );
            let error = result.failure.clone().unwrap_or_default();
            let mut r = failed_record(&self.bench, &job, error, Some(result));
            r.usage = usage.unwrap_or_default();
            r.endpoint = self.lane.name.clone();
            r.batch = Some(batch.to_string());
            r.resent = self.options.resend.get(&job.index).copied().unwrap_or(0);
            r.score_detail = Some(serde_json::json!({ "results": given }));
            self.finished(r);
        }
    }
}

/// What one look at an open batch did: the next one to look at, and whether this one
/// ended (and left the open batches).
struct Polled {
    next: usize,
    ended: bool,
}

impl Polled {
    /// Still running (or not read this time): the next batch is the one after it.
    fn running(i: usize) -> Polled {
        Polled {
            next: i + 1,
            ended: false,
        }
    }

    /// Ended and gone from the open batches: the next one took its place.
    fn ended(i: usize) -> Polled {
        Polled {
            next: i,
            ended: true,
        }
    }
}

/// What an ended candidate's results said.
enum Candidate {
    /// They could not be read this time.
    Later,
    NotOurs,
    Ours,
}

/// The batch API's refusal of a batch: why, in the jobs' words, and its error.
type Refusal = (String, BatchError);

/// Why an ended batch's results were not all recorded.
enum ReadBack {
    Halt(Halt),
    /// They can never be read (the reason): the batch's jobs fail with it.
    Unreadable(String),
    /// They could not be read this time (the provider did not answer): try again.
    Later,
}
