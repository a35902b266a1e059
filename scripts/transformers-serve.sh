#!/usr/bin/env bash
# Run promptgauge against Hugging Face `transformers serve` (OpenAI-compatible server from
# PyPI) over both OpenAI wire protocols: Responses (POST /v1/responses) and chat completions
# (POST /v1/chat/completions), streamed.
#
# No model hub is needed: a tiny Llama with random weights and a byte-level BPE tokenizer
# trained on the spot is built into a temp dir. Its answers are nonsense, so accuracy is ~0;
# what is checked is that every job streams to a finish. Exits non-zero if any job failed
# (a wrong answer is not a failure).
#
# Run from the promptgauge repo root:  scripts/transformers-serve.sh
# Environment:
#   PG                 promptgauge binary        [$PWD/target/release/promptgauge]
#   VENV               venv for transformers     [$PWD/.venv-transformers] (made if missing)
#   PORT               server port on 127.0.0.1  [8765]
#   LIMIT              cases per run             [5]
#   CONCURRENCY        requests in flight        [1: the server generates one at a time]
#   TRANSFORMERS_SPEC  pip spec                  [transformers[serving]==5.24.0]
#   TORCH_SPEC         pip spec                  [torch==2.15.0]
#   TORCH_INDEX_URL    CPU wheel index tried first, PyPI after [https://download.pytorch.org/whl/cpu]
#   KEEP=1             keep the work dir (model, bench, reports, server log)
set -euo pipefail

PG=${PG:-$PWD/target/release/promptgauge}
VENV=${VENV:-$PWD/.venv-transformers}
PORT=${PORT:-8765}
LIMIT=${LIMIT:-5}
CONCURRENCY=${CONCURRENCY:-1}
TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers[serving]==5.24.0}
TORCH_SPEC=${TORCH_SPEC:-torch==2.15.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
KEEP=${KEEP:-0}
BASE="http://127.0.0.1:$PORT"

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 2; }

[ -x "$PG" ] || die "promptgauge not found at $PG (cargo build --release, or set PG)"
command -v curl >/dev/null || die "curl is needed"

# ---- 1. the venv (skipped when it already works) -------------------------------------------
PY="$VENV/bin/python"
if [ -x "$PY" ] && "$PY" -c 'import torch, transformers, fastapi, uvicorn, openai' 2>/dev/null; then
  log "venv $VENV is ready"
else
  log "installing into $VENV (torch is large; this takes minutes)"
  command -v python3 >/dev/null || die "python3 is needed"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  t0=$SECONDS
  if [ -n "$TORCH_INDEX_URL" ] &&
     "$PY" -m pip install -q --retries 0 --timeout 15 --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC" 2>/dev/null; then
    log "torch from the CPU wheel index"
  else
    log "CPU wheel index unreachable: torch from PyPI (pulls CUDA wheels, a few GB)"
    "$PY" -m pip install -q "$TORCH_SPEC"
  fi
  "$PY" -m pip install -q "$TRANSFORMERS_SPEC"
  log "installed in $((SECONDS - t0)) s"
fi
"$PY" - <<'EOF' >&2
import importlib.metadata as m
print("== versions:", ", ".join(f"{p} {m.version(p)}" for p in
      ("transformers", "torch", "tokenizers", "fastapi", "uvicorn", "openai")))
EOF

# ---- 2. work dir, cleanup ------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pg-transformers-serve.XXXXXX")
SERVER_PID=""
STATUS=1
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "$KEEP" = 1 ] || [ "$STATUS" != 0 ]; then
    echo "work dir kept: $WORK (server.log, bench/, reports/)" >&2
  else
    rm -rf "$WORK"
  fi
}
trap 'cleanup' EXIT
trap 'exit 130' INT TERM

# ---- 3. a tiny random model, built offline -------------------------------------------------
MODEL="$WORK/tiny-model"
log "building a tiny random model in $MODEL"
HF_HUB_OFFLINE=1 "$PY" - "$MODEL" <<'EOF'
import random, sys
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from transformers.utils import logging

logging.set_verbosity_error()
logging.disable_progress_bar()
out = sys.argv[1]
random.seed(0)
torch.manual_seed(0)

# A few hundred lines of arithmetic questions and filler, digits included.
words = ["What", "is", "plus", "minus", "times", "divided", "by", "the", "answer", "Answer", "with",
         "a", "number", "only", "Question", "How", "many", "sum", "of", "and", "result", "Reply",
         "You", "are", "helpful", "assistant", "Think", "step", "final", "equals"]
ops = ["+", "-", "*", "/", "plus", "minus", "times"]
lines = []
for i in range(400):
    a, b = random.randint(0, 999), random.randint(0, 999)
    lines.append(f"What is {a} {random.choice(ops)} {b}? Answer with a number only. The answer is {a + b}.")
    lines.append(" ".join(random.choice(words) for _ in range(8)) + f" {i}.")
lines += ["system user assistant", "You are a helpful assistant.", "0 1 2 3 4 5 6 7 8 9 10 100 1000"]

specials = ["<|bos|>", "<|eos|>", "<|pad|>", "<|unk|>"]
tok = Tokenizer(models.BPE(unk_token="<|unk|>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.train_from_iterator(lines, trainer=trainers.BpeTrainer(
    vocab_size=512, special_tokens=specials, show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))

