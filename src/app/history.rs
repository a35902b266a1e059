//! The history store's commands: `history` (a bench's runs over time, steps marked),
//! `runs` (what the store holds) and `index` (the store rebuilt from run folders).

use std::path::{Component, Path, PathBuf};

use anyhow::Context;

use super::{Exit, Failure};
use crate::app::settings::Env;
use crate::cli::{HistoryArgs, IndexArgs, RunFilterArgs, RunsArgs};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report::history;
use promptgauge_runner::RunDir;
use promptgauge_store::{Filter, Location, Store};

/// The folder of run folders when none is named: `run --out`'s default.
pub(super) const REPORTS: &str = "reports";

/// Opens a store that must already exist (reading commands never create one). The
/// default one missing is the first hour's usual state: it gets its own explanation.
pub(super) async fn open_existing(location: &Location, named: bool) -> Result<Store, Failure> {
    if let Some(file) = location.file().filter(|f| !named && !f.is_file()) {
        return Err(UsageError::with_fix(
            format!("there is no history store at {} yet", file.display()),
            "runs record themselves into promptgauge.db beside their run folders (reports/): run a bench, name the store with --store or $PROMPTGAUGE_STORE, or build it from run folders: promptgauge index reports",
        )
        .into());
    }
    Store::open_existing(location).await.before_send()
}

/// Unix milliseconds from `--since`: a date, a time, or a duration back from now.
fn since(text: &str) -> Result<i64, UsageError> {
    let t = text.trim();
    let at = if t.len() == 10 {
        humantime::parse_rfc3339_weak(&format!("{t}T00:00:00Z")).ok()
    } else {
        humantime::parse_rfc3339_weak(t).ok()
    }
    .or_else(|| {
        humantime::parse_duration(t)
            .ok()
            .and_then(|d| std::time::SystemTime::now().checked_sub(d))
    });
    at.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .ok_or_else(|| {
            UsageError::with_fix(
                format!("--since {text} is neither a date nor a duration"),
                "write a date (2026-11-01), a time (2026-11-01T09:00:00Z) or a duration (30d, 2weeks, 12h)",
            )
        })
}

fn filter(args: &RunFilterArgs, bench: Option<String>) -> Result<Filter, UsageError> {
    Ok(Filter {
        bench,
        since_unix_ms: args.since.as_deref().map(since).transpose()?,
        branch: args.branch.clone(),
        model: args.model.clone(),
        ..Filter::default()
    })
}

/// `history [BENCH]`.
pub async fn history(args: &HistoryArgs, env: &Env) -> Result<Exit, Failure> {
    let (location, named) = crate::app::settings::store_location(
        args.filter.store.as_deref(),
        env,
        Path::new(REPORTS),
    )?;
    let store = open_existing(&location, named).await?;
    let built = async {
        let bench = super::baseline::bench_in(
            &store,
            args.bench.as_deref(),
            "history",
            "promptgauge history NAME",
        )
        .await?;
        let mut f = filter(&args.filter, Some(bench.clone()))?;
        f.complete = !args.all;
        let history = history_of(&store, &bench, f).await?;
        let several = store.benches().await.before_send()?.len() > 1;
        Ok::<_, Failure>((history, several))
    }
    .await;
    store.close().await;
    let (h, several) = built?;
    let h = match &args.part {
        None => h,
        Some(name) => one_part(h, name)?,
    };
    if h.runs.is_empty() {
        if args.json {
            out!("{}", serde_json::to_string_pretty(&h).before_send()?);
        }
        let benches = format!("bench `{}`", h.bench);
        note!(
            "no {}run of {benches} in {} matches{}",
            if args.all { "" } else { "complete " },
            location.shown(),
            if args.all {
                ""
            } else {
                " (--all shows incomplete runs too)"
            }
        );
        return Ok(Exit::Success);
    }
    if args.json {
        let text = serde_json::to_string_pretty(&h).before_send()?;
        out!("{text}");
    } else if h.part.is_some() {
        out!("{}", history::render_part(&h));
    } else {
        out!("{}", promptgauge_report::terminal::render_history(&h));
        if !h.parts.is_empty() {
            note!(
                "parts of the score: {} (add --part NAME to see one over time)",
                h.parts.join(", ")
            );
        }
    }
    let html = match &args.html {
        Some(p) => p.clone(),
        None => {
            let name = page_name(&h, several);
            match location.file() {
                Some(file) => file.with_file_name(name),
                None => Path::new(REPORTS).join(name),
            }
        }
    };
    write_page(&h, &html)?;
    Ok(Exit::Success)
}

