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
# the simulator must have read every image sent.
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
KEY=sk-local-master-key-0123
"$PG" mock --port "$MOCK_PORT" --model mock-model > "$WORK/mock.log" 2>&1 &
MOCK=$!
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
YAML
LITELLM_MASTER_KEY=$KEY "$VENV/bin/litellm" --config "$WORK/litellm.yaml" --port "$PROXY_PORT" \
  > "$WORK/litellm.log" 2>&1 &
PROXY=$!
trap 'kill $MOCK $PROXY 2>/dev/null || true; rm -rf "$WORK"' EXIT
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
