//! A tool a program answers (`run:` on a tool, docs/guide/tools.md): one process a call,
//! started in the bench's folder with the same environment a command scorer gets (PATH,
//! HOME, LANG, TMPDIR and the tool's `env:`, nothing else — no API key) and the call's id,
//! under a watchdog (`promptgauge_base::process`): it ends, with all it started, when the call does —
//! answered, at its deadline, or with promptgauge. The call goes in as one JSON line; one
//! JSON object comes out: `{"result": …}` (given to the model) or `{"error": "…"}` (given
//! back as an error, as a scripted tool's unknown call is).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use promptgauge_suite::Case;
use promptgauge_suite::cases::Vars;
use promptgauge_suite::tools::{ToolReply, ToolSpec};

/// The most a program's reply may hold.
const MOST_REPLY_BYTES: u64 = 1024 * 1024;

/// How long a call may take unless the tool says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The variable that holds a call's id in the program's environment (it is in the call's
/// JSON line too, as `call_id`).
pub(super) const CALL_ID_ENV: &str = "PROMPTGAUGE_CALL_ID";

/// One call of a tool a program answers: what it is asked, and the call's id (the same
/// when a resumed run makes the call again).
pub(super) struct ProgramCall<'a> {
    pub tool: &'a ToolSpec,
    /// The bench's folder, where the program runs.
    pub dir: &'a Path,
    pub case: &'a Case,
    pub arguments: &'a str,
    pub call_id: &'a str,
}

/// What the tool's program replies to the call. A program that cannot start, takes too
/// long, or writes no JSON object fails the job: the cause is the harness's, never the
/// model's.
pub(super) async fn call(call: ProgramCall<'_>) -> ToolReply {
    match run(&call).await {
        Ok(reply) => reply,
        Err(cause) => ToolReply::Failed(format!(
            "the tool `{}` ({}) {cause}",
            call.tool.name,
            call.tool.run.join(" ")
        )),
    }
}

async fn run(call: &ProgramCall<'_>) -> Result<ToolReply, String> {
    let tool = call.tool;
    let program = tool.run.first().ok_or("names no program")?;
    let env = promptgauge_grade::command::program_environment(program, &tool.env, call.dir)
        .map_err(|e| e.to_string())?;
    let timeout = match &tool.timeout {
        Some(t) => promptgauge_suite::parse_duration(t).map_err(|e| e.to_string())?,
        None => DEFAULT_TIMEOUT,
    };
    let mut child = promptgauge_base::process::command(&tool.run, &env, call.dir)
        .env(CALL_ID_ENV, call.call_id)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    // Ended when the call ends, however it ends: answered, timed out, or dropped by the
    // loop's deadline or a stopped run; and what it left behind with it.
    let tree = promptgauge_base::process::Tree::of(&child);
    let line = call_line(call);
    let talk = async {
        let mut stdin = child.stdin.take().ok_or("has no stdin")?;
        let stdout = child.stdout.take().ok_or("has no stdout")?;
        // Written while its reply is read: a program may answer, or write anything, before
        // it reads the whole call, and neither pipe waits on the other.
        let write = async move {
            // A program that exits without reading its input is not an error of the write.
            let _ = stdin.write_all(&line).await;
            drop(stdin);
        };
        let read = async {
            let mut out = Vec::new();
            let read = stdout
                .take(MOST_REPLY_BYTES + 1)
                .read_to_end(&mut out)
                .await;
            if out.len() as u64 > MOST_REPLY_BYTES {
                tree.end();
            }
            read.map(|_| out)
        };
        // Once it exits, what it left behind is ended, and with it any copy of its stdout
        // held open (a background child's).
        let exit = async {
            let status = child.wait().await;
            tree.end();
            status
        };
        let ((), out, status) = tokio::join!(write, read, exit);
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
                "took longer than {timeout:?} (it was killed, with all it started)"
            ));
        }
    };
    reply_of(&out, status.success())
}

/// The call as the program reads it: one JSON line.
fn call_line(call: &ProgramCall<'_>) -> Vec<u8> {
    let parsed: Value =
        serde_json::from_str(call.arguments).unwrap_or(Value::String(call.arguments.into()));
    let mut line = serde_json::to_vec(&json!({
        "tool": call.tool.name,
        "arguments": parsed,
        "case": call.case.id,
        "vars": vars(&call.case.vars),
        "call_id": call.call_id,
    }))
    .unwrap_or_default();
    line.push(b'\n');
    line
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