/// `history --part NAME`: the history of that part, or why not (no run has it: the
/// parts there are, or what a part is when there are none).
fn one_part(h: history::History, name: &str) -> Result<history::History, UsageError> {
    let known = h.parts.clone();
    let bench = h.bench.clone();
    h.of_part(name).ok_or_else(|| {
        let fix = if known.is_empty() {
            "a part is a `fields` key, a scorer of `all`/`any`/`mean` (named by `name:` or its kind) or a judge's criterion: this bench's runs in the store have none".to_string()
        } else {
            format!("name one of the parts its runs have: {}", known.join(", "))
        };
        UsageError::with_fix(
            format!("no run of bench `{bench}` has a part named `{name}`"),
            fix,
        )
    })
}

/// history.html's name beside the store: one page per bench when the store holds several,
/// and a part's page beside the whole score's, never over it.
fn page_name(h: &history::History, several: bool) -> String {
    let bench = if several {
        format!("-{}", file_safe(&h.bench))
    } else {
        String::new()
    };
    let part = h
        .part
        .as_deref()
        .map_or(String::new(), |p| format!("-part-{}", file_safe(p)));
    format!("history{bench}{part}.html")
}

/// Writes history.html at `html`, each run linked to its report.html where it is.
fn write_page(h: &history::History, html: &Path) -> Result<(), Failure> {
    let folder = html
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let base = std::path::absolute(folder).before_send()?;
    let link = |r: &promptgauge_store::RunRow| {
        let report = Path::new(&r.folder).join("report.html");
        report.is_file().then(|| href(&relative(&base, &report)))
    };
    if let Some(dir) = html.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {}", dir.display()))
            .before_send()?;
    }
    promptgauge_base::files::write_atomically(html, history::render_html(h, &link))
        .with_context(|| format!("cannot write {}", html.display()))
        .before_send()?;
    note!("history page: {}", html.display());
    Ok(())
}

/// The history of `bench`'s runs that pass `f` (shards left out: their merge stands for
/// them, and their rows stay out).
pub(super) async fn history_of(
    store: &Store,
    bench: &str,
    mut f: Filter,
) -> Result<history::History, Failure> {
    f.whole = true;
    let runs = store.runs(&f).await.before_send()?;
    let mut variants = store.variants(&f).await.before_send()?;
    let mut parts = store.parts(&f).await.before_send()?;
    // Run by run: only the runs a step starts from keep their job rows.
    let mut history = history::Builder::new(bench);
    for run in runs {
        let rows = variants.remove(&run.run_id).unwrap_or_default();
        // Kept compact as they stream in: two 200,000-job runs' rows held whole took
        // 75 MB of the viewer's memory.
        let mut jobs = history::RunScores::new(&rows);
        store
            .jobs_each(&run.run_id, |row| jobs.add(row))
            .await
            .before_send()?;
        let run_parts = parts.remove(&run.run_id).unwrap_or_default();
        history.push(run, rows, run_parts, jobs);
    }
    Ok(history.finish())
}

/// A bench name as part of a file name.
fn file_safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A relative path as a link: each byte a URL would misread, percent-encoded.
fn href(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    promptgauge_report::html::percent_encode(&text, b"/")
}

/// `to` as a path relative to the folder `from` (both absolute), for a link.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let to = std::path::absolute(to).unwrap_or_else(|_| to.to_path_buf());
    let a: Vec<Component<'_>> = from.components().collect();
    let b: Vec<Component<'_>> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    out
}

/// `runs`.
pub async fn runs(args: &RunsArgs, env: &Env) -> Result<Exit, Failure> {
    let (location, named) = crate::app::settings::store_location(
        args.filter.store.as_deref(),
        env,
        Path::new(REPORTS),
    )?;
    let store = open_existing(&location, named).await?;
    let listed = async {
        if let Some(b) = &args.bench {
            super::baseline::bench_in(&store, Some(b), "runs", "promptgauge runs NAME").await?;
        }
        let mut f = filter(&args.filter, args.bench.clone())?;
        f.limit = Some(args.limit as usize);
        let runs = store.runs(&f).await.before_send()?;
        let variants = if args.json {
            store.variants(&f).await.before_send()?
        } else {
            Default::default()
        };
        Ok::<_, Failure>((runs, variants))
    }
    .await;
    store.close().await;
    let (runs, mut variants) = listed?;
    if args.json {
        for r in &runs {
            let mut v = serde_json::to_value(r).before_send()?;
            v["variants"] = serde_json::to_value(variants.remove(&r.run_id).unwrap_or_default())
                .before_send()?;
            out!("{v}");
        }
    } else if runs.is_empty() {
        note!(
            "the history store {} holds no run that matches",
            location.shown()
        );
    } else {
        out!("{}", promptgauge_report::terminal::render_runs(&runs));
    }
    Ok(Exit::Success)
}

