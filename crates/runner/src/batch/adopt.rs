//! A resumed batch lane adopts what it had submitted: the batches its journal holds that
//! still hold jobs without a record, found by their journaled id, or — for one journaled
//! as `submitting` with no `submitted` after it (a crash between the provider's accept and
//! the journal's write) — in the provider's list, by its name (OpenAI's metadata) or, where
//! the API keeps none (Anthropic's), as the candidates of its size and time. One not found
//! was never created: its jobs go out again, through the lane's workers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::Value;

use super::collector::{Collector, Halt, Open};
use super::record::{BatchRecord, BatchStep};
use crate::lane::Message;
use promptgauge_client::batch::BatchState;
use promptgauge_suite::Job;

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
pub(super) enum Lost {
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

impl Collector {
    /// Adopts the batches a resumed run had submitted that still hold jobs of `jobs`
    /// without a record: each such job is started and waits for its batch. Returns the
    /// jobs adopted (by plan position): the workers leave them alone.
    pub(super) async fn adopt(&mut self, jobs: &[Job]) -> Result<HashSet<usize>, Halt> {
        let mut adopted = HashSet::new();
        if !self
            .options
            .batches
            .iter()
            .any(|b| b.endpoint == self.lane.name)
        {
            return Ok(adopted);
        }
        self.claim_journaled();
        let lane_jobs: HashMap<String, Job> =
            jobs.iter().map(|j| (self.custom_id(j), *j)).collect();
        let mut listed: Option<Vec<BatchState>> = None;
        for n in self.named(&lane_jobs) {
            let Some(found) = self.found(&n, &mut listed).await? else {
                continue;
            };
            let keys: Vec<String> = n
                .keys
                .into_iter()
                .filter(|k| lane_jobs.contains_key(k))
                .collect();
            for k in &keys {
                if let Some(job) = lane_jobs.get(k)
                    && adopted.insert(job.index)
                {
                    // Its hold was reserved before any lane started (`reserve_adopted`).
                    self.waiting.insert(k.clone(), *job);
                    self.active.fetch_add(1, Ordering::SeqCst);
                    let _ = self.tx.send(Message::Started(*job));
                }
            }
            for (id, guessed) in found {
                self.open.push(Open {
                    name: n.name.clone(),
                    id,
                    keys: keys.clone(),
                    last: None,
                    guessed,
                });
            }
        }
        Ok(adopted)
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
    /// (`lane_jobs`; a disowned one's jobs went out again in another).
    fn named(&self, lane_jobs: &HashMap<String, Job>) -> Vec<Named> {
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
        named.retain(|n| n.keys.iter().any(|k| lane_jobs.contains_key(k)));
        named
    }

    /// The provider's ids a journaled batch may be (each with whether it is a guess): its
    /// journaled id, or — never journaled — the one found in the provider's list (`listed`,
    /// asked once for all), or the candidates; `None` when it was never created.
    async fn found(
        &self,
        n: &Named,
        listed: &mut Option<Vec<BatchState>>,
    ) -> Result<Option<Vec<(String, bool)>>, Halt> {
        if let Some(id) = &n.id {
            return Ok(Some(vec![(id.clone(), false)]));
        }
        let at = promptgauge_base::clock::parse_utc(&n.at).unwrap_or(0.0);
        if listed.is_none() {
            *listed = Some(self.list(at).await?);
        }
        let list = listed.as_deref().unwrap_or_default();
        // Created at most as late as now (its create may have been retried long after the
        // line was written).
        let window = (at, promptgauge_base::clock::now_seconds());
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
    pub(super) fn find_lost(
        &self,
        list: &[BatchState],
        name: &str,
        size: usize,
        window: (f64, f64),
    ) -> Lost {
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
    pub(super) async fn journal_submitted(&self, name: &str, id: &str) -> Result<(), Halt> {
        if let Ok(mut claimed) = self.options.batch_claims.lock() {
            claimed.insert(id.to_string());
        }
        let mut r = BatchRecord::new(BatchStep::Submitted, name, self.lane.name.as_ref());
        r.id = Some(id.to_string());
        self.journaled(r).await
    }

    /// The provider's list of batches created since an hour before `since` (seconds since
    /// 1970), asked again while it does not answer.
    pub(super) async fn list(&self, since: f64) -> Result<Vec<BatchState>, Halt> {
        let mut wait = self.first_wait();
        loop {
            match self.api.list_since(since - 3600.0).await {
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
}
