//! The client, library-level: deadlines, retries and triage on a paused clock (`client`), streams that lie (`hostile`), real sockets (`tcp`), OpenAI's Responses API scripted and simulated (`responses`), the WHATWG event-stream rules (`sse_conformance`) and properties of the decoder and loaders (`properties`).
//!
//! One test crate per area: each links the whole library, so fewer crates build faster.

// A test tells one story from start to end; it is not split to a length.
#![allow(clippy::too_many_lines)]

mod batch;
mod client;
mod hostile;
mod properties;
mod responses;
mod sse_conformance;
mod tcp;
