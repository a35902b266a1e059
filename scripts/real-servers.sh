#!/usr/bin/env bash
# The three protocols against a real implementation of each, outside CI (CI has no model):
# LiteLLM's proxy (PyPI) serves OpenAI chat completions, the OpenAI Responses API
# (/v1/responses) and the Anthropic Messages API (/v1/messages) in front of a local
# OpenAI-compatible server — here promptgauge's own simulator — so a bench's requests and
# streams go through LiteLLM's code for each protocol, not ours. The same bench must get
# the same figures over all three. Then files (docs/guide/attachments.md): `init --task
# vision`'s images through the same three paths, and through LiteLLM's translation of
# OpenAI image parts into an Anthropic Messages backend (the simulator's /v1/messages,
# which reads image blocks as strictly as Anthropic): the figures must agree again, and
# the simulator must have read every image sent. Then agent loops (docs/guide/tools.md):
# a loop of two tool calls through the same three paths and into the Anthropic backend —
# LiteLLM's own translation of tool calls and results between the protocols — every job
# the same two steps and answer on each.
#
#   scripts/real-servers.sh          # installs litellm[proxy] into $VENV (.venv-litellm) once
#
# Needs python3 and the PyPI registry the first time; nothing else leaves the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
PG="$PWD/target/release/promptgauge"
VENV=${VENV:-$PWD/.venv-litellm}
if [ ! -x "$VENV/bin/litellm" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'litellm[proxy]'
fi
WORK=$(mktemp -d)
MOCK_PORT=${MOCK_PORT:-18700}
PROXY_PORT=${PROXY_PORT:-18701}
AGENT_PORT=${AGENT_PORT:-18702}
KEY=sk-local-master-key-0123
"$PG" mock --port "$MOCK_PORT" --model mock-model > "$WORK/mock.log" 2>&1 &
MOCK=$!
"$PG" mock --port "$AGENT_PORT" --model mock-model --agent-steps 2 > "$WORK/agent-mock.log" 2>&1 &
AGENT=$!
cat > "$WORK/litellm.yaml" <<YAML
model_list:
  - model_name: local-model
    litellm_params:
      model: openai/mock-model
      api_base: http://127.0.0.1:$MOCK_PORT/v1
      api_key: none
  - model_name: local-claude
    litellm_params:
      model: anthropic/mock-model
      api_base: http://127.0.0.1:$MOCK_PORT
      api_key: none
  - model_name: local-agent
    litellm_params:
      model: openai/mock-model
      api_base: http://127.0.0.1:$AGENT_PORT/v1
      api_key: none
  - model_name: local-agent-claude
    litellm_params:
      model: anthropic/mock-model
      api_base: http://127.0.0.1:$AGENT_PORT
      api_key: none
YAML
LITELLM_MASTER_KEY=$KEY "$VENV/bin/litellm" --config "$WORK/litellm.yaml" --port "$PROXY_PORT" \
  > "$WORK/litellm.log" 2>&1 &
PROXY=$!
trap 'kill $MOCK $AGENT $PROXY 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PROXY_PORT/health/liveliness" > /dev/null && break
  sleep 1
done
"$PG" init "$WORK/bench" --task number > /dev/null
figures=()
for protocol in openai-chat openai-responses anthropic-messages; do
  OPENAI_API_KEY=$KEY "$PG" run "$WORK/bench/promptgauge.yaml" --quiet --no-store \
    --base-url "http://127.0.0.1:$PROXY_PORT/v1" --model local-model \
    --protocol "$protocol" --out "$WORK/$protocol" > /dev/null
  summary=$(ls "$WORK/$protocol"/*/summary.json)
  line=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(' '.join(f\"{v['name']}={v['accuracy']} n={v['n']} failed={v['failed']}\" for v in s['variants']))" "$summary")
  echo "$protocol: $line"
  figures+=("$line")
done
grep -o '"POST /v1/[a-z/_]*' "$WORK/litellm.log" | sort | uniq -c
if [ "${figures[0]}" != "${figures[1]}" ] || [ "${figures[0]}" != "${figures[2]}" ]; then
  echo "the protocols disagree" >&2
  exit 1
fi
echo "the same figures over all three protocols"

# Files: the vision bench's images through each protocol, and into an Anthropic backend.
files_read() {
  curl -s "http://127.0.0.1:$MOCK_PORT/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"])'
}
"$PG" init "$WORK/vision" --task vision > /dev/null
figures=()
for route in openai-chat:local-model openai-responses:local-model anthropic-messages:local-model openai-chat:local-claude; do
  protocol=${route%%:*}
  model=${route#*:}
  before=$(files_read)
  OPENAI_API_KEY=$KEY "$PG" run "$WORK/vision/promptgauge.yaml" --quiet --no-store \
    --base-url "http://127.0.0.1:$PROXY_PORT/v1" --model "$model" \
    --protocol "$protocol" --out "$WORK/vision-$protocol-$model" > /dev/null
  summary=$(ls "$WORK/vision-$protocol-$model"/*/summary.json)
  line=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(' '.join(f\"{v['name']}={v['accuracy']} n={v['n']} failed={v['failed']}\" for v in s['variants']))" "$summary")
  read_now=$(( $(files_read) - before ))
  echo "vision, $protocol to $model: $line; the simulator read $read_now images"
  if [ "$read_now" != 20 ]; then
    echo "20 images were sent (plain and careful, 10 cases each), $read_now arrived" >&2
    exit 1
  fi
  figures+=("$line")
done
for f in "${figures[@]:1}"; do
  if [ "$f" != "${figures[0]}" ]; then
    echo "the paths disagree on the vision bench" >&2
    exit 1
  fi
done
echo "the same figures, and every image read, over the four paths"

# Agent loops: each job calls a tool twice (the simulator's --agent-steps 2), gets each
# result back in the protocol's form, then answers.
mkdir -p "$WORK/agent"
for i in $(seq 10); do
  printf '{"id": "c%s", "vars": {"text": "echo %s"}, "expected": "echo %s"}\n' "$i" "$i" "$i"
done > "$WORK/agent/cases.jsonl"
printf 'messages:\n  - { role: user, content: "Use the tool, then say: {{ text }}" }\n' > "$WORK/agent/v.yaml"
cat > "$WORK/agent/bench.yaml" <<YAML
name: agent
cases: cases.jsonl
variants: [v.yaml]
grade: { kind: all, of: [{ kind: max_steps, steps: 2 }, { kind: tool_sequence, tools: [lookup, lookup] }] }
tools:
  - name: lookup
    description: Looks something up.
    default: found it
loop: { max_turns: 4 }
YAML
figures=()
for route in openai-chat:local-agent openai-responses:local-agent anthropic-messages:local-agent openai-chat:local-agent-claude; do
  protocol=${route%%:*}
  model=${route#*:}
  OPENAI_API_KEY=$KEY "$PG" run "$WORK/agent/bench.yaml" --quiet --no-store \
    --base-url "http://127.0.0.1:$PROXY_PORT/v1" --model "$model" \
    --protocol "$protocol" --out "$WORK/agent-$protocol-$model" > /dev/null || true
  run=$(ls -d "$WORK/agent-$protocol-$model"/*/)
  line=$(python3 - "$run" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1] + "results.jsonl") if '"case_id"' in l]
steps = sorted({len(r.get("steps", [])) for r in records})
turns = sorted({len(r.get("turns", [])) for r in records})
results = sorted({s["result"] for r in records for s in r.get("steps", [])})
print(f"jobs={len(records)} graded={sum(r['status'] == 'graded' for r in records)} "
      f"passed={sum(r.get('score') == 1.0 for r in records)} steps={steps} requests={turns} results={results}")
PY
)
  echo "agent, $protocol to $model: $line"
  figures+=("$line")
done
for f in "${figures[@]:1}"; do
  if [ "$f" != "${figures[0]}" ]; then
    echo "the paths disagree on the agent loops" >&2
    exit 1
  fi
done
case "${figures[0]}" in
  "jobs=10 graded=10 passed=10 steps=[2] requests=[3] results=['found it']") ;;
  *) echo "every job should make two calls in three requests and pass: ${figures[0]}" >&2; exit 1 ;;
esac
echo "the same loops, two calls and three requests a job, over the four paths"
