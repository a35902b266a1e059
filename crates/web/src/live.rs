//! Runs in progress: a run folder under the folder of run folders whose lock another
//! process holds. Each is followed from where it was last read (its journal only grows
//! while the run holds it): its progress, running figures and newest answers reach the
//! page as server-sent events, and the page turns into the run's report when it ends. Its
//! looks and waits are on tokio's clock, so a test follows a run on a paused one.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use futures_util::StreamExt;
use serde::Serialize;
use tokio::time::Instant;

use super::page::{refuse, shell, url_segment};
use super::shared::Shared;
use super::tally::{Tally, held, look};
use promptgauge_report::html::esc;
use promptgauge_runner::RunDir;

/// How often a live run's journal is looked at.
const TICK: Duration = Duration::from_millis(250);

/// A run in progress, as the runs page lists it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct LiveRun {
    /// Its folder's name under the folder of run folders (its address here).
    pub(crate) name: String,
    pub(crate) run_id: String,
    pub(crate) bench: String,
    pub(crate) started_at: String,
    pub(crate) done: usize,
    pub(crate) planned: usize,
}

impl Shared {
    /// The live runs: looked for again when the last look is older than a quarter second,
    /// each found then asked again whether it still runs.
    fn live_runs(&self) -> Vec<(String, PathBuf)> {
        let mut scan = self.scan.lock().unwrap_or_else(|p| p.into_inner());
        if scan
            .at
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(250))
        {
            scan.runs = look(&self.reports);
            scan.at = Some(Instant::now());
            let names: Vec<String> = scan.runs.iter().map(|(n, _)| n.clone()).collect();
            scan.tallies.retain(|n, _| names.contains(n));
        }
        // A run found at the last look may have ended since.
        scan.runs.iter().filter(|(_, f)| held(f)).cloned().collect()
    }

    /// A live run's tally, made on first sight (the journal read once), by its name.
    fn tally(&self, name: &str) -> Option<(PathBuf, Arc<Mutex<Tally>>)> {
        let folder = self
            .live_runs()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p)?;
        let mut scan = self.scan.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = scan.tallies.get(name) {
            return Some((folder, t.clone()));
        }
        let record = RunDir::at(&folder).read_record().ok()?;
        let tally = Arc::new(Mutex::new(Tally::new(&record)));
        scan.tallies.insert(name.to_string(), tally.clone());
        Some((folder, tally))
    }
}

/// Brings a tally up to date (off the async threads): whether it gained records; `None`
/// when the blocking task could not run.
async fn advance(folder: PathBuf, tally: Arc<Mutex<Tally>>) -> Option<bool> {
    tokio::task::spawn_blocking(move || {
        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
        t.advance(&RunDir::at(&folder).journal_path())
            .unwrap_or(false)
    })
    .await
    .ok()
}

/// A tally's figures, as the live page reads them.
fn figures(tally: &Mutex<Tally>) -> String {
    let t = tally.lock().unwrap_or_else(|p| p.into_inner());
    serde_json::to_string(&*t).unwrap_or_default()
}

/// `/api/live`: the runs in progress.
pub(super) async fn list(State(shared): State<Arc<Shared>>) -> Response {
    let mut out = Vec::new();
    for (name, _) in shared.live_runs() {
        let Some((folder, tally)) = shared.tally(&name) else {
            continue;
        };
        if advance(folder, tally.clone()).await.is_none() {
            continue;
        }
        let t = tally.lock().unwrap_or_else(|p| p.into_inner());
        out.push(LiveRun {
            name,
            run_id: t.run_id.clone(),
            bench: t.bench.clone(),
            started_at: t.started_at.clone(),
            done: t.done,
            planned: t.planned,
        });
    }
    axum::Json(out).into_response()
}

/// Whether `name` is one folder's name (no separator, not `.` or `..`, not hidden): a
/// request's name is never a path.
fn plain(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\', '\0'])
}

