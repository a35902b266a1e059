//! Tools an MCP server answers (`mcp:` in a bench, docs/guide/tools.md). Each server is a
//! program speaking the Model Context Protocol over its stdin and stdout (the `rmcp`
//! SDK's client): started once a run, in the bench's folder, with the environment a
//! command scorer gets (PATH, HOME, LANG, TMPDIR and its `env:`, nothing else — no API
//! key), under a watchdog (`promptgauge_base::process`): it ends, with all it started, when the run
//! ends, however the run ends. Its tool listing is read within bounds (pages and bytes);
//! the tools it lists are offered to the model beside the bench's own; each call is
//! forwarded to it with the server's deadline and the call's id (`_meta`), and what it
//! sends back is read as text, at most 1 MiB (rmcp itself reads no message over 16 MiB).

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, PaginatedRequestParams, RequestMetaObject,
};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;

use promptgauge_suite::tools::{McpServerSpec, ServedTools, ToolReply, ToolSpec};

/// How long starting a server, or a call, may take unless the server says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of a call's result given to the model.
const MOST_RESULT_BYTES: usize = 1024 * 1024;

/// The most of a server's stderr kept (its end), to say why it would not start or stopped.
const MOST_STDERR_BYTES: usize = 16 * 1024;

/// The most pages of a server's tool listing read, and the most JSON they may hold
/// together: a listing that goes on past either is the server's fault, said as such.
const MOST_LIST_PAGES: usize = 100;
const MOST_LIST_BYTES: usize = 16 * 1024 * 1024;

/// The key of a call's `_meta` that holds its id (the same when a resumed run makes the
/// call again; docs/guide/tools.md, "Tools with side effects").
pub(super) const CALL_ID_META: &str = "promptgauge/call_id";

/// Why a server could not be started, or offered, and what to do.
#[derive(Debug)]
pub struct StartError {
    pub message: String,
    pub fix: String,
}

impl From<String> for StartError {
    fn from(message: String) -> StartError {
        StartError {
            message,
            fix: "run the server's command by hand in the bench's folder: it must speak MCP on its stdin and stdout (docs/guide/tools.md, \"Tools an MCP server answers\")".into(),
        }
    }
}

/// A run's MCP servers, started; each killed with its process group when this is dropped.
pub struct McpServers {
    servers: Vec<Server>,
}

struct Server {
    label: String,
    service: RunningService<RoleClient, ()>,
    timeout: Duration,
    /// Its watchdog and everything beneath it, ended when the run ends.
    tree: promptgauge_base::process::Tree,
    child: Mutex<tokio::process::Child>,
    /// The end of what it wrote to its stderr: why it stopped, when it does.
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    /// Why it could not answer: `e`, and when it has exited, its status and the end of its
    /// stderr.
    fn failed(&self, name: &str, e: impl std::fmt::Display) -> ToolReply {
        let exited = self
            .child
            .lock()
            .ok()
            .and_then(|mut c| c.try_wait().ok().flatten())
            .map(|status| format!(" (it exited: {status})"))
            .unwrap_or_default();
        ToolReply::Failed(with_stderr(
            format!(
                "the MCP server `{}` could not answer `{name}`: {e}{exited}",
                self.label
            ),
            &self.stderr,
        ))
    }
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self.servers.iter().map(|s| s.label.as_str()).collect();
        f.debug_struct("McpServers")
            .field("servers", &labels)
            .finish()
    }
}

impl McpServers {
    /// Starts `specs`' servers (in `dir`, the bench's folder) and lists their tools: each
    /// one marked with the server that answers it, only those a server's `tools:` names,
    /// its schema compiled. Why a server could not start, or list what it was asked to
    /// offer.
    pub async fn start(
        specs: &[McpServerSpec],
        dir: &Path,
    ) -> Result<(McpServers, ServedTools), StartError> {
        let mut servers = McpServers {
            servers: Vec::new(),
        };
        let mut served = ServedTools::default();
        for (i, spec) in specs.iter().enumerate() {
            let named = |e: String| {
                format!(
                    "the MCP server `{}` ({}) {e}",
                    spec.label(),
                    spec.run.join(" ")
                )
            };
            let (server, listed) = start_one(spec, dir).await.map_err(|e| StartError {
                message: named(e.message),
                fix: e.fix,
            })?;
            servers.servers.push(server);
            let offered = offered(spec, i, listed)?;
            // What it lists must be what every provider takes, and what a call can be
            // checked against: said naming the server.
            let others = |tool: &str| {
                let others: Vec<&str> = offered
                    .iter()
                    .map(|t| t.name.as_str())
                    .filter(|n| *n != tool)
                    .collect();
                format!(
                    "offer only the others with the server's `tools: [{}]`",
                    others.join(", ")
                )
            };
            promptgauge_suite::tools::check(&offered).map_err(|e| StartError {
                message: named(format!("lists a tool no provider takes: {e}")),
                fix: others(""),
            })?;
            let checks = promptgauge_suite::tools::ArgumentChecks::of(&offered).map_err(|(tool, e)| {
                StartError {
                    message: named(format!(
                        "lists a tool whose arguments cannot be checked: the parameters of `{tool}` {}",
                        e.message
                    )),
                    fix: others(&tool),
                }
            })?;
            served.checks.extend(checks);
            served.tools.extend(offered);
        }
        Ok((servers, served))
    }

