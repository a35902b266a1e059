//! Runs in progress: a run folder under the folder of run folders whose lock another
//! process holds. Each is followed from where it was last read (its journal only grows
//! while the run holds it): its progress, running figures and newest answers reach the
//! page as server-sent events, and the page turns into the run's report when it ends.

use std::collections::{HashMap, VecDeque};
use std::path::{Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Serialize;

use super::{Shared, refuse, shell, url_segment};
use crate::report::html::esc;
use crate::runner::RunDir;
use crate::runner::journal::{self, JobRecord, JobStatus};

/// How often a live run's journal is looked at.
const TICK: Duration = Duration::from_millis(250);
/// How many of the newest answers a live page shows.
const NEWEST: usize = 8;

/// A run in progress, as the runs page lists it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct LiveRun {
    /// Its folder's name under the folder of run folders (its address here).
    pub name: String,
    pub run_id: String,
    pub bench: String,
    pub started_at: String,
    pub done: usize,
    pub planned: usize,
}

/// One arm's running figures.
#[derive(Debug, Clone, Default, Serialize)]
struct ArmTally {
    name: String,
    graded: u64,
    failed: u64,
    filtered: u64,
    score_sum: f64,
    /// Mean score and its running Wilson interval, once something was graded.
    mean: Option<f64>,
    low: Option<f64>,
    high: Option<f64>,
}

/// One of the newest answers (text cut short; shown as text).
#[derive(Debug, Clone, Serialize)]
struct Newest {
    job: usize,
    case: String,
    arm: String,
    status: &'static str,
    score: Option<f64>,
    answer: String,
}

/// A live run's journal, read so far.
#[derive(Debug, Serialize)]
pub(super) struct Tally {
    run_id: String,
    bench: String,
    started_at: String,
    planned: usize,
    done: usize,
    confidence: f64,
    arms: Vec<ArmTally>,
    newest: VecDeque<Newest>,
    /// Where the next read starts.
    #[serde(skip)]
    offset: u64,
    /// Each job's record so far, by (case, arm, repeat): its status and score.
    #[serde(skip)]
    seen: HashMap<(String, String, u32), (JobStatus, Option<f64>)>,
    #[serde(skip)]
    arm_of: HashMap<String, usize>,
}

impl Tally {
    fn new(record: &crate::runner::record::RunRecord) -> Tally {
        let arms = record.plan.arms();
        Tally {
            run_id: record.run_id.clone(),
            bench: record.bench.name.clone(),
            started_at: record.started_at.clone(),
            planned: record.plan_keys().planned(),
            done: 0,
            confidence: record.bench.confidence,
            arm_of: arms
                .iter()
                .enumerate()
                .map(|(i, a)| (a.clone(), i))
                .collect(),
            arms: arms
                .into_iter()
                .map(|name| ArmTally {
                    name,
                    ..ArmTally::default()
                })
                .collect(),
            newest: VecDeque::new(),
            offset: 0,
            seen: HashMap::new(),
        }
    }

    /// Reads what the journal gained since the last read; whether anything was.
    fn advance(&mut self, path: &FsPath) -> std::io::Result<bool> {
        if !path.exists() {
            return Ok(false);
        }
        let mut records = Vec::new();
        let stats = journal::read_from(path, self.offset, |_, r| records.push(r))?;
        self.offset += stats.complete_bytes;
        let changed = !records.is_empty();
        for r in records {
            self.add(r);
        }
        if changed {
            for a in &mut self.arms {
                a.mean = (a.graded > 0).then(|| a.score_sum / a.graded as f64);
                let bounds =
                    crate::stats::wilson(a.score_sum.round() as u64, a.graded, self.confidence);
                a.low = bounds.map(|b| b.0);
                a.high = bounds.map(|b| b.1);
            }
        }
        Ok(changed)
    }

