//! `init --task agent`: an order-status agent with two tools, scripted per case — it must
//! look the order up, then ask the carrier, then answer with the date — graded on the
//! answer and on the calls it made (docs/guide/tools.md).

use super::starter::Starter;

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
        grade: "{ kind: all, of: [{ kind: contains }, { kind: tool_sequence, tools: [lookup_order, shipping_eta] }] }   # the date in the answer, and both tools called in this order",
        extra: TOOLS,
        cases,
        plain: (
            "You are a support agent. Use the tools to answer.",
            "{{ question }}",
        ),
        careful: (
            "You are a support agent. First look the order up, then ask the carrier when it arrives, then answer with the date (YYYY-MM-DD).",
            "{{ question }}",
        ),
        more_variants: "",
        more_files: Vec::new(),
    }
}
