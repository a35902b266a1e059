//! The `command` scorer: a program of yours, in any language, scores each answer
//! (docs/guide/scorers.md). A small pool of long-lived processes, each reading one JSON request
//! per line on stdin and writing one JSON reply per line on stdout, one request at a time.
//! A process that crashes, does not reply in time, or replies with a line that is not
//! JSON fails that job with the cause (never a 0) and is replaced; what it wrote on stderr
//! while it scored is kept in the job's record.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::scorer::{Score, ScoreContext, ScoreError, ScoreFuture, ScoreInput, Scorer};
use promptgauge_client::Usage;

/// The longest reply line read: a longer one is not a reply.
const MAX_REPLY_BYTES: usize = 1 << 20;

/// What is kept of a process's stderr for one job: its last bytes.
const KEPT_STDERR_BYTES: usize = 8 * 1024;

/// How long one reply may take unless the spec says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) use promptgauge_suite::grading::PASSED_ENV;

/// How long one reply may take: the spec's `timeout` (`10s`, `2m`), else
/// [`DEFAULT_TIMEOUT`].
pub(super) fn timeout_of(timeout: Option<&str>) -> Result<Duration, CommandError> {
    match timeout {
        None => Ok(DEFAULT_TIMEOUT),
        Some(t) => {
            promptgauge_suite::parse_duration(t).map_err(|e| CommandError::Timeout(e.to_string()))
        }
    }
}

/// The command scorer.
pub struct CommandScorer {
    /// The program and its arguments, as written.
    argv: Vec<String>,
    /// The environment its processes get: [`PASSED_ENV`] and the bench's `env:`, as set now.
    env: Vec<(String, std::ffi::OsString)>,
    /// The bench's folder: the processes run there, so `score.py` names the bench's file.
    dir: PathBuf,
    timeout: Duration,
    /// Replies must be 0 or 1.
    binary: bool,
    /// Processes waiting for a request.
    idle: Mutex<Vec<Process>>,
    /// One request per process, `workers` processes at most.
    permits: tokio::sync::Semaphore,
    /// Processes started so far (a restart counts).
    started: AtomicU64,
    next_id: AtomicU64,
}

impl std::fmt::Debug for CommandScorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandScorer")
            .field("argv", &self.argv)
            .field("dir", &self.dir)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why a `command` spec cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("`run` names no program: write it as a list, e.g. run: [python3, score.py]")]
    Empty,
    #[error("`workers` must be between 1 and 256, found {0}")]
    Workers(u32),
    #[error("`timeout` {0}")]
    Timeout(String),
    #[error("cannot find the program `{program}`{where_}")]
    NotFound { program: String, where_: String },
    #[error(
        "`{0}` is not executable: make it so (chmod +x), or run it through its interpreter (run: [python3, {0}])"
    )]
    NotExecutable(String),
    #[error(
        "`env` names `{0}`, which is not a variable's name: list names only (env: [HF_HOME]), their values are read from promptgauge's environment"
    )]
    EnvName(String),
}

/// One running scorer process.
struct Process {
    child: Child,
    /// Its watchdog and everything beneath it, the scorer and what it started (a
    /// subprocess, a server, a process in a session of its own, a daemon whose parent
    /// exited): all ended with it.
    tree: promptgauge_base::process::Tree,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Its stderr, read without waiting: what it wrote before its reply is in the pipe
    /// when the reply is read, so it is kept with the job it was scoring.
    stderr: Stderr,
}

impl Process {
    /// Whether it wrote on stdout with no request outstanding.
    fn wrote_unasked(&mut self) -> bool {
        use futures_util::FutureExt;
        !self.stdout.buffer().is_empty()
            || matches!(self.stdout.fill_buf().now_or_never(), Some(Ok(b)) if !b.is_empty())
    }
}

impl Drop for Process {
    /// Kills the process and everything it started, before the child's handle goes.
    fn drop(&mut self) {
        self.tree.end();
    }
}