    /// One record, as the reports count it: a job's first record, or a resend in place of
    /// its failure; a duplicate is left out.
    fn add(&mut self, r: JobRecord) {
        let arm = r.arm().into_owned();
        let Some(&i) = self.arm_of.get(&arm) else {
            return;
        };
        let key = (r.case_id.clone(), arm.clone(), r.repeat);
        match self.seen.get(&key) {
            Some((JobStatus::Failed, _)) if r.resent > 0 => {
                self.arms[i].failed -= 1;
                self.done -= 1;
            }
            Some(_) => return,
            None => {}
        }
        self.seen.insert(key, (r.status, r.score()));
        self.done += 1;
        let a = &mut self.arms[i];
        match r.status {
            JobStatus::Graded => {
                a.graded += 1;
                a.score_sum += r.score().unwrap_or(0.0);
            }
            JobStatus::Failed => a.failed += 1,
            JobStatus::Filtered => a.filtered += 1,
        }
        self.newest.push_front(Newest {
            job: r.job,
            case: r.case_id.clone(),
            arm,
            status: match r.status {
                JobStatus::Graded => "graded",
                JobStatus::Failed => "failed",
                JobStatus::Filtered => "filtered",
            },
            score: r.score(),
            answer: crate::report::visible(&r.output, 300),
        });
        self.newest.truncate(NEWEST);
    }
}

/// The live runs found at the last look, and when it was (looked again at most every
/// quarter second, however many pages ask).
#[derive(Default)]
pub(super) struct Scan {
    at: Option<Instant>,
    runs: Vec<(String, PathBuf)>,
    tallies: HashMap<String, Arc<Mutex<Tally>>>,
}

/// Whether another process holds `folder` (a run writing it).
fn held(folder: &FsPath) -> bool {
    folder.join(crate::runner::lock::FILE).is_file()
        && matches!(
            RunDir::at(folder).read_lock(),
            Err(crate::runner::lock::LockError::InUse { .. })
        )
}

/// The run folders under `reports` another process holds, by name.
fn look(reports: &FsPath) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(reports) else {
        return Vec::new();
    };
    let mut found: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let path = e.path();
            (path.join("run.json").is_file() && held(&path)).then_some((name, path))
        })
        .collect();
    found.sort();
    found
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
    enum Step {
        Follow,
        Ending(Instant),
        Done,
    }
    let stream = futures_util::stream::unfold(
        (shared, folder, tally, Step::Follow, true),
        move |(shared, folder, tally, step, first)| async move {
            let mut step = step;
            let mut first = first;
            loop {
                match step {
                    Step::Done => return None,
                    Step::Follow => {
                        if !first {
                            tokio::time::sleep(TICK).await;
                        }
                        let grew = advance(folder.clone(), tally.clone()).await?;
                        let ended = !held(&folder);
                        if first || grew || ended {
                            let event = Event::default().event("progress").data(figures(&tally));
                            let next = if ended {
                                Step::Ending(Instant::now())
                            } else {
                                Step::Follow
                            };
                            return Some((
                                Ok::<_, std::convert::Infallible>(event),
                                (shared, folder, tally, next, false),
                            ));
                        }
                        // Nothing new: look again (the keep-alive speaks meanwhile).
                        step = Step::Follow;
                        first = false;
                    }
                    Step::Ending(since) => {
                        // The run records itself in the store as it ends: its report is
                        // shown once there (a run with --no-store never is).
                        let run_id = tally.lock().map(|t| t.run_id.clone()).unwrap_or_default();
                        let recorded = shared.folder_of(&run_id).await.is_some();
                        if recorded || since.elapsed() > Duration::from_secs(10) {
                            let data = serde_json::json!({
                                "report": recorded.then(|| format!("/runs/{}/", url_segment(&run_id))),
                            });
                            let event = Event::default().event("end").data(data.to_string());
                            return Some((Ok(event), (shared, folder, tally, Step::Done, false)));
                        }
                        tokio::time::sleep(TICK).await;
                        step = Step::Ending(since);
                    }
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