/// `index DIR…`: records every run folder found (a DIR, or the folders in it) again.
pub async fn index(args: &IndexArgs, env: &Env) -> Result<Exit, Failure> {
    let folders = run_folders(&args.dirs)?;
    // Beside the first folder of run folders, where `run` records.
    let root = match args.dirs.first() {
        Some(d) if RunDir::at(d).record_path().is_file() => {
            d.parent().unwrap_or(Path::new(".")).to_path_buf()
        }
        Some(d) => d.clone(),
        None => PathBuf::from(REPORTS),
    };
    let (location, _) = crate::app::settings::store_location(args.store.as_deref(), env, &root)?;
    if folders.is_empty() {
        return Err(UsageError::with_fix(
            "no run folder was found to index",
            "name run folders (with a run.json), or the folder that holds them, e.g. promptgauge index reports",
        )
        .into());
    }
    let store = Store::open(&location).await.before_send()?;
    let (recorded, skipped) = index_all(&store, &folders).await;
    store.close().await;
    note!(
        "{recorded} run{} recorded in {}{}",
        if recorded == 1 { "" } else { "s" },
        location.shown(),
        if skipped > 0 {
            format!("; {skipped} skipped")
        } else {
            String::new()
        }
    );
    Ok(if recorded == 0 {
        Exit::Input
    } else {
        Exit::Success
    })
}

/// The run folders `dirs` name: each a run folder (with a run.json), or a folder whose
/// run folders are taken in name order.
fn run_folders(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    let mut folders = Vec::new();
    for dir in dirs {
        if RunDir::at(dir).record_path().is_file() {
            folders.push(dir.clone());
            continue;
        }
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))
            .map_err(|e| {
                Failure::Input(e.context("index takes run folders, or folders of them (reports/)"))
            })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| RunDir::at(p).record_path().is_file())
            .collect();
        found.sort();
        if found.is_empty() {
            note!("note: no run folder in {}", dir.display());
        }
        folders.extend(found);
    }
    Ok(folders)
}

/// Records each folder's run in `store`, each said; returns how many were recorded and
/// how many skipped (unreadable, or a copy of a run already recorded).
async fn index_all(store: &Store, folders: &[PathBuf]) -> (usize, usize) {
    let (mut recorded, mut skipped) = (0usize, 0usize);
    // A copied run folder holds the same run: the store keeps one, and so does the count.
    let mut seen: std::collections::HashMap<String, PathBuf> = std::collections::HashMap::new();
    for folder in folders {
        if let Ok(record) = RunDir::at(folder).read_record() {
            if let Some(first) = seen.get(&record.run_id) {
                skipped += 1;
                note!(
                    "note: skipping {}: it holds the same run ({}) as {} (a copy?); a run is recorded once",
                    folder.display(),
                    record.run_id,
                    first.display()
                );
                continue;
            }
            seen.insert(record.run_id.clone(), folder.clone());
        }
        match index_one(store, folder).await {
            Ok(jobs) => {
                recorded += 1;
                note!("indexed {} ({jobs} jobs)", folder.display());
            }
            Err(e) => {
                skipped += 1;
                note!("note: skipping {}: {e:#}", folder.display());
            }
        }
    }
    (recorded, skipped)
}

/// Replays one run folder's journal and records it: the same rows the run recorded.
async fn index_one(store: &Store, folder: &Path) -> anyhow::Result<usize> {
    let (dir, record, mut result) = super::load_with(folder, true)?;
    let jobs = result.jobs.take().unwrap_or_default();
    // The gates the run was checked against are in its summary, not its journal.
    if let Some(written) = promptgauge_base::files::read_regular(&dir.path().join("summary.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<promptgauge_report::Summary>(&t).ok())
    {
        result.summary.gates = written.gates;
    }
    store
        .record(&promptgauge_store::Recording {
            record: &record,
            summary: &result.summary,
            jobs: &jobs,
            folder: dir.path(),
        })
        .await?;
    Ok(jobs.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_dates_times_and_durations() {
        assert_eq!(since("1970-01-02").unwrap(), 86_400_000);
        assert_eq!(since("1970-01-01T00:00:10Z").unwrap(), 10_000);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let week = since("7d").unwrap();
        assert!((now - week - 7 * 86_400_000).abs() < 60_000);
        assert!(since("last tuesday").is_err());
    }

    #[test]
    fn links_are_relative_and_encoded() {
        let p = relative(
            Path::new("/a/b/pages"),
            Path::new("/a/b/reports/r 1#x/report.html"),
        );
        assert_eq!(p, Path::new("../reports/r 1#x/report.html"));
        assert_eq!(href(&p), "../reports/r%201%23x/report.html");
        assert_eq!(file_safe("my bench/1"), "my_bench_1");
    }
}