/// `/live/NAME`: a run in progress, updated as its journal grows; its report once it ends.
pub(super) async fn page(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    if !plain(&name) {
        return refuse(StatusCode::NOT_FOUND, "no run in progress by that name");
    }
    let running = shared.tally(&name).is_some_and(|(folder, _)| held(&folder));
    if !running {
        // Not running (any more): its report, when the store has it.
        if let Ok(record) = RunDir::at(shared.reports.join(&name)).read_record()
            && shared.folder_of(&record.run_id).await.is_some()
        {
            return Redirect::to(&format!("/runs/{}/", url_segment(&record.run_id)))
                .into_response();
        }
        return refuse(
            StatusCode::NOT_FOUND,
            "no run in progress by that name (it may have ended: see the runs list)",
        );
    }
    let body = format!(
        "<h1>Running: {name}</h1>\n<p id=\"state\">Reading the journal…</p>\n<p><span class=\"bar\"><span id=\"bar\" style=\"width:0\"></span></span> <span id=\"progress\"></span></p>\n<table id=\"figures\"><thead><tr><th>variant</th><th>graded</th><th>failed</th><th>mean</th><th>running interval</th></tr></thead><tbody></tbody></table>\n<h2>Newest answers</h2>\n<table id=\"newest\"><thead><tr><th>case</th><th>variant</th><th>status</th><th>score</th><th>answer</th></tr></thead><tbody></tbody></table>\n<script>var EVENTS='/api/live/{id}/events';{LIVE_PAGE}</script>",
        name = esc(&name),
        id = url_segment(&name),
    );
    shell(&format!("Running: {name}"), &body)
}

/// The live page: each `progress` event redraws the figures (names and answers set as
/// text, never markup); `end` turns the page into the run's report.
const LIVE_PAGE: &str = r#"
(function(){
  function pct(x){return x==null?'':(100*x).toFixed(1)+'%';}
  function cell(tr,text){var td=document.createElement('td');td.textContent=text;tr.appendChild(td);}
  var src=new EventSource(EVENTS);
  src.addEventListener('progress',function(e){
    var t=JSON.parse(e.data);
    document.getElementById('state').textContent='Running: '+t.bench+' ('+t.run_id+')';
    document.getElementById('progress').textContent=t.done+' of '+t.planned+' jobs';
    document.getElementById('bar').style.width=(t.planned?100*t.done/t.planned:0)+'%';
    var body=document.querySelector('#figures tbody');body.textContent='';
    t.arms.forEach(function(a){var tr=document.createElement('tr');cell(tr,a.name);cell(tr,a.graded);cell(tr,a.failed);cell(tr,pct(a.mean));cell(tr,a.low==null?'':'['+pct(a.low)+', '+pct(a.high)+']');body.appendChild(tr);});
    var nb=document.querySelector('#newest tbody');nb.textContent='';
    t.newest.forEach(function(n){var tr=document.createElement('tr');cell(tr,n.case);cell(tr,n.arm);cell(tr,n.status);cell(tr,n.score==null?'':n.score.toFixed(2));cell(tr,n.answer);nb.appendChild(tr);});
  });
  src.addEventListener('end',function(e){
    src.close();
    var d=JSON.parse(e.data);
    document.getElementById('state').textContent='Finished.';
    if(d.report){location.href=d.report;}
  });
})();
"#;