chat_template = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                               pad_token="<|pad|>", unk_token="<|unk|>", chat_template=chat_template)
fast.save_pretrained(out)

# Untied head, wider init: greedy decoding then says varied tokens (digits among them) and
# sometimes <|eos|>, instead of one token forever.
cfg = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                  initializer_range=0.2, tie_word_embeddings=False,
                  bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                  pad_token_id=fast.pad_token_id)
model = LlamaForCausalLM(cfg)
# Note: `transformers serve` raises max_new_tokens below 1024 to 1024 unless the request
# sets max_tokens / max_output_tokens (promptgauge's bench does).
model.generation_config = GenerationConfig(max_new_tokens=64, do_sample=False,
                                           bos_token_id=fast.bos_token_id,
                                           eos_token_id=fast.eos_token_id,
                                           pad_token_id=fast.pad_token_id)
model.save_pretrained(out)
print(f"== tiny model: vocab {len(fast)}, {sum(p.numel() for p in model.parameters())} parameters",
      file=sys.stderr)
EOF

# ---- 4. the server -------------------------------------------------------------------------
if curl -s -o /dev/null --max-time 2 "$BASE/"; then
  die "something already listens on port $PORT: set PORT"
fi
log "starting transformers serve on $BASE"
HF_HUB_OFFLINE=1 "$VENV/bin/transformers" serve --host 127.0.0.1 --port "$PORT" \
  --device cpu --log-level info "$MODEL" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for i in $(seq 180); do
  if curl -sf --max-time 2 "$BASE/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    tail -30 "$WORK/server.log" >&2; die "the server exited while starting"
  fi
  [ "$i" = 180 ] && { tail -30 "$WORK/server.log" >&2; die "the server did not answer /health in 180 s"; }
  sleep 1
done
# With a model on the command line the server is pinned to it, and requests must name it
# exactly as /v1/models lists it: the path as given.
MODEL_ID=$(curl -sf "$BASE/v1/models" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
log "server ready; it serves model id: $MODEL_ID"

# A raw streamed Responses request: which SSE events arrive, and the final usage.
curl -sfN --max-time 120 "$BASE/v1/responses" -H 'content-type: application/json' \
  -d "{\"model\": \"$MODEL_ID\", \"input\": \"What is 2 + 2?\", \"stream\": true, \"max_output_tokens\": 8}" \
  >"$WORK/responses.sse"
"$PY" - "$WORK/responses.sse" <<'EOF' >&2
import collections, json, sys
events, last = collections.Counter(), None
for line in open(sys.argv[1]):
    if line.startswith("data: ") and line[6:].strip() != "[DONE]":
        last = json.loads(line[6:]); events[last["type"]] += 1
print("== raw /v1/responses stream:", ", ".join(f"{k} x{v}" for k, v in events.items()))
r = (last or {}).get("response", {})
print(f"== last event {last and last['type']}: status {r.get('status')}, usage {r.get('usage')}")
EOF

# ---- 5. promptgauge, both protocols --------------------------------------------------------
"$PG" init "$WORK/bench" --task number >/dev/null
fail=0
for proto in openai-responses openai-chat; do
  log "promptgauge run --protocol $proto"
  rc=0
  "$PG" run "$WORK/bench/promptgauge.yaml" --base-url "$BASE/v1" --model "$MODEL_ID" \
    --protocol "$proto" --no-store --limit "$LIMIT" --concurrency "$CONCURRENCY" \
    --out "$WORK/reports/$proto" -v >"$WORK/$proto.out" 2>&1 || rc=$?
  run_dir=$(ls -d "$WORK/reports/$proto"/*/ 2>/dev/null | head -1)
  if [ -z "$run_dir" ]; then
    cat "$WORK/$proto.out" >&2; echo "$proto: no run folder (exit $rc)"; fail=1; continue
  fi
  "$PY" - "$proto" "$rc" "$run_dir" <<'EOF' || fail=1
import collections, json, sys
proto, rc, run = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = json.load(open(run + "summary.json"))
finish, outcome, errors = collections.Counter(), collections.Counter(), []
for line in open(run + "results.jsonl"):
    r = json.loads(line)
    finish[r.get("finish_reason")] += 1
    outcome[r.get("outcome")] += 1
    if r.get("status") == "failed" or r.get("error"):
        errors.append(f"case {r.get('case_id')} {r.get('variant')}: {r.get('error') or r.get('outcome')}")
planned, done, failed = s["run"]["jobs_planned"], s["jobs_finished"], s["jobs_failed"]
ns = ", ".join(f"{v['name']} n={v['n']}" for v in s["variants"])
correct = sum(v["correct"] for v in s["variants"])
print(f"{proto}: jobs {done}/{planned}, failed {failed}, correct {correct} ({ns}); "
      f"finish reasons {dict(finish)}; outcomes {dict(outcome)}; promptgauge exit {rc}")
for e in errors[:5]:
    print("  ", e)
ok = rc == 0 and failed == 0 and done == planned and all(v["n"] == v["jobs"] for v in s["variants"])
sys.exit(0 if ok else 1)
EOF
done

if [ "$fail" != 0 ]; then
  echo "FAILED: some jobs did not stream to a finish; see $WORK/*.out and $WORK/server.log" >&2
  tail -20 "$WORK/server.log" >&2
  STATUS=1
  exit 1
fi
STATUS=0
echo "ok: every job of both protocols streamed to a finish"
