//! A tool a program answers (`run:` on a tool, docs/guide/tools.md): one process a call,
//! started in the bench's folder with the same environment a command scorer gets (PATH,
//! HOME, LANG, TMPDIR and the tool's `env:`, nothing else — no API key), in a process
//! group of its own that is killed, whole, at the call's deadline. The call goes in as one
//! JSON line; one JSON object comes out: `{"result": …}` (given to the model) or
//! `{"error": "…"}` (given back as an error, as a scripted tool's unknown call is).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::suite::Case;
use crate::suite::cases::Vars;
use crate::suite::tools::{ToolReply, ToolSpec};

/// The most a program's reply may hold.
const MOST_REPLY_BYTES: u64 = 1024 * 1024;

/// How long a call may take unless the tool says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What `tool`'s program replies to the call `arguments` of `case`. A program that cannot
/// start, takes too long, or writes no JSON object fails the job: the cause is the
/// harness's, never the model's.
pub(super) async fn call(tool: &ToolSpec, dir: &Path, case: &Case, arguments: &str) -> ToolReply {
    match run(tool, dir, case, arguments).await {
        Ok(reply) => reply,
        Err(cause) => ToolReply::Failed(format!(
            "the tool `{}` ({}) {cause}",
            tool.name,
            tool.run.join(" ")
        )),
    }
}

async fn run(
    tool: &ToolSpec,
    dir: &Path,
    case: &Case,
    arguments: &str,
) -> Result<ToolReply, String> {
    let program = tool.run.first().ok_or("names no program")?;
    let env = crate::grade::command::program_environment(program, &tool.env, dir)
        .map_err(|e| e.to_string())?;
    let timeout = match &tool.timeout {
        Some(t) => crate::suite::parse_duration(t).map_err(|e| e.to_string())?,
        None => DEFAULT_TIMEOUT,
    };
    let mut child = crate::grade::command::program_command(&tool.run, &env, dir)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    // Killed when the call ends, however it ends: answered, timed out, or dropped by the
    // loop's deadline or a stopped run.
    let group = Group(child.id().and_then(|p| i32::try_from(p).ok()));
    let parsed: Value = serde_json::from_str(arguments).unwrap_or(Value::String(arguments.into()));
    let mut line = serde_json::to_vec(&json!({
        "tool": tool.name, "arguments": parsed, "case": case.id, "vars": vars(&case.vars),
    }))
    .unwrap_or_default();
    line.push(b'\n');
    let talk = async {
        let mut stdin = child.stdin.take().ok_or("has no stdin")?;
        // A program that exits without reading its input is not an error of the write.
        let _ = stdin.write_all(&line).await;
        drop(stdin);
        let stdout = child.stdout.take().ok_or("has no stdout")?;
        // Read while it runs; once it exits, what it left behind is killed, and with it
        // any copy of its stdout held open (a background child's).
        let read = async {
            let mut out = Vec::new();
            let read = stdout
                .take(MOST_REPLY_BYTES + 1)
                .read_to_end(&mut out)
                .await;
            if out.len() as u64 > MOST_REPLY_BYTES {
                group.kill();
            }
            read.map(|_| out)
        };
        let exit = async {
            let status = child.wait().await;
            group.kill();
            status
        };
        let (out, status) = tokio::join!(read, exit);
        let out = out.map_err(|e| e.to_string())?;
        if out.len() as u64 > MOST_REPLY_BYTES {
            return Err(format!("wrote more than {MOST_REPLY_BYTES} bytes"));
        }
        Ok::<_, String>((out, status.map_err(|e| e.to_string())?))
    };
    let (out, status) = match tokio::time::timeout(timeout, talk).await {
        Ok(done) => done?,
        Err(_) => {
            return Err(format!(
                "took longer than {timeout:?} (its process group was killed)"
            ));
        }
    };
    reply_of(&out, status.success())
}

/// A program's process group, killed when this is dropped.
struct Group(Option<i32>);

impl Group {
    fn kill(&self) {
        crate::grade::command::kill_group(self.0);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The call's reply from what the program wrote.
fn reply_of(out: &[u8], exited_well: bool) -> Result<ToolReply, String> {
    let text = String::from_utf8_lossy(out);
    let reply: Value = serde_json::from_str(text.trim()).map_err(|_| {
        format!(
            "wrote no JSON object{} (it must write {{\"result\": …}} or {{\"error\": \"…\"}})",
            if exited_well {
                ""
            } else {
                " and exited with a failure"
            }
        )
    })?;
    match (reply.get("result"), reply.get("error")) {
        (Some(Value::String(s)), None) => Ok(ToolReply::Result(s.clone())),
        (Some(other), None) => Ok(ToolReply::Result(other.to_string())),
        (None, Some(e)) => Ok(ToolReply::Error(match e {
            Value::String(s) => format!("error: {s}"),
            other => format!("error: {other}"),
        })),
        _ => Err("wrote JSON with neither `result` nor `error` (or both)".into()),
    }
}

/// A case's variables as JSON.
fn vars(vars: &Vars) -> Value {
    serde_json::to_value(vars).unwrap_or(Value::Null)
}