    /// What the tool `name` of server `server` returns for `arguments` (already checked
    /// against its schema), the call's id in its `_meta`: its text, or its error given
    /// back to the model. A server that stopped, or did not answer in time, fails the job
    /// with that cause.
    pub async fn call(
        &self,
        server: usize,
        name: &str,
        arguments: Value,
        call_id: &str,
    ) -> ToolReply {
        let Some(s) = self.servers.get(server) else {
            return ToolReply::Failed(format!("no MCP server answers `{name}`"));
        };
        let mut params = CallToolRequestParams::new(name.to_string());
        params.arguments = match arguments {
            Value::Object(map) => Some(map),
            _ => None,
        };
        let mut meta = serde_json::Map::new();
        meta.insert(CALL_ID_META.into(), Value::String(call_id.to_string()));
        params.meta = Some(RequestMetaObject::from(meta));
        match tokio::time::timeout(s.timeout, s.service.peer().call_tool(params)).await {
            Err(_) => ToolReply::Failed(format!(
                "the MCP server `{}` did not answer `{name}` within {:?}",
                s.label, s.timeout
            )),
            Ok(Ok(result)) => match reply_of(&result) {
                ToolReply::Failed(e) => {
                    ToolReply::Failed(format!("`{name}` of the MCP server `{}`: {e}", s.label))
                }
                reply => reply,
            },
            // The server refused the request (a JSON-RPC error): the model is told, as for
            // any tool's error.
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                ToolReply::Error(format!("error: {}", e.message))
            }
            Ok(Err(e)) => s.failed(name, e),
        }
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        for s in &self.servers {
            s.tree.end();
        }
    }
}

/// Starts one server and lists its tools, within its deadline.
async fn start_one(
    spec: &McpServerSpec,
    dir: &Path,
) -> Result<(Server, Vec<rmcp::model::Tool>), StartError> {
    let timeout = match &spec.timeout {
        Some(t) => promptgauge_suite::parse_duration(t).map_err(|e| e.to_string())?,
        None => DEFAULT_TIMEOUT,
    };
    let mut child = spawn(spec, dir).map_err(|message| StartError {
        message,
        fix: "run: [program, args…] names a program the bench's folder or PATH has; env: lists variable names (env: [API_TOKEN])".into(),
    })?;
    let tree = promptgauge_base::process::Tree::of(&child);
    let (stderr, reading) = keep_stderr(child.stderr.take());
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(String::from("has no stdin or stdout").into());
    };
    let started = async {
        let service = ()
            .serve((stdout, stdin))
            .await
            .map_err(|e| StartError::from(format!("did not start as an MCP server: {e}")))?;
        let tools = list_tools(service.peer()).await?;
        Ok::<_, StartError>((service, tools))
    };
    let (service, tools) = match tokio::time::timeout(timeout, started).await {
        Ok(Ok(done)) => done,
        failed => {
            let e = match failed {
                Ok(Err(e)) => e,
                _ => StartError::from(format!("did not start within {timeout:?}")),
            };
            // Killed, its stderr ends: what it wrote is read to the end.
            tree.end();
            let _ = tokio::time::timeout(Duration::from_secs(2), reading).await;
            return Err(StartError {
                message: with_stderr(e.message, &stderr),
                fix: e.fix,
            });
        }
    };
    let server = Server {
        label: spec.label(),
        service,
        timeout,
        tree,
        child: Mutex::new(child),
        stderr,
    };
    Ok((server, tools))
}

/// The server's process, started in `dir` with the allow-listed environment, under a
/// watchdog.
fn spawn(spec: &McpServerSpec, dir: &Path) -> Result<tokio::process::Child, String> {
    let program = spec.run.first().ok_or("names no program")?;
    let env = promptgauge_grade::command::program_environment(program, &spec.env, dir)
        .map_err(|e| e.to_string())?;
    promptgauge_base::process::command(&spec.run, &env, dir)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))
}

