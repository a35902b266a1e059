//! The one trait a provider's batch API implements: what differs between OpenAI's and
//! Anthropic's (and a third's) — where it lives, its limits, how a request is written as a
//! line, how a batch is submitted, described and read back. The calls themselves
//! ([`Http`]) and the batch's state ([`BatchState`]) are shared.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use serde_json::Value;

use super::wire::{BatchError, BatchState, Http};
use crate::protocol::Protocol;

/// A call of the batch API that is still under way.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T, BatchError>> + Send + 'a>>;

/// A provider's batch API (docs/guide/batch.md): chosen per endpoint by its protocol
/// (`Client::batch_api`).
pub trait BatchApi: Send + Sync {
    /// The most requests one batch may hold, and the most bytes its requests may take.
    fn limits(&self) -> (usize, usize);

    /// Where its batches live under the base URL (`/batches`): a batch is `{path}/{id}`,
    /// cancelled at `{path}/{id}/cancel`, listed at `{path}?limit=…`.
    fn path(&self) -> &'static str;

    /// Whether a batch carries promptgauge's name (in its metadata), so one not listed by
    /// name was never created; an API without metadata is searched by size and time.
    fn keeps_names(&self) -> bool;

    /// The `custom_id` a job has in a batch, from its idempotency key.
    fn custom_id(&self, key: &str) -> String;

    /// A request as one line of a batch: its `custom_id`, the body streaming would send
    /// (not streamed), and the path under `/v1` its protocol's requests go to.
    fn line(&self, custom_id: String, body: Value, url: &'static str) -> Value;

    /// The query that asks for the page of the list after batch `id` (`&after=…`).
    fn after(&self, id: &str) -> String;

    /// A batch as the API describes it, in OpenAI's words.
    fn state(&self, v: Value) -> Result<BatchState, BatchError>;

    /// Uploads a batch's input (JSONL) where the API takes a file: its id; `None` where the
    /// batch itself holds its requests.
    fn prepare<'a>(
        &'a self,
        http: &'a Http,
        name: &'a str,
        jsonl: &'a [u8],
    ) -> Pending<'a, Option<String>>;

    /// Submits a batch: from its uploaded `file`, or its `jsonl` requests; its requests go
    /// to `endpoint`, and it keeps `metadata` (the run's id and the batch's name) where the
    /// API keeps any.
    fn submit<'a>(
        &'a self,
        http: &'a Http,
        file: Option<&'a str>,
        jsonl: &'a [u8],
        endpoint: &'a str,
        metadata: Value,
    ) -> Pending<'a, BatchState>;

    /// An ended batch's result files (JSONL), all of them within `limit` bytes, read at the
    /// endpoint's own base URL.
    fn result_files<'a>(
        &'a self,
        http: &'a Http,
        batch: &'a BatchState,
        limit: usize,
    ) -> Pending<'a, Vec<Bytes>>;

    /// One line of the results: the answer's body, for `protocol` to decode as a whole
    /// answer, or why the request has none (the HTTP status behind it, if any, and the
    /// cause).
    fn answer<'a>(
        &self,
        protocol: &dyn Protocol,
        line: &'a Value,
    ) -> Result<&'a Value, (Option<u16>, String)>;
}
