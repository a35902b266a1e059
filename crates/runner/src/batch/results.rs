//! Polling and reading back: the open batches are looked at with a growing wait; an
//! ended batch's results are scored by the same function as streamed answers
//! (`scoring::score`), heard by the lane's held sources (the cache keeps them) and
//! journaled job by job; what a batch did not answer fails with the cause. A candidate
//! (a batch found by its size and time, `adopt.rs`) is read first to learn whether it is
//! ours.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use futures_util::StreamExt;

use super::collector::{Collector, Halt, Open, barrier};
use super::record::{BatchRecord, BatchStep};
use crate::lane::Message;
use crate::scoring::{failed_record, request_of, score};
use crate::source;
use promptgauge_client::batch::{BatchError, BatchState, EachLine};
use promptgauge_suite::Job;

impl Collector {
    /// Looks at every open batch once: an ended one's results are recorded and it leaves
    /// the open batches. The wait before the next look doubles while none ends, up to
    /// `poll_max`; past the wall-clock limit, what still runs is left to a resume.
    pub(super) async fn poll_round(&mut self) -> Result<(), Halt> {
        let mut ended_any = false;
        let mut i = 0;
        while i < self.open.len() {
            if self.stopped() {
                return Err(Halt::Stopped);
            }
            let polled = self.poll_one(i).await?;
            ended_any |= polled.ended;
            i = polled.next;
        }
        if self.open.is_empty() {
            return Ok(());
        }
        self.wait = if ended_any {
            self.settings.poll
        } else {
            (self.wait * 2).min(self.settings.poll_max)
        };
        let now = tokio::time::Instant::now();
        let submitted_all = self.all_handed && self.filling.is_empty();
        if now >= self.deadline && submitted_all {
            return Err(Halt::OutOfTime);
        }
        self.next_poll = now
            + self.wait.min(
                self.deadline
                    .saturating_duration_since(now)
                    .max(self.settings.poll),
            );
        Ok(())
    }

    /// Looks at the open batch `i` once: an ended one's results are recorded (a candidate's
    /// first tell whether it is the batch) and it leaves `open`.
    async fn poll_one(&mut self, mut i: usize) -> Result<Polled, Halt> {
        let state = match self.api.retrieve(&self.open[i].id).await {
            Ok(s) => s,
            Err(e) if self.refused(&e) => return Err(Halt::Stopped),
            Err(e @ BatchError::Http { status: 404, .. }) => {
                // The provider does not know it (not a passing failure: a retry pays again
                // for what the batch may have answered).
                let batch = self.open.remove(i);
                let why = format!("the batch API does not know batch {}: {e}", batch.id);
                self.fail_rest(&batch.keys, Some(&batch.id), Some(404), &why);
                return Ok(Polled::ended(i));
            }
            Err(_) => return Ok(Polled::running(i)),
        };
        if self.open[i].last.as_ref() != Some(&state) {
            let record = BatchRecord::of(
                BatchStep::Polled,
                &self.open[i].name,
                self.lane.name.as_ref(),
                &state,
            );
            let _ = self.tx.send(Message::Batch(Box::new(record), None));
            self.open[i].last = Some(state.clone());
        }
        if !state.ended() {
            return Ok(Polled::running(i));
        }
        if self.open[i].guessed {
            match self.candidate(i, &state).await? {
                Candidate::Later => return Ok(Polled::running(i)),
                Candidate::NotOurs => return Ok(Polled::ended(i)),
                // It is now the first open batch.
                Candidate::Ours => i = 0,
            }
        }
        self.ended(i, &state).await
    }