/// A process's stderr, non-blocking, and what was read of it for the current job (its
/// last bytes).
struct Stderr {
    /// Registered with the runtime: a request waits for its reply and reads stderr as it
    /// comes, never on a timer.
    pipe: tokio::io::unix::AsyncFd<std::fs::File>,
    kept: Vec<u8>,
    /// The process closed it (it exited): nothing more will come.
    closed: bool,
}

impl Stderr {
    /// Reads what the pipe holds now, keeping the last [`KEPT_STDERR_BYTES`].
    fn drain(&mut self) {
        use std::io::Read;
        let mut buf = [0u8; 64 * 1024];
        loop {
            match self.pipe.get_mut().read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => {
                    self.kept.extend_from_slice(&buf[..n]);
                    if self.kept.len() > KEPT_STDERR_BYTES {
                        let cut = self.kept.len() - KEPT_STDERR_BYTES;
                        self.kept.drain(..cut);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    }

    /// What was kept for this job, emptied for the next.
    fn take(&mut self) -> String {
        self.drain();
        let text = String::from_utf8_lossy(&self.kept).into_owned();
        self.kept.clear();
        text
    }
}

/// How one request went wrong.
enum Fault {
    /// The run abandoned its work in flight: the job did not finish.
    Stopped,
    /// The process is no use any more (crashed, hung, out of step): it is replaced.
    Broken(String),
    /// It replied, but not a score: the process is kept.
    Reply(String),
}

impl CommandScorer {
    /// A pool of at most `workers` processes of `argv`, run in `dir`. The program is looked
    /// for now (a path relative to `dir`, or on PATH): a scorer that cannot start would
    /// fail every job after its answer was paid for.
    pub fn new(
        argv: &[String],
        env: &[String],
        dir: &Path,
        workers: u32,
        timeout: Duration,
        binary: bool,
    ) -> Result<CommandScorer, CommandError> {
        let program = argv.first().ok_or(CommandError::Empty)?;
        if program.trim().is_empty() {
            return Err(CommandError::Empty);
        }
        if !(1..=256).contains(&workers) {
            return Err(CommandError::Workers(workers));
        }
        if timeout.is_zero() {
            return Err(CommandError::Timeout("must be longer than 0".into()));
        }
        // A bench named by a bare file name lies in the current folder.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let env = program_environment(program, env, dir)?;
        Ok(CommandScorer {
            argv: argv.to_vec(),
            env,
            dir: std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()),
            timeout,
            binary,
            idle: Mutex::new(Vec::new()),
            permits: tokio::sync::Semaphore::new(workers as usize),
            started: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
        })
    }

    /// Processes started so far, restarts included.
    pub fn started(&self) -> u64 {
        self.started.load(Ordering::SeqCst)
    }

    /// The command as the messages name it.
    fn shown(&self) -> String {
        self.argv.join(" ")
    }

    fn spawn(&self) -> Result<Process, String> {
        let mut child = promptgauge_base::process::command(&self.argv, &self.env, &self.dir)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("`{}` cannot start: {e}", self.shown()))?;
        // Declared after the child: dropped (and so ended) first, on every way out.
        let tree = promptgauge_base::process::Tree::of(&child);
        self.started.fetch_add(1, Ordering::SeqCst);
        let (Some(stdin), Some(stdout), Some(err)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(format!("cannot talk to `{}`: no pipes", self.shown()));
        };
        // Read as a plain file that never waits, told by the runtime when it can be.
        let pipe = err
            .into_owned_fd()
            .and_then(nonblocking)
            .map(std::fs::File::from)
            .and_then(|file| {
                // SAFETY: the File owns its descriptor, and the AsyncFd owns the File for
                // as long as it lives: the descriptor stays open and the same.
                unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        file,
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(std::io::Error::from)
            })
            .map_err(|e| format!("cannot read the stderr of `{}`: {e}", self.shown()))?;
        Ok(Process {
            tree,
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr: Stderr {
                pipe,
                kept: Vec::new(),
                closed: false,
            },
        })
    }

    /// The request line for one answer.
    fn request(&self, id: u64, input: &ScoreInput<'_>) -> Vec<u8> {
        let case = input.case;
        let a = input.answer;
        let mut line = serde_json::to_vec(&json!({
            "id": id,
            "case": {
                "id": case.id,
                "vars": case.vars,
                "expected": case.expected,
                "expected_json": case.expected_json,
                "history": case.messages,
                "tags": case.tags,
            },
            "messages": input.messages,
            "answer": a.text,
            "reasoning": a.reasoning,
            "finish_reason": a.finish_reason,
            "tool_calls": a.tool_calls.iter().map(|c| json!({
                "id": c.id,
                "name": c.name,
                "arguments": c.arguments,
            })).collect::<Vec<_>>(),
        }))
        .unwrap_or_default();
        line.push(b'\n');
        line
    }

    /// Sends one request and reads its reply line; a fault says whether the process is
    /// still of use.
    async fn exchange(&self, p: &mut Process, line: &[u8]) -> Result<Vec<u8>, Fault> {
        let talk = async {
            p.stdin.write_all(line).await?;
            p.stdin.flush().await?;
            let mut reply = Vec::new();
            let n = (&mut p.stdout)
                .take(MAX_REPLY_BYTES as u64 + 1)
                .read_until(b'\n', &mut reply)
                .await?;
            Ok::<_, std::io::Error>((n, reply))
        };
        // Its stderr is read as the request waits, so a chatty scorer never blocks on a
        // full pipe.
        let stderr = &mut p.stderr;
        let talk = async {
            tokio::pin!(talk);
            loop {
                tokio::select! {
                    done = &mut talk => break done,
                    ready = stderr.pipe.readable(), if !stderr.closed => match ready {
                        Ok(mut guard) => {
                            guard.clear_ready();
                            stderr.drain();
                        }
                        Err(_) => stderr.closed = true,
                    },
                }
            }
        };
        match tokio::time::timeout(self.timeout, talk).await {
            Err(_) => Err(Fault::Broken(match p.child.try_wait() {
                Ok(Some(status)) => format!(
                    "exited ({status}) without replying, and a process it started held its stdout open for {}; they were stopped",
                    humantime::format_duration(self.timeout)
                ),
                _ => format!(
                    "did not reply within {}; it was stopped",
                    humantime::format_duration(self.timeout)
                ),
            })),
            Ok(Ok((0, _))) | Ok(Err(_)) => Err(Fault::Broken(self.ended(p).await)),
            Ok(Ok((_, reply))) if reply.len() > MAX_REPLY_BYTES => Err(Fault::Broken(format!(
                "replied with a line longer than {} bytes",
                MAX_REPLY_BYTES
            ))),
            Ok(Ok((_, reply))) if !reply.ends_with(b"\n") => {
                Err(Fault::Broken(self.ended(p).await))
            }
            Ok(Ok((_, reply))) => Ok(reply),
        }
    }

    /// Why a process stopped replying: how it ended, once it has (a second at most).
    async fn ended(&self, p: &mut Process) -> String {
        match tokio::time::timeout(Duration::from_secs(1), p.child.wait()).await {
            Ok(Ok(status)) => {
                // It wrote all it will: the last of its stderr is in the pipe.
                p.stderr.drain();
                match status.code() {
                    Some(code) => format!("exited with status {code} before replying"),
                    None => format!("was killed ({status}) before replying"),
                }
            }
            _ => "closed its stdout before replying".to_string(),
        }
    }

    /// Reads a reply line into a score.
    fn read(&self, id: u64, line: &[u8]) -> Result<Score, Fault> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        let reply: Value = serde_json::from_str(text).map_err(|e| {
            Fault::Broken(format!(
                "replied with a line that is not JSON ({e}): {}",
                promptgauge_client::protocol::truncate(text, 200)
            ))
        })?;
        let Some(obj) = reply.as_object() else {
            return Err(Fault::Broken(format!(
                "replied with JSON that is not an object: {}",
                promptgauge_client::protocol::truncate(text, 200)
            )));
        };
        // The request's id, echoed: what keeps a reply with its answer (a reply without it,
        // or for another request, means the process is out of step).
        match obj.get("id") {
            Some(got) if got.as_u64() == Some(id) => {}
            None | Some(Value::Null) => {
                return Err(Fault::Broken(format!(
                    "replied without the request's `id` ({id}): a reply carries the id of the request it answers"
                )));
            }
            Some(got) => {
                return Err(Fault::Broken(format!(
                    "replied to request {got} while request {id} was asked: the process is out of step"
                )));
            }
        }
        if let Some(why) = obj.get("error").filter(|v| !v.is_null()) {
            let why = why.as_str().map_or_else(|| why.to_string(), String::from);
            return Err(Fault::Reply(format!(
                "said it cannot score this answer: {why}"
            )));
        }
        let score = match obj.get("score") {
            None => return Err(Fault::Reply("replied without a `score`".into())),
            Some(Value::Bool(b)) => f64::from(u8::from(*b)),
            Some(v) => v.as_f64().ok_or_else(|| {
                Fault::Reply(format!("replied with a `score` that is not a number: {v}"))
            })?,
        };
        if !(0.0..=1.0).contains(&score) {
            return Err(Fault::Reply(format!(
                "replied with score {score}, outside [0, 1]"
            )));
        }
        if self.binary && !super::scorer::is_binary(score) {
            return Err(Fault::Reply(format!(
                "replied with score {score}, and the scorer is `binary: true` (0 or 1)"
            )));
        }
        let usage = match obj.get("usage").filter(|v| !v.is_null()) {
            None => None,
            Some(u) => Some(read_usage(u).map_err(Fault::Reply)?),
        };
        let extracted = obj.get("extracted").and_then(|v| match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        });
        Ok(Score {
            value: score,
            extracted,
            usage,
            detail: obj.get("detail").filter(|v| !v.is_null()).cloned(),
            judge: Vec::new(),
            parts: Vec::new(),
        })
    }
}

