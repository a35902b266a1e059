//! What every layer of promptgauge stands on: a stable hash ([`hash`]), the wall clock as
//! reports write it ([`clock`]), safe file reads and writes ([`files`]: regular files only,
//! whole files renamed into place), a compact numbered set of ids ([`ids`]), and the
//! programs promptgauge starts, each under a watchdog ([`process`]).
//!
//! Invariant: knows nothing of benches, requests or scores; depends on no other crate of
//! the workspace (docs/dev/architecture.md, "Code map").

#![warn(unreachable_pub)]
// A test tells one story from start to end; it is not split to a length.
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod clock;
pub mod files;
pub mod hash;
pub mod ids;
pub mod process;
