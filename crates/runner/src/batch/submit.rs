//! Submitting: the requests the workers hand over fill the next batch up to the
//! provider's limits; a full batch, or the one being filled when the lane's workers all
//! wait, is created. Every submission is journaled before anything depends on it: a
//! `submitting` line with the batch's job keys before the batch is created, a `submitted`
//! line with the provider's id after, so a killed run's resume adopts it (`adopt.rs`).

use std::time::Duration;

use serde_json::json;

use super::adopt::Lost;
use super::collector::{Collector, Halt, Open};
use super::record::{BatchRecord, BatchStep};
use crate::scoring::{request_of, score};
use crate::source;
use promptgauge_client::batch::BatchError;
use promptgauge_suite::Job;

/// The batch API's refusal of a batch: why, in the jobs' words, and its error.
type Refusal = (String, BatchError);

/// A job a worker handed over: its request as a batch line.
pub(super) struct Want {
    pub custom_id: String,
    pub job: Job,
    pub line: Vec<u8>,
}

impl Collector {
    /// The most requests and bytes one batch may hold: the provider's limits, and under
    /// them `--batch-size` and `--batch-max-bytes`.
    fn most(&self) -> (usize, usize) {
        let (requests, bytes) = self.api.api.limits();
        let requests = self
            .settings
            .max_requests
            .map_or(requests, |n| n.clamp(1, requests));
        let bytes = self.settings.max_bytes.map_or(bytes, |n| n.clamp(1, bytes));
        (requests, bytes)
    }

    /// Adds a handed job to the batch being filled; a batch that would pass the
    /// provider's limits is created first.
    pub(super) async fn take(&mut self, want: Want) -> Result<(), Halt> {
        let (most_requests, most_bytes) = self.most();
        let filling = &self.filling;
        if !filling.is_empty()
            && (filling.jobs.len() >= most_requests
                || filling.lines.len() + want.line.len() > most_bytes)
        {
            self.cut().await?;
        }
        self.waiting.insert(want.custom_id.clone(), want.job);
        self.filling.push(want.custom_id, want.job, &want.line);
        Ok(())
    }

    /// Adds every job of `wants` (emptied) in turn, as [`Collector::take`] does.
    pub(super) async fn take_all(&mut self, wants: &mut Vec<Want>) -> Result<(), Halt> {
        for want in wants.drain(..) {
            self.take(want).await?;
        }
        Ok(())
    }

    /// Creates the batch being filled, if it holds anything.
    pub(super) async fn cut(&mut self) -> Result<(), Halt> {
        if self.filling.is_empty() {
            return Ok(());
        }
        let filling = std::mem::take(&mut self.filling);
        let jobs: Vec<(String, Job)> = filling.jobs.into_iter().map(|(k, j, _)| (k, j)).collect();
        let created = self.create(filling.lines, jobs).await?;
        if self.open.is_empty() && !created.is_empty() {
            // Looked at once created, then after the polling interval, doubling.
            self.wait = self.settings.poll;
            self.next_poll = tokio::time::Instant::now();
        }
        self.open.extend(created);
        Ok(())
    }

    /// Jobs whose batch turned out never to have been created (each candidate was
    /// another's): they go out again, in the next batch, unless an answer is held now.
    pub(super) async fn resend(&mut self, jobs: Vec<Job>) -> Result<(), Halt> {
        let held = self.lane.held_sources(&self.options);
        for job in jobs {
            let custom_id = self.custom_id(&job);
            let rendered = match request_of(&self.bench, &job, &self.lane, &self.options) {
                Ok(r) => r,
                Err(failed) => {
                    self.waiting.remove(&custom_id);
                    self.finished(*failed);
                    continue;
                }
            };
            if let source::SourceReply::Answer(answer) =
                source::answer(&held, &rendered.ask(&self.lane, &job)).await
            {
                self.waiting.remove(&custom_id);
                let scored = score(
                    &self.bench,
                    &job,
                    &rendered,
                    answer,
                    &self.lane,
                    &self.options,
                )
                .await;
                match scored {
                    Some(r) => self.finished(r),
                    None => return Err(Halt::Stopped),
                }
                continue;
            }
            let mut line = serde_json::to_vec(&self.lane.client.batch_line(&rendered.request))
                .unwrap_or_default();
            line.push(b'\n');
            self.waiting.remove(&custom_id);
            self.take(Want {
                custom_id,
                job,
                line,
            })
            .await?;
        }
        Ok(())
    }

    /// Creates one batch of `jobs` (their requests in `lines`): uploads its input where
    /// the API takes a file, journals `submitting`, creates it, journals `submitted`. A
    /// request the API refuses fails its jobs with the cause; one it did not answer is
    /// asked again — after looking in its list, so a batch created whose answer was lost
    /// is adopted, not created twice.
    async fn create(
        &mut self,
        lines: Vec<u8>,
        jobs: Vec<(String, Job)>,
    ) -> Result<Vec<Open>, Halt> {
        let name = format!("pg-{:016x}", rand::random::<u64>());
        let file = match self.input(&name, &lines).await? {
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
        match self.created(&name, file.as_deref(), &lines, &jobs).await? {
            Ok(opens) => Ok(opens),
            Err((why, e)) => Ok(self.refused_all(&jobs, why, &e)),
        }
    }

    /// A batch's input uploaded where the API takes a file (its id), asked again while the
    /// API does not answer; the API's refusal (why, and its error) when it refuses it.
    async fn input(
        &self,
        name: &str,
        lines: &[u8],
    ) -> Result<Result<Option<String>, Refusal>, Halt> {
        let mut wait = self.first_wait();
        loop {
            match self.api.prepare(&format!("{name}.jsonl"), lines).await {
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
        name: &str,
        file: Option<&str>,
        lines: &[u8],
        jobs: &[(String, Job)],
    ) -> Result<Result<Vec<Open>, Refusal>, Halt> {
        let metadata = json!({"promptgauge_run": self.options.run_id, "promptgauge_batch": name});
        let endpoint_path = self.lane.client.batch_endpoint();
        let asked_at = promptgauge_base::clock::now_seconds();
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
            match self
                .api
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
                    let listed = self.list(asked_at).await?;
                    let window = (asked_at, promptgauge_base::clock::now_seconds());
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
    fn refused_all(&mut self, jobs: &[(String, Job)], why: String, e: &BatchError) -> Vec<Open> {
        let status = match e {
            BatchError::Http { status, .. } => Some(*status),
            _ => None,
        };
        let keys: Vec<String> = jobs.iter().map(|(k, _)| k.clone()).collect();
        self.fail_rest(&keys, None, status, &why);
        Vec::new()
    }
}
