//! Tools that act on the world (docs/guide/tools.md): an MCP server's listing is read
//! within bounds; a loop that can make no call is refused.

use std::path::Path;

use super::tools::{bench, run, said, scripted_mock};

/// `n` cases the scripted agent answers "bring an umbrella" to.
fn cases(n: usize) -> String {
    (1..=n)
        .map(|i| {
            format!(
                "{{\"id\": \"a{i}\", \"vars\": {{\"q\": \"Advice {i}?\"}}, \"expected\": \"bring an umbrella\"}}\n"
            )
        })
        .collect()
}

/// A bench whose tools the plain MCP server (tests/fixtures/mcp/plain_server.py) answers,
/// started with `modes`.
fn plain_mcp_bench(cases_text: &str, modes: &str, extra: &str) -> tempfile::TempDir {
    let b = bench(
        cases_text,
        &format!(
            "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: {{ kind: exact }}\nmcp:\n  - run: [python3, plain_server.py{modes}]\n    timeout: 20s\nlimits: {{ concurrency: 1 }}\n{extra}"
        ),
    );
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/plain_server.py"),
        b.path().join("plain_server.py"),
    )
    .unwrap();
    b
}

#[test]
fn an_mcp_server_whose_tool_listing_never_ends_is_refused_with_what_it_did() {
    let (_rt, server) = scripted_mock(vec![]);
    let b = plain_mcp_bench(&cases(1), ", endless", "");
    let d = b.path();
    std::fs::write(
        d.join("bench.yaml"),
        std::fs::read_to_string(d.join("bench.yaml"))
            .unwrap()
            .replace("timeout: 20s", "timeout: 3s"),
    )
    .unwrap();
    // (Its listing would go on until the server's 3 s to start are over.)
    let out = run(d, &server.base_url(), "openai-chat");
    let stderr = said(&out);
    let status = out.status;
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the MCP server `plain_server.py`")
            && stderr.contains("every page named a next one")
            && !stderr.contains("did not start within"),
        "{stderr}"
    );
    // A listing that names the same page again is said as such.
    let b = plain_mcp_bench(&cases(1), ", circle", "");
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("listed its tools in a circle: page 2 named as next a page it had named before (cursor `again`)"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}

#[test]
fn a_loop_that_may_make_no_tool_call_is_refused_at_load() {
    let (_rt, server) = scripted_mock(vec![]);
    let b = bench(
        &cases(1),
        "name: agent\ncases: cases.jsonl\nvariants: [v.yaml]\ngrade: { kind: exact }\ntools:\n  - name: search\n    default: no results\nloop: { max_tool_calls: 0 }\n",
    );
    let out = run(b.path(), &server.base_url(), "openai-chat");
    assert_eq!(out.status.code(), Some(2), "{}", said(&out));
    assert!(
        said(&out).contains("bench.yaml:8")
            && said(&out).contains("loop.max_tool_calls is 0")
            && said(&out).contains("fix: max_tool_calls: 16"),
        "{}",
        said(&out)
    );
    assert_eq!(server.provider.stats().requests, 0, "nothing sent");
}