/// Every tool the server lists, page after page, within [`MOST_LIST_PAGES`] and
/// [`MOST_LIST_BYTES`]; why not, as what the server did.
async fn list_tools(
    peer: &rmcp::service::Peer<RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, StartError> {
    let endless = |message: String| {
        StartError {
        message,
        fix: "a server names a next page (`nextCursor`) only while it has more tools to list, each page once: fix its `tools/list`, or offer fewer tools".into(),
    }
    };
    let mut tools = Vec::new();
    let mut bytes = 0;
    let mut cursor: Option<String> = None;
    let mut cursors = std::collections::HashSet::new();
    for page in 1..=MOST_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let listed = peer
            .list_tools(Some(params))
            .await
            .map_err(|e| StartError::from(format!("listed no tools: {e}")))?;
        bytes += serde_json::to_vec(&listed.tools).map_or(0, |t| t.len());
        tools.extend(listed.tools);
        if bytes > MOST_LIST_BYTES {
            return Err(endless(format!(
                "listed more than {MOST_LIST_BYTES} bytes of tools in {page} pages ({} tools): promptgauge reads at most that much",
                tools.len()
            )));
        }
        let Some(next) = listed.next_cursor else {
            return Ok(tools);
        };
        if !cursors.insert(next.clone()) {
            return Err(endless(format!(
                "listed its tools in a circle: page {page} named as next a page it had named before (cursor `{}`)",
                promptgauge_client::protocol::truncate(&next, 80)
            )));
        }
        cursor = Some(next);
    }
    Err(endless(format!(
        "listed tools without end: every page named a next one, {MOST_LIST_PAGES} pages and {} tools so far; promptgauge reads at most {MOST_LIST_PAGES} pages",
        tools.len()
    )))
}

/// `e`, with the last lines the server wrote to its stderr (why a program would not start
/// is usually there).
fn with_stderr(e: String, stderr: &Mutex<Vec<u8>>) -> String {
    let err = stderr.lock().map(|b| b.clone()).unwrap_or_default();
    let err = String::from_utf8_lossy(&err);
    let mut last: Vec<&str> = err.lines().rev().take(5).collect();
    if last.is_empty() {
        return e;
    }
    last.reverse();
    // What a program writes is data: no terminal control reaches the user.
    let shown: String = last
        .join(" | ")
        .chars()
        .filter(|c| !c.is_control())
        .take(600)
        .collect();
    format!("{e}; its stderr ends: {shown}")
}

/// Reads a server's stderr as it comes, keeping the last [`MOST_STDERR_BYTES`]; the task
/// ends with the stream.
fn keep_stderr(
    stderr: Option<tokio::process::ChildStderr>,
) -> (Arc<Mutex<Vec<u8>>>, tokio::task::JoinHandle<()>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let into = kept.clone();
    let reading = tokio::spawn(async move {
        let Some(mut stderr) = stderr else { return };
        let mut buf = [0u8; 4096];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            // The last bytes: why a server stopped is at the end.
            if let Ok(mut k) = into.lock() {
                k.extend_from_slice(&buf[..n]);
                if k.len() > MOST_STDERR_BYTES {
                    let cut = k.len() - MOST_STDERR_BYTES;
                    k.drain(..cut);
                }
            }
        }
    });
    (kept, reading)
}

/// The tools of server `index` a bench offers: those its `tools:` names (each must be
/// listed), or all it lists.
fn offered(
    spec: &McpServerSpec,
    index: usize,
    listed: Vec<rmcp::model::Tool>,
) -> Result<Vec<ToolSpec>, StartError> {
    if let Some(wanted) = &spec.tools {
        let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
        if let Some(missing) = wanted.iter().find(|w| !names.contains(&w.as_str())) {
            return Err(StartError {
                message: format!(
                    "the MCP server `{}` lists no tool `{missing}` (it lists: {})",
                    spec.label(),
                    names.join(", ")
                ),
                fix: format!("take `{missing}` out of the server's `tools:`, or name one it lists"),
            });
        }
    }
    Ok(listed
        .into_iter()
        .filter(|t| {
            spec.tools
                .as_ref()
                .is_none_or(|w| w.iter().any(|n| n == t.name.as_ref()))
        })
        .map(|t| ToolSpec {
            name: t.name.to_string(),
            description: t.description.map(|d| d.to_string()).unwrap_or_default(),
            parameters: Value::Object((*t.input_schema).clone()),
            default: None,
            run: Vec::new(),
            env: Vec::new(),
            timeout: None,
            served_by: Some(index),
        })
        .collect())
}

/// What a call's result gives the model: its text parts (other parts named), or its
/// structured content when it has no parts; an error when the server marks it one.
fn reply_of(result: &CallToolResult) -> ToolReply {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image, {}]", i.mime_type),
            ContentBlock::Audio(a) => format!("[audio, {}]", a.mime_type),
            other => serde_json::to_string(other).unwrap_or_default(),
        })
        .collect();
    if parts.is_empty()
        && let Some(structured) = &result.structured_content
    {
        parts.push(structured.to_string());
    }
    let text = parts.join("\n");
    if text.len() > MOST_RESULT_BYTES {
        return ToolReply::Failed(format!(
            "an MCP tool's result held more than {MOST_RESULT_BYTES} bytes"
        ));
    }
    if result.is_error == Some(true) {
        ToolReply::Error(format!("error: {text}"))
    } else {
        ToolReply::Result(text)
    }
}
