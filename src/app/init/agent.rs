//! `init --task agent`: an order-status agent with three tools — two scripted per case,
//! one a program answers — that must look the order up, ask the carrier, read how the
//! carrier delivers, and answer with the date; graded on the answer and on the calls it
//! made (docs/guide/tools.md).

use super::starter::{Starter, StarterFile};

/// The tool a program answers: POSIX sh, so the bench runs wherever promptgauge does.
const CARRIER_INFO: &str = r#"#!/bin/sh
# A tool a program answers (docs/guide/tools.md): one JSON call on stdin —
# {"tool", "arguments", "case", "vars"} — and one JSON object on stdout: {"result": ...},
# or {"error": "..."}, which the model is given back as the tool's error.
read -r call
case "$call" in
  *'"carrier":"DHL"'*)
    echo '{"result": "DHL delivers Monday to Saturday, 8:00 to 18:00; a missed parcel waits 7 days at the nearest service point"}' ;;
  *)
    echo '{"error": "unknown carrier: look the order up first, it names the carrier"}' ;;
esac
"#;

/// The bench's `tools:`, `loop:` and the scorers' comments, before `endpoint:`.
const TOOLS: &str =
    "# The tools the agent is offered; each case scripts what every call returns (tool_results).
tools:
  - name: lookup_order
    description: The status, carrier and tracking number of an order.
    parameters: { type: object, properties: { order_id: { type: string } }, required: [order_id] }
  - name: shipping_eta
    description: When a parcel will arrive, by its tracking number.
    parameters: { type: object, properties: { tracking: { type: string } }, required: [tracking] }
    default: unknown tracking number   # what a call no case line matches gets back
  - name: carrier_info
    description: How a carrier delivers, and what happens to a missed parcel.
    parameters: { type: object, properties: { carrier: { type: string } }, required: [carrier] }
    run: [sh, tools/carrier_info.sh]   # a program answers every call (one JSON line in, one out)
    timeout: 10s
# A server speaking the Model Context Protocol can answer tools too: every tool it lists
# is offered (docs/guide/tools.md, Tools an MCP server answers).
# mcp:
#   - run: [python3, my_mcp_server.py]
loop: { max_turns: 6, max_tool_calls: 8 }   # a loop that goes further fails with that cause
";

pub(super) fn agent() -> Starter {
    let cases = (1..=10)
        .map(|i| {
            let day = 10 + i;
            format!(
                "{{\"id\": \"o-{i:02}\", \"vars\": {{\"question\": \"Where is my order A-{}? When will it arrive?\"}}, \"expected\": \"2026-12-{day}\", \"tool_results\": [{{\"tool\": \"lookup_order\", \"args\": {{\"order_id\": \"A-{}\"}}, \"result\": {{\"status\": \"shipped\", \"carrier\": \"DHL\", \"tracking\": \"T{i:04}\"}}}}, {{\"tool\": \"shipping_eta\", \"args\": {{\"tracking\": \"T{i:04}\"}}, \"match\": \"subset\", \"result\": \"arrives on 2026-12-{day}\"}}]}}",
                100 + i,
                100 + i
            )
        })
        .collect();
    Starter {
        grade: "{ kind: all, of: [{ kind: contains }, { kind: tool_sequence, tools: [lookup_order, shipping_eta] }, { kind: tool_args, tool: carrier_info, args: { carrier: DHL } }] }   # the date in the answer, the two lookups in this order, and the carrier's service read",
        extra: TOOLS,
        cases,
        plain: (
            "You are a support agent. Use the tools to answer.",
            "{{ question }}",
        ),
        careful: (
            "You are a support agent. First look the order up, then ask the carrier when it arrives and how it delivers, then answer with the date (YYYY-MM-DD).",
            "{{ question }}",
        ),
        more_variants: "",
        more_files: vec![StarterFile::new("tools/carrier_info.sh", CARRIER_INFO)],
    }
}
