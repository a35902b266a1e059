//! What the handlers share ([`Shared`]: the store, the folder of run folders, the
//! server's secrets, the answer indexes and the live runs found), and the commands `app`
//! lends the pages ([`Commands`]).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use super::index::RunIndex;
use super::tally::Scan;
use promptgauge_store::{Filter, Store};

/// What the pages show that the commands above compute: `app` lends its `compare`,
/// `history` and `report` so each figure has one implementation (`web` cannot reach
/// `app`: it lies above).
pub trait Commands: Send + Sync {
    /// compare.html of the run in folder `b` against the run in folder `a` (folders the
    /// store records), or why not.
    fn compare<'a>(&'a self, a: &'a std::path::Path, b: &'a std::path::Path) -> Reply<'a, String>;
    /// history.html of `bench`, each run linked by `link` (from its run id), or why not.
    fn history<'a>(
        &'a self,
        bench: &'a str,
        link: &'a (dyn Fn(&str) -> String + Sync),
    ) -> Reply<'a, String>;
    /// Writes a run folder's reports again (after labels were added).
    fn report<'a>(&'a self, folder: &'a std::path::Path) -> Reply<'a, ()>;
}

/// What a [`Commands`] call comes to: a value, or the message a person reads.
pub type Reply<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// What the handlers share.
pub(super) struct Shared {
    pub(super) store: Store,
    pub(super) reports: PathBuf,
    /// Every `Host` a request may name.
    pub(super) hosts: Vec<String>,
    /// The access token every request carries (none: `--no-token` on loopback).
    pub(super) token: Option<String>,
    /// On the network: reached by names it cannot know, so the token stands in for the
    /// `Host` and `Origin` checks.
    pub(super) public: bool,
    /// `https` or `http`.
    pub(super) scheme: &'static str,
    /// The port it listens on (its cookie's name holds it).
    pub(super) port: u16,
    /// The token every state-changing request carries (from the page that makes it).
    pub(super) csrf: String,
    /// The one-time path a browser is opened at (`view --open`): `/open/CODE` sets the
    /// token's cookie once, then the code is spent ([`super::Listening::one_time_url`]).
    pub(super) opener: Mutex<Option<String>>,
    pub(super) commands: Arc<dyn Commands>,
    /// Runs' answer indexes, by run id, while their journals stay as they were.
    pub(super) indexes: Mutex<HashMap<String, Arc<RunIndex>>>,
    /// One label written at a time by this server (the run folder's lock keeps out others).
    pub(super) labelling: tokio::sync::Mutex<()>,
    /// The runs in progress, as last looked for.
    pub(super) scan: Mutex<Scan>,
}

impl Shared {
    /// A recorded run's folder, by its run id (the store says where it is).
    pub(super) async fn folder_of(&self, run_id: &str) -> Option<PathBuf> {
        let filter = Filter {
            run_id: Some(run_id.to_string()),
            ..Filter::default()
        };
        let runs = self.store.runs(&filter).await.ok()?;
        let run = runs.into_iter().find(|r| r.run_id == run_id)?;
        Some(self.resolve(&run.folder))
    }

    /// A folder as the store records it: absolute, or under the folder of run folders.
    pub(super) fn resolve(&self, folder: &str) -> PathBuf {
        let folder = PathBuf::from(folder);
        if folder.is_absolute() {
            folder
        } else {
            self.reports.join(folder)
        }
    }
}
