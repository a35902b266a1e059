//! Whole runs: the binary end to end (`cli`), kills, signals, locks and resumes (`durability`), malformed input (`bad_input`), the runner under every fault (`runner`), rate limits, replicas and the cache (`scale`), a bench through OpenAI's Responses API (`responses`) and over Anthropic messages (`anthropic`), CI gates (`ci`), and every gate on every kind of score (`gates`), and every command of docs/guide/ci.md as written (`ci_doc`).
//!
//! One test crate per area: each links the whole library, so fewer crates build faster.

// A test tells one story from start to end; it is not split to a length.
#![allow(clippy::too_many_lines)]

#[path = "../common/mod.rs"]
mod common;

mod anthropic;
mod attachments;
mod bad_input;
mod batch;
mod bench_gates;
mod budget;
mod ci;
mod ci_doc;
mod cli;
mod durability;
mod endpoints;
mod fetch;
mod gates;
mod import_promptfoo;
mod import_results;
mod judge;
mod local_only;
mod packages;
mod responses;
mod runner;
mod scale;
mod schema;
mod scorers;
mod sequential;
mod shell;
mod store;
mod tool_safety;
mod tools;
mod view;
mod view_matrix;
