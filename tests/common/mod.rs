//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use assert_cmd::Command;
use promptgauge::mock::server::MockServer;
use promptgauge::mock::{MockConfig, Provider};
use serde_json::Value;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary with a clean environment: no URLs or keys leak in from the machine.
pub fn promptgauge(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("promptgauge").unwrap();
    cmd.current_dir(dir)
        .env_remove("PROMPTGAUGE_BASE_URL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("LLM_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("LLM_API_KEY")
        .env("CI", "true");
    // Each test's runs record into its own folder's store, filed by what the test says.
    for var in STORE_VARIABLES {
        cmd.env_remove(var);
    }
    cmd
}

/// Variables that choose the history store or what it files a run under.
pub const STORE_VARIABLES: [&str; 10] = [
    "PROMPTGAUGE_STORE",
    "GITHUB_SHA",
    "GITHUB_REF_NAME",
    "GITHUB_HEAD_REF",
    "GITHUB_RUN_ID",
    "CI_COMMIT_SHA",
    "CI_COMMIT_REF_NAME",
    "BUILDKITE_BRANCH",
    "CIRCLE_BRANCH",
    "CIRCLE_SHA1",
];

/// A small arithmetic bench in a temp folder: 12 cases, 2 variants.
pub fn bench_dir(bench_extra: &str) -> tempfile::TempDir {
    arithmetic_bench(12, 2, bench_extra)
}

/// An arithmetic bench with `cases` cases and 2 to 4 variants, in a temp folder.
pub fn arithmetic_bench(cases: usize, variants: usize, bench_extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lines: String = (1..=cases)
        .map(|i| format!("{{\"id\": \"add-{i:02}\", \"vars\": {{\"question\": \"What is {i} + {i}?\"}}, \"expected\": \"{}\", \"tags\": [\"add\"]}}\n", 2 * i))
        .collect();
    std::fs::write(d.join("cases.jsonl"), lines).unwrap();
    std::fs::write(d.join("plain.txt"), "{{ question }}").unwrap();
    std::fs::write(
        d.join("careful.yaml"),
        "name: careful\nmessages:\n  - { role: system, content: \"Think step by step.\" }\n  - { role: user, content: \"{{ question }}\" }\n",
    )
    .unwrap();
    std::fs::write(d.join("polite.txt"), "Please answer: {{ question }}").unwrap();
    std::fs::write(
        d.join("breath.yaml"),
        "name: breath\nmessages:\n  - { role: system, content: \"Take a deep breath.\" }\n  - { role: user, content: \"{{ question }}\" }\n",
    )
    .unwrap();
    let names = ["plain.txt", "careful.yaml", "polite.txt", "breath.yaml"];
    std::fs::write(
        d.join("bench.yaml"),
        format!(
            "name: arithmetic\ncases: cases.jsonl\nvariants: [{}]\ngrade: {{ kind: number }}\nparams: {{ temperature: 0, max_tokens: 100 }}\nprice: {{ input_per_mtok: 1.0, output_per_mtok: 2.0 }}\n{bench_extra}",
            names[..variants].join(", ")
        ),
    )
    .unwrap();
    dir
}

/// [`arithmetic_bench`] graded by two named parts: `number` (the right sum) and `has <1>`
/// (the answer holds a 1; the name is markup, as a bench may write it).
pub fn parts_bench(cases: usize, variants: usize) -> tempfile::TempDir {
    let bench = arithmetic_bench(cases, variants, "");
    let d = bench.path();
    let text = std::fs::read_to_string(d.join("bench.yaml")).unwrap().replace(
        "grade: { kind: number }",
        "grade: { kind: all, of: [ { name: number, kind: number }, { name: \"has <1>\", kind: regex, pattern: \"1\" } ] }",
    );
    std::fs::write(d.join("bench.yaml"), text).unwrap();
    bench
}

/// Each part's mean per arm over a run folder's graded jobs, from its journal:
/// `(part, arm) → mean`.
pub fn part_means(dir: &Path) -> std::collections::BTreeMap<(String, String), f64> {
    let mut sums: std::collections::BTreeMap<(String, String), (f64, f64)> = Default::default();
    for r in journal(dir) {
        if r["status"] != "graded" {
            continue;
        }
        for p in r["parts"].as_array().into_iter().flatten() {
            let key = (
                p["name"].as_str().unwrap().to_string(),
                r["variant"].as_str().unwrap().to_string(),
            );
            let e = sums.entry(key).or_default();
            e.0 += p["score"].as_f64().unwrap();
            e.1 += 1.0;
        }
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
}

/// Copies the folder `from`, all it holds, to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

pub fn run_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                // .cache/ holds the response cache, not a run; promptgauge.db is the
                // history store.
                .filter(|p| {
                    p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.')
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

pub fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("results.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Starts a simulator in this process; the binary talks to it over TCP.
pub fn start_mock(config: MockConfig) -> (tokio::runtime::Runtime, MockServer) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = rt
        .block_on(MockServer::start(
            Arc::new(Provider::new(config)),
            "127.0.0.1:0".parse().unwrap(),
        ))
        .unwrap();
    (rt, server)
}

/// What a spawned run writes to its standard error, line by line as it comes (read on a
/// thread of its own): a test waits for the line that says a moment has come instead of
/// sleeping until it probably has.
#[allow(dead_code)]
pub struct Heard {
    lines: std::sync::mpsc::Receiver<String>,
    seen: std::cell::RefCell<Vec<String>>,
}

#[allow(dead_code)]
impl Heard {
    /// Waits (at most a minute) for a line containing `text`; panics naming what was heard.
    pub fn wait_for(&self, text: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.borrow_mut().push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "no line with {text:?} on the run's standard error; it said: {:?}",
                    self.seen.borrow()
                ),
            }
        }
    }
}

/// [`spawned`], its standard error heard.
#[allow(dead_code)]
pub fn spawned_heard(dir: &Path, args: &[&str]) -> (std::process::Child, Heard) {
    use std::io::BufRead;
    let mut child = as_ci(dir, args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    (
        child,
        Heard {
            lines,
            seen: Default::default(),
        },
    )
}

/// Starts `promptgauge ARGS` in `dir` as CI would, its output dropped: a run to watch or
/// to kill.
#[allow(dead_code)]
pub fn spawned(dir: &Path, args: &[&str]) -> std::process::Child {
    as_ci(dir, args)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// `promptgauge ARGS` in `dir` as CI would start it, its standard output dropped.
#[allow(dead_code)]
fn as_ci(dir: &Path, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin("promptgauge"));
    command
        .current_dir(dir)
        .args(args)
        .env("CI", "true")
        .env_remove("OPENAI_API_KEY")
        .env_remove("PROMPTGAUGE_BASE_URL")
        .stdout(std::process::Stdio::null());
    command
}