/// `/api/live/NAME/events`: a `progress` event whenever the journal grew (and at once),
/// then `end` when the run lets go of its folder, with where its report is once the store
/// records it.
pub(super) async fn events(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    let Some((folder, tally)) = shared.tally(&name) else {
        return refuse(StatusCode::NOT_FOUND, "no run in progress by that name");
    };
    let told = follow(LiveFolder {
        shared,
        folder,
        tally,
    });
    let stream = told.map(|told| {
        Ok::<_, std::convert::Infallible>(match told {
            Told::Progress(figures) => Event::default().event("progress").data(figures),
            Told::End(report) => Event::default()
                .event("end")
                .data(serde_json::json!({ "report": report }).to_string()),
        })
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// How long a run that ended is waited for in the store before its page is told it ended
/// without a report (a run with --no-store is never recorded).
const RECORDED_WITHIN: Duration = Duration::from_secs(10);

/// What a live page's events follow: a run's figures, whether it still runs, and where
/// its report is once the store records it. A run folder and the store ([`LiveFolder`]),
/// or a test's script on tokio's paused clock.
trait Followed: Send + Sync + 'static {
    /// Brings the figures up to date: whether they grew; `None` when they cannot be read.
    fn grow(&self) -> impl Future<Output = Option<bool>> + Send;
    /// Whether the run still holds its folder.
    fn running(&self) -> bool;
    /// The figures, as the live page reads them.
    fn figures(&self) -> String;
    /// The address of its report, once the store records the run.
    fn report(&self) -> impl Future<Output = Option<String>> + Send;
}

/// A run in progress: its folder, its tally, and the store it is recorded in as it ends.
struct LiveFolder {
    shared: Arc<Shared>,
    folder: PathBuf,
    tally: Arc<Mutex<Tally>>,
}

impl Followed for LiveFolder {
    async fn grow(&self) -> Option<bool> {
        advance(self.folder.clone(), self.tally.clone()).await
    }

    fn running(&self) -> bool {
        held(&self.folder)
    }

    fn figures(&self) -> String {
        figures(&self.tally)
    }

    async fn report(&self) -> Option<String> {
        let run_id = self
            .tally
            .lock()
            .map(|t| t.run_id.clone())
            .unwrap_or_default();
        self.shared.folder_of(&run_id).await?;
        Some(format!("/runs/{}/", url_segment(&run_id)))
    }
}

/// What a live page is told: the figures (`progress`), or that the run ended (`end`),
/// with its report's address when the store records it.
#[derive(Debug, Clone, PartialEq)]
enum Told {
    Progress(String),
    End(Option<String>),
}

/// The events of a followed run, on tokio's clock: its figures at once and whenever they
/// grew (looked at every [`TICK`]); once the run lets go of its folder, its figures a last
/// time and its end, as soon as the store records it or after [`RECORDED_WITHIN`].
fn follow<F: Followed>(followed: F) -> impl futures_util::Stream<Item = Told> + Send {
    pub(crate) enum LiveStep {
        Follow { first: bool },
        Ending(Instant),
        Done,
    }
    futures_util::stream::unfold(
        (followed, LiveStep::Follow { first: true }),
        |(followed, step)| async move {
            let mut step = step;
            loop {
                match step {
                    LiveStep::Done => return None,
                    LiveStep::Follow { first } => {
                        if !first {
                            tokio::time::sleep(TICK).await;
                        }
                        let grew = followed.grow().await?;
                        let ended = !followed.running();
                        if first || grew || ended {
                            let next = if ended {
                                LiveStep::Ending(Instant::now())
                            } else {
                                LiveStep::Follow { first: false }
                            };
                            return Some((Told::Progress(followed.figures()), (followed, next)));
                        }
                        // Nothing new: look again (the keep-alive speaks meanwhile).
                        step = LiveStep::Follow { first: false };
                    }
                    LiveStep::Ending(since) => {
                        // The run records itself in the store as it ends: its report is
                        // shown once there.
                        let report = followed.report().await;
                        if report.is_some() || since.elapsed() > RECORDED_WITHIN {
                            return Some((Told::End(report), (followed, LiveStep::Done)));
                        }
                        tokio::time::sleep(TICK).await;
                        step = LiveStep::Ending(since);
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    /// A run that grows every look until `ends`, recorded in the store at `recorded` (or
    /// never), on tokio's clock.
    struct Script {
        ends: Instant,
        recorded: Option<Instant>,
    }

    impl Followed for Script {
        async fn grow(&self) -> Option<bool> {
            Some(self.running())
        }

        fn running(&self) -> bool {
            Instant::now() < self.ends
        }

        fn figures(&self) -> String {
            "{}".into()
        }

        async fn report(&self) -> Option<String> {
            self.recorded
                .filter(|at| Instant::now() >= *at)
                .map(|_| "/runs/r/".to_string())
        }
    }

    /// Everything a followed run tells, and how long it took on tokio's clock (paused:
    /// it advances only while every task waits, so no test sleeps for real).
    async fn told(script: Script) -> (Vec<Told>, Duration) {
        let start = Instant::now();
        let real = std::time::Instant::now();
        let told: Vec<Told> = follow(script).collect().await;
        assert!(real.elapsed() < Duration::from_secs(2), "slept for real");
        (told, start.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_ends_unrecorded_is_told_its_end_after_ten_seconds_of_tokio_s_clock() {
        let now = Instant::now();
        let (told, took) = told(Script {
            ends: now + Duration::from_secs(1),
            recorded: None,
        })
        .await;
        // At once, each look while it grew, and once more as it ended: 0, ¼, ½, ¾, 1 s.
        let progress = vec![Told::Progress("{}".into()); 5];
        assert_eq!(told[..5], progress[..], "{told:?}");
        assert_eq!(told[5..], [Told::End(None)], "{told:?}");
        let waited = took - Duration::from_secs(1);
        assert!(
            waited > RECORDED_WITHIN && waited <= RECORDED_WITHIN + TICK,
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_the_store_records_as_it_ends_is_told_where_its_report_is() {
        let now = Instant::now();
        let (told, took) = told(Script {
            ends: now + Duration::from_secs(1),
            recorded: Some(now + Duration::from_secs(2)),
        })
        .await;
        assert_eq!(
            told.last(),
            Some(&Told::End(Some("/runs/r/".into()))),
            "{told:?}"
        );
        assert!(
            took >= Duration::from_secs(2) && took <= Duration::from_secs(2) + TICK,
            "{took:?}"
        );
    }
}
