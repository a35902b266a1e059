//! Nothing leaves the machine but the requests a bench names (docs/guide/privacy.md): every
//! command a first hour uses — `init`, `check`, `run` on the built-in simulator and on a
//! local endpoint (`promptgauge mock`, a server of its own on a port), `report`, `compare`,
//! `view` and `import` — runs under `strace`, which logs every `connect`, `sendto`,
//! `sendmsg` and `sendmmsg` of the process and its threads. Every address it connects or
//! sends to must be loopback, none on port 53 (DNS), and no name is looked up through nscd
//! or systemd-resolved: so no update check, no telemetry, no font or script fetched. The
//! pages `view` serves and every report.html are read for any URL a browser would load from
//! elsewhere (a CDN's script, style or font), and view's main pages are loaded in headless
//! Chromium, whose network log must show no request of theirs but to view. The trace sees
//! the run's own requests to the local endpoint, so a trace that saw nothing cannot pass.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{STORE_VARIABLES, run_dirs};

/// strace, when this machine has it; in CI (.ci/run installs it) its absence is a failure.
fn strace() -> bool {
    if Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no strace: .ci/run installs it (apt-get install strace)"
    );
    println!("skipped: no strace on this machine (apt-get install strace)");
    false
}

/// `promptgauge ARGS` under strace in `dir`, its trace written to `log`, with no URL, key
/// or store of this machine's.
fn traced(dir: &Path, log: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("strace");
    cmd.current_dir(dir)
        .args(["-f", "--seccomp-bpf", "-qq", "-e", "signal=none", "-e"])
        .arg("trace=connect,sendto,sendmsg,sendmmsg")
        .arg("-o")
        .arg(log)
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin("promptgauge"))
        .args(args);
    for var in [
        "PROMPTGAUGE_BASE_URL",
        "OPENAI_BASE_URL",
        "LLM_BASE_URL",
        "OPENAI_API_KEY",
        "LLM_API_KEY",
    ]
    .into_iter()
    .chain(STORE_VARIABLES)
    {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `promptgauge ARGS` traced to its end: its stdout, and the trace's lines.
fn run_traced(dir: &Path, log: &Path, args: &[&str]) -> (String, String) {
    let out = traced(dir, log, args).output().unwrap();
    assert!(
        out.status.success(),
        "promptgauge {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let trace = std::fs::read_to_string(log).unwrap();
    (String::from_utf8_lossy(&out.stdout).into_owned(), trace)
}

/// A server started traced (`mock`, `view`): strace, the server (strace's child) and the
/// first line it printed.
struct Server {
    strace: Child,
    pid: i32,
    first_line: String,
}

impl Server {
    fn start(dir: &Path, log: &Path, args: &[&str]) -> Server {
        let mut strace = traced(dir, log, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(strace.stdout.take().unwrap());
        let mut first_line = String::new();
        reader.read_line(&mut first_line).unwrap();
        // The rest is drained, so the server never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let id = strace.id();
        let pid = std::fs::read_to_string(format!("/proc/{id}/task/{id}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("strace ran no {args:?}: {first_line:?}"));
        Server {
            strace,
            pid,
            first_line,
        }
    }

    /// Interrupts the server as Ctrl-C would, and waits for it and strace to end.
    fn stop(mut self) {
        // SAFETY: the server's pid, still strace's child: strace has not been waited for.
        unsafe {
            libc::kill(self.pid, libc::SIGINT);
        }
        let _ = self.strace.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.strace.try_wait(), Ok(None)) {
            // SAFETY: as in `stop`: a failed test leaves neither the server nor strace.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
            }
            let _ = self.strace.kill();
            let _ = self.strace.wait();
        }
    }
}

/// Where one traced call connected or sent to.
#[derive(Debug, PartialEq)]
enum Peer {
    Inet { address: String, port: u16 },
    Unix(String),
}

/// Every peer named in a trace: the address of each `connect`, and of each `sendto`,
/// `sendmsg` or `sendmmsg` that names one (netlink, the kernel's own, is not a peer).
fn peers(trace: &str) -> Vec<Peer> {
    let inet = regex::Regex::new(
        r#"sa_family=AF_INET6?, sin6?_port=htons\((\d+)\), (?:sin6_flowinfo=[^,]+, )?(?:sin_addr=inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)")"#,
    )
    .unwrap();
    let unix = regex::Regex::new(r#"sa_family=AF_UNIX, sun_path=@?"([^"]*)""#).unwrap();
    let mut found = Vec::new();
    for line in trace.lines() {
        for c in inet.captures_iter(line) {
            found.push(Peer::Inet {
                address: c.get(2).or(c.get(3)).unwrap().as_str().to_string(),
                port: c[1].parse().unwrap(),
            });
        }
        for c in unix.captures_iter(line) {
            found.push(Peer::Unix(c[1].to_string()));
        }
    }
    found
}

/// Every peer of `trace` is on this machine: loopback, never port 53, and no name service
/// socket (nscd, systemd-resolved) that would mean a name was looked up.
fn assert_local(command: &str, trace: &str) {
    for peer in peers(trace) {
        match &peer {
            Peer::Inet { address, port } => {
                let loopback = address.starts_with("127.")
                    || address == "::1"
                    || address.starts_with("::ffff:127.");
                assert!(
                    loopback && *port != 53,
                    "`{command}` reached {address} port {port}: only loopback is allowed"
                );
            }
            Peer::Unix(path) => assert!(
                !path.contains("nscd") && !path.contains("resolve"),
                "`{command}` looked a name up through {path}"
            ),
        }
    }
}

/// The port of a `http://HOST:PORT/…` URL.
fn port_of(url: &str) -> u16 {
    url.trim_start_matches("http://")
        .split(['/', '?'])
        .next()
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"))
}

/// `GET path` on view's loopback server, with its access token: the body, chunks joined.
fn get(address: &str, token: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nx-promptgauge-token: {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let response = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return (status, body.to_string());
    }
    let (mut rest, mut joined) = (body, String::new());
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        joined.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    (status, joined)
}

/// Every URL a browser loads by itself when it shows `page` (a script, a style sheet, an
/// image, a font, a frame, a request from the page's script) that is on another machine.
/// A link's `href` is followed only when clicked, and URLs shown as text (a bench's
/// comments in a `<pre>`) are never loaded: neither counts.
fn foreign_urls(page: &str) -> Vec<String> {
    let loaded = [
        // An element that loads what its attribute names.
        r#"(?i)<(?:script|link|img|iframe|frame|source|video|audio|embed|object|track|image|use|input)\b[^<>]*?\s(?:src|href|srcset|poster|data|xlink:href)\s*=\s*["']?([^"'\s>]+)"#,
        // A style's url() and @import.
        r#"(?i)url\(\s*["']?([^"')\s]+)"#,
        r#"(?i)@import\s+["']([^"']+)"#,
        // A script's requests.
        r#"(?:fetch|import|EventSource|WebSocket|sendBeacon|\.open)\(\s*(?:["'`][A-Z]+["'`]\s*,\s*)?["'`]([^"'`]+)"#,
        r#"\.(?:src|href)\s*=\s*["'`]([^"'`]+)"#,
        r#"(?i)http-equiv=["']?refresh["']?[^>]*url=([^"'>\s]+)"#,
    ]
    .map(|r| regex::Regex::new(r).unwrap());
    let mut foreign = Vec::new();
    for re in &loaded {
        for c in re.captures_iter(page) {
            let url = c[1].to_string();
            let Some(rest) = url
                .strip_prefix("//")
                .or_else(|| url.split_once("://").map(|(_, rest)| rest))
            else {
                continue; // relative: the page's own server
            };
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            let local = host.starts_with("127.")
                || host.starts_with("localhost")
                || host.starts_with("[::1]");
            if !local {
                foreign.push(url);
            }
        }
    }
    foreign
}

/// Every page, script and style `view` serves from `start`, followed link by link (GET
/// only, the live event streams and the labelling form left out): (path, body).
fn crawl(address: &str, token: &str, start: Vec<String>) -> Vec<(String, String)> {
    let reference =
        regex::Regex::new(r#"(?:href|src|action)=["']([^"'#]+)|fetch\(\s*[`"']([^`"'$]+)"#)
            .unwrap();
    let mut queue = start;
    let mut seen = std::collections::BTreeSet::new();
    let mut pages = Vec::new();
    while let Some(path) = queue.pop() {
        if !seen.insert(path.clone()) || seen.len() > 80 {
            continue;
        }
        let (status, body) = get(address, token, &path);
        assert!(status < 500, "GET {path}: {status}");
        let dir = path.split('?').next().unwrap();
        let dir = &dir[..=dir.rfind('/').unwrap_or(0)];
        for c in reference.captures_iter(&body) {
            let target = c
                .get(1)
                .or(c.get(2))
                .unwrap()
                .as_str()
                .replace("&amp;", "&");
            let next = if let Some(same) = target.strip_prefix(&format!("http://{address}")) {
                same.to_string()
            } else if target.starts_with("//") || target.contains(':') {
                continue;
            } else if target.starts_with('/') {
                target
            } else if let Some(query) = target.strip_prefix('?') {
                format!("{}?{query}", path.split('?').next().unwrap())
            } else {
                format!("{dir}{target}")
            };
            if !next.contains("/events") && !next.contains("/label") {
                queue.push(next);
            }
        }
        pages.push((path, body));
    }
    pages
}

/// Every page `view` serves holds nothing a browser would load from elsewhere, and the
/// main pages, loaded in Chromium, request nothing but `view`'s own URLs.
fn check_view(first_line: &str, scratch: &Path) {
    let url = first_line
        .trim()
        .strip_prefix("promptgauge view: ")
        .unwrap_or_else(|| panic!("view said no URL: {first_line:?}"))
        .to_string();
    let address = format!("127.0.0.1:{}", port_of(&url));
    let token = url.split("token=").nth(1).unwrap_or("");
    let (_, runs) = get(&address, token, "/api/runs");
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let ids: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{runs}");
    let main = [
        "/".to_string(),
        format!("/runs/{}/", ids[0]),
        format!("/runs/{}/answers", ids[0]),
        format!("/compare?run={}&run={}", ids[0], ids[1]),
    ];
    let pages = crawl(&address, token, main.to_vec());
    assert!(
        pages.iter().any(|(p, _)| p.contains("/jobs/")),
        "the crawl reached no run's jobs: {:?}",
        pages.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for (path, body) in &pages {
        let foreign = foreign_urls(body);
        assert!(foreign.is_empty(), "view's {path} loads {foreign:?}");
    }
    if !chromium() {
        return;
    }
    let origin = format!("http://{address}");
    for (n, path) in main.iter().enumerate() {
        let join = if path.contains('?') { '&' } else { '?' };
        let requested = page_requests(
            &format!("{origin}{path}{join}token={token}"),
            &origin,
            &scratch.join(n.to_string()),
        );
        let elsewhere: Vec<&String> = requested
            .iter()
            .filter(|u| !u.starts_with(&format!("{origin}/")))
            .collect();
        assert!(
            elsewhere.is_empty(),
            "view's {path}, loaded in Chromium, requested {elsewhere:?}"
        );
        if path == "/" {
            // The runs list's script asks view for the runs in progress: the page ran, and
            // the log caught what it asked for.
            assert!(
                requested.iter().any(|u| u.contains("/api/")),
                "Chromium logged no request of the runs list's script: {requested:?}"
            );
        }
    }
}

/// Chromium, when this machine has it; in CI (.ci/run installs it) its absence is a
/// failure.
fn chromium() -> bool {
    if Path::new("/usr/bin/chromium").exists() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no chromium: .ci/run installs it"
    );
    println!("skipped: the pages in Chromium: no /usr/bin/chromium (apt-get install chromium)");
    false
}

/// Every URL the page at `url` requested as headless Chromium loaded it and ran its
/// scripts for three seconds of virtual time, read from Chromium's network log: the
/// requests the page started (their initiator is `origin`), not Chromium's own. No name
/// resolves but loopback's, so nothing a page asked for from elsewhere would leave.
fn page_requests(url: &str, origin: &str, scratch: &Path) -> Vec<String> {
    std::fs::create_dir_all(scratch).unwrap();
    let log = scratch.join("net-log.json");
    let out = Command::new("/usr/bin/chromium")
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=3000",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("profile").display()
        ))
        .arg(format!("--log-net-log={}", log.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "chromium loaded no {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).unwrap();
    // A log cut short at exit lacks its closing brackets.
    let net: serde_json::Value = serde_json::from_str(&text)
        .or_else(|_| serde_json::from_str(&format!("{}]}}", text.trim_end().trim_end_matches(','))))
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let start = &net["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"];
    net["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| &e["type"] == start && e["params"]["initiator"] == origin)
        .filter_map(|e| e["params"]["url"].as_str().map(String::from))
        .collect()
}

fn write_promptfoo_config(dir: &Path) -> PathBuf {
    // A config naming a provider on another machine and a prompt URL: import reads them as
    // text and fetches neither.
    let config = dir.join("promptfooconfig.yaml");
    std::fs::write(
        &config,
        "prompts: [\"Answer: {{question}}\"]\n\
         providers: [{ id: \"openai:chat:m\", config: { apiBaseUrl: \"https://api.example.com/v1\" } }]\n\
         tests:\n  - vars: { question: \"What is 2 + 2?\" }\n    assert: [{ type: equals, value: \"4\" }]\n",
    )
    .unwrap();
    config
}

#[cfg(target_os = "linux")]
#[test]
fn every_command_of_a_first_hour_connects_only_to_loopback() {
    if !strace() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let log = |name: &str| root.join(format!("{name}.trace"));

    // A local endpoint: the simulator as a server of its own, traced too.
    let mock = Server::start(root, &log("mock"), &["mock", "--port", "0"]);
    let base_url = mock
        .first_line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("mock said no URL: {:?}", mock.first_line))
        .to_string();

    run_traced(root, &log("init"), &["init", "bench", "--task", "number"]);
    let bench = root.join("bench");
    run_traced(&bench, &log("check"), &["check"]);
    run_traced(&bench, &log("run-simulator"), &["run", "--quiet"]);
    let (_, endpoint_trace) = run_traced(
        &bench,
        &log("run-endpoint"),
        &[
            "run",
            "--quiet",
            "--base-url",
            &base_url,
            "--model",
            "local",
        ],
    );
    // The trace sees the run's own requests: a trace that saw nothing would pass anything.
    let endpoint = Peer::Inet {
        address: "127.0.0.1".into(),
        port: port_of(&base_url),
    };
    assert!(
        peers(&endpoint_trace).contains(&endpoint),
        "the trace never saw the run connect to {base_url}:\n{endpoint_trace}"
    );
    let runs = run_dirs(&bench.join("reports"));
    assert_eq!(runs.len(), 2, "{runs:?}");
    let (a, b) = (runs[0].to_str().unwrap(), runs[1].to_str().unwrap());
    run_traced(&bench, &log("report"), &["report", a]);
    run_traced(&bench, &log("compare"), &["compare", a, b]);

    let config = write_promptfoo_config(root);
    run_traced(
        root,
        &log("import"),
        &[
            "import",
            "promptfoo",
            config.to_str().unwrap(),
            "--out",
            "imported",
        ],
    );
    run_traced(&root.join("imported"), &log("check-imported"), &["check"]);

    // `view`, every page it serves fetched, and its main pages loaded in Chromium.
    let view = Server::start(&bench, &log("view"), &["view", "--port", "0"]);
    check_view(&view.first_line, &root.join("chromium"));
    view.stop();
    mock.stop();

    for report in runs.iter().map(|r| r.join("report.html")) {
        let html = std::fs::read_to_string(&report).unwrap();
        let foreign = foreign_urls(&html);
        assert!(foreign.is_empty(), "{} loads {foreign:?}", report.display());
    }
    for name in [
        "mock",
        "init",
        "check",
        "run-simulator",
        "run-endpoint",
        "report",
        "compare",
        "import",
        "check-imported",
        "view",
    ] {
        assert_local(name, &std::fs::read_to_string(log(name)).unwrap());
    }
}

#[test]
fn a_connection_elsewhere_or_a_name_lookup_is_caught() {
    // What strace writes for a lookup and a connection to another machine: both refused.
    let dns = r#"953   connect(7, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.255.255.53")}, 16) = 0"#;
    let nscd = r#"952   connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT"#;
    let away = r#"12 connect(9, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "2606:4700::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 EINPROGRESS"#;
    let home = r#"12 connect(9, {sa_family=AF_INET, sin_port=htons(8000), sin_addr=inet_addr("127.0.0.1")}, 16) = 0"#;
    for line in [dns, nscd, away] {
        let caught = std::panic::catch_unwind(|| assert_local("x", line));
        assert!(caught.is_err(), "not caught: {line}");
    }
    assert_local("x", home);
    assert_eq!(
        peers(away),
        vec![Peer::Inet {
            address: "2606:4700::1".into(),
            port: 443
        }]
    );
    // A page's script, style, font or request from a CDN is caught; a link, a URL shown
    // as text, a namespace and the page's own server are not.
    let page = r#"<svg xmlns="http://www.w3.org/2000/svg"></svg><a href="https://github.com/x">docs</a>
        <pre># base_url: https://api.openai.com/v1</pre><img src="http://127.0.0.1:9/x.png">
        <script src="https://cdn.example.com/x.js"></script><link rel="stylesheet" href="//fonts.example.com/f.css">
        <style>@font-face { src: url(https://fonts.example.com/f.woff2) }</style>
        <script>fetch("https://telemetry.example.com/t"); fetch("/api/runs")</script>"#;
    assert_eq!(
        foreign_urls(page),
        vec![
            "https://cdn.example.com/x.js",
            "//fonts.example.com/f.css",
            "https://fonts.example.com/f.woff2",
            "https://telemetry.example.com/t"
        ]
    );
}