/// The pipe made non-blocking: a read of an empty pipe returns at once.
fn nonblocking(fd: std::os::fd::OwnedFd) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    // SAFETY: `raw` is an open descriptor owned by `fd` for the length of both calls.
    let flags = unsafe { libc::fcntl(raw, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above; F_SETFL only changes the descriptor's status flags.
    if unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// A reply's `usage`: `prompt_tokens` and `completion_tokens` (or `input_tokens` and
/// `output_tokens`), whole numbers.
fn read_usage(u: &Value) -> Result<Usage, String> {
    let field = |names: [&str; 2]| -> Result<u64, String> {
        match names.iter().find_map(|n| u.get(*n)) {
            None => Ok(0),
            Some(v) => v.as_u64().ok_or_else(|| {
                format!(
                    "replied with a `usage.{}` that is not a whole number: {v}",
                    names[0]
                )
            }),
        }
    };
    if !u.is_object() {
        return Err(format!("replied with a `usage` that is not an object: {u}"));
    }
    Ok(Usage {
        prompt_tokens: field(["prompt_tokens", "input_tokens"])?,
        completion_tokens: field(["completion_tokens", "output_tokens"])?,
        ..Usage::default()
    })
}

/// A program's environment, once it is known to start: [`PASSED_ENV`] and the names of
/// `env`, as set now — nothing else of promptgauge's (an API key) reaches it. The same for
/// a command scorer and a program-backed tool.
pub fn program_environment(
    program: &str,
    env: &[String],
    dir: &Path,
) -> Result<Vec<(String, std::ffi::OsString)>, CommandError> {
    find_program(program, dir)?;
    if let Some(bad) = env
        .iter()
        .find(|n| n.is_empty() || n.contains(['=', '\0']) || n.chars().any(char::is_whitespace))
    {
        return Err(CommandError::EnvName(bad.clone()));
    }
    Ok(PASSED_ENV
        .iter()
        .map(|n| n.to_string())
        .chain(env.iter().cloned())
        .filter_map(|n| std::env::var_os(&n).map(|v| (n, v)))
        .collect())
}

/// Finds `program` as a process would be started with it: a path (relative to `dir`), or
/// a name on PATH.
fn find_program(program: &str, dir: &Path) -> Result<(), CommandError> {
    let not_found = |where_: String| CommandError::NotFound {
        program: program.to_string(),
        where_,
    };
    if program.contains('/') {
        let path = dir.join(program);
        if !path.is_file() {
            return Err(not_found(
                " (no such file; a path is taken from the bench's folder)".to_string(),
            ));
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).map_or(0, |m| m.permissions().mode());
        if mode & 0o111 == 0 {
            return Err(CommandError::NotExecutable(program.to_string()));
        }
        return Ok(());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| d.join(program).is_file()) {
        Ok(())
    } else {
        Err(not_found(" on PATH".to_string()))
    }
}

impl Scorer for CommandScorer {
    fn score<'a>(&'a self, input: ScoreInput<'a>, context: &'a ScoreContext) -> ScoreFuture<'a> {
        Box::pin(async move {
            let stop = context.stop.clone().unwrap_or_default();
            let stopped = || ScoreError {
                stopped: true,
                ..ScoreError::new("the run stopped")
            };
            let _permit = tokio::select! {
                p = self.permits.acquire() => p.map_err(|_| ScoreError::new("the scorer's pool was closed"))?,
                _ = stop.cancelled() => return Err(stopped()),
            };
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop()
                // A process that wrote more than its reply (a second line for the last
                // request) is out of step: what it writes next would answer the wrong
                // job. It is replaced.
                .and_then(|mut p| (!p.wrote_unasked()).then_some(p));
            let mut p = match idle {
                Some(p) => p,
                None => self
                    .spawn()
                    .map_err(|e| ScoreError::new(format!("the scorer {e}")))?,
            };
            // What it wrote between jobs belongs to none.
            p.stderr.take();
            let id = self.next_id.fetch_add(1, Ordering::SeqCst);
            let line = self.request(id, &input);
            let outcome = tokio::select! {
                exchanged = self.exchange(&mut p, &line) => match exchanged {
                    Ok(reply) => self.read(id, &reply),
                    Err(f) => Err(f),
                },
                _ = stop.cancelled() => Err(Fault::Stopped),
            };
            let stderr = p.stderr.take();
            let keep = !matches!(outcome, Err(Fault::Broken(_) | Fault::Stopped));
            if keep {
                self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(p);
            }
            // A broken process is dropped: killed, and the next request starts another.
            match outcome {
                Ok(mut score) => {
                    if !stderr.is_empty() {
                        let mut detail = serde_json::Map::new();
                        if let Some(d) = score.detail.take() {
                            detail.insert("detail".into(), d);
                        }
                        detail.insert("stderr".into(), Value::String(stderr));
                        score.detail = Some(Value::Object(detail));
                    } else if let Some(d) = score.detail.take() {
                        score.detail = Some(json!({ "detail": d }));
                    }
                    Ok(score)
                }
                Err(Fault::Stopped) => Err(stopped()),
                Err(Fault::Broken(why) | Fault::Reply(why)) => {
                    let said = if stderr.trim().is_empty() {
                        String::new()
                    } else {
                        format!("\nits stderr:\n{}", stderr.trim_end())
                    };
                    Err(ScoreError::new(format!(
                        "the scorer `{}` {why}{said}",
                        self.shown()
                    )))
                }
            }
        })
    }
}