    /// An ended candidate: its results say whether it is the batch, before any of them is
    /// recorded (the journal names it first, so a kill while its answers are recorded
    /// leaves a resume that knows it). Ours, it is journaled as such and put first in
    /// `open`, the other candidates dropped; not ours, it leaves `open`, and when no
    /// candidate is left the batch was never created: its jobs go out again (those no
    /// other batch holds).
    async fn candidate(&mut self, i: usize, state: &BatchState) -> Result<Candidate, Halt> {
        let ours = match self.holds_ours(&self.open[i], state).await {
            Ok(ours) => ours,
            Err(ReadBack::Halt(h)) => return Err(h),
            // A candidate whose results cannot be read is not taken for ours.
            Err(ReadBack::Unreadable(_)) => false,
            Err(ReadBack::Later) => return Ok(Candidate::Later),
        };
        let batch = self.open.remove(i);
        if !ours {
            if !self.open.iter().any(|o| o.name == batch.name) {
                let record =
                    BatchRecord::new(BatchStep::Disowned, &batch.name, self.lane.name.as_ref());
                self.journaled(record).await?;
                let again: Vec<Job> = batch
                    .keys
                    .iter()
                    .filter(|key| !self.open.iter().any(|o| o.keys.contains(key)))
                    .filter_map(|key| self.waiting.get(key).copied())
                    .collect();
                self.resend(again).await?;
            }
            return Ok(Candidate::NotOurs);
        }
        self.journal_submitted(&batch.name, &batch.id).await?;
        self.open.retain(|o| o.name != batch.name);
        self.open.insert(
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
    async fn ended(&mut self, i: usize, state: &BatchState) -> Result<Polled, Halt> {
        let mut why = format!(
            "batch {} ended (status {}) without an answer to this request",
            state.id, state.status
        );
        match self.read_back(i, state).await {
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
        let batch = self.open.remove(i);
        self.fail_rest(&batch.keys, Some(&batch.id), None, &why);
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
    async fn result_files(&self, state: &BatchState) -> Result<Vec<bytes::Bytes>, ReadBack> {
        match self.api.result_files(state).await {
            Ok(files) => Ok(files),
            Err(e) if self.refused(&e) => Err(ReadBack::Halt(Halt::Stopped)),
            Err(e) if e.is_final() => Err(ReadBack::Unreadable(e.to_string())),
            Err(_) => Err(ReadBack::Later),
        }
    }

    /// Whether an ended candidate's results hold any of `batch`'s requests.
    async fn holds_ours(&self, batch: &Open, state: &BatchState) -> Result<bool, ReadBack> {
        let files = self.result_files(state).await?;
        let mine: HashSet<&str> = batch.keys.iter().map(String::as_str).collect();
        Ok(EachLine::new(&files).any(|line| {
            line["custom_id"]
                .as_str()
                .is_some_and(|id| mine.contains(id))
        }))
    }

    /// Reads an ended batch's results back and scores each (as many at once as the lane's
    /// gate lets workers score), each job's record sent as it is made.
    async fn read_back(&mut self, i: usize, state: &BatchState) -> Result<(), ReadBack> {
        let files = self.result_files(state).await?;
        let id = self.open[i].id.clone();
        let mine: HashSet<String> = self.open[i].keys.iter().cloned().collect();
        self.fail_answered_twice(&files, &mine, &id);
        let held = self.lane.held_sources(&self.options);
        let (bench, lane, options) = (&self.bench, &self.lane, &self.options);
        let (tx, active) = (&self.tx, &self.active);
        let waiting = &mut self.waiting;
        // A line at a time, as the scoring takes them: a batch's answers are never all
        // held parsed at once. A line that is not JSON answers nothing: its job fails as
        // unanswered.
        let answered = EachLine::new(&files).filter_map(|line| {
            let (custom_id, result) = lane.client.batch_result(&line);
            if !mine.contains(custom_id.as_str()) {
                return None;
            }
            waiting.remove(&custom_id).map(|job| (job, result))
        });
        let scored = futures_util::stream::iter(answered)
            .map(|(job, result)| {
                let (held, id) = (&held, &id);
                async move {
                    let rendered = match request_of(bench, &job, lane, options) {
                        Ok(r) => r,
                        Err(failed) => return Some(*failed),
                    };
                    let answer = source::Sourced {
                        result,
                        cached: false,
                    };
                    source::heard(held, &rendered.ask(lane, &job), &answer);
                    let mut r = score(bench, &job, &rendered, answer, lane, options).await?;
                    r.batch = Some(id.clone());
                    r.latency_ms = None;
                    r.ttft_ms = None;
                    r.answer_ms = None;
                    Some(r)
                }
            })
            .buffer_unordered(lane.client.capacity().max(1));
        tokio::pin!(scored);
        let mut sent = 0usize;
        while let Some(record) = scored.next().await {
            match record {
                Some(r) => {
                    active.fetch_sub(1, Ordering::SeqCst);
                    options.settle(&r);
                    let _ = tx.send(Message::Finished(Box::new(r)));
                    sent += 1;
                    // Records go no faster than the journal keeps them: a batch's 50,000
                    // answers never wait in the channel at once.
                    if sent.is_multiple_of(256) {
                        barrier(tx).await;
                    }
                }
                // Stopped while a judge was asked: left for a resume.
                None => return Err(ReadBack::Halt(Halt::Stopped)),
            }
        }
        Ok(())
    }
}

impl Collector {
    /// Fails each job the results answer more than once: which line is the answer is not
    /// for promptgauge to guess (the first is not more true than the second). The job's
    /// record holds every line given for it (`score_detail.results`) and the usage of all
    /// of them (each may be billed).
    fn fail_answered_twice(&mut self, files: &[bytes::Bytes], mine: &HashSet<String>, batch: &str) {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for line in EachLine::new(files) {
            if let Some(id) = line["custom_id"].as_str().filter(|id| mine.contains(*id)) {
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
            let Some(job) = self.waiting.remove(&id) else {
                continue;
            };
            let mut usage: Option<promptgauge_client::Usage> = None;
            for line in &given {
                if let Some(u) = self.lane.client.batch_result(line).1.usage {
                    usage.get_or_insert_with(Default::default).add_tokens(&u);
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

/// Why an ended batch's results were not all recorded.
enum ReadBack {
    Halt(Halt),
    /// They can never be read (the reason): the batch's jobs fail with it.
    Unreadable(String),
    /// They could not be read this time (the provider did not answer): try again.
    Later,
}
