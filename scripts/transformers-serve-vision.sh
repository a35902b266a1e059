#!/usr/bin/env bash
# Prove that a real Hugging Face `transformers serve` (OpenAI-compatible server from PyPI)
# accepts promptgauge's image requests, over chat completions (`image_url` parts) and the
# Responses API (`input_image` parts), streamed.
#
# No model hub is needed: a tiny Llava (CLIP vision tower + Llama text model, random
# weights), a byte-level BPE tokenizer trained on the spot with an `<image>` token, a
# PIL-backed CLIP image processor sized to the tower and a LlavaProcessor with a chat
# template that renders image parts are built offline into a temp dir. Its answers are
# nonsense; what is checked is that every request is accepted and streams to a finish, and
# that the image-sending variants' records list their files. Exits non-zero if any job failed.
#
# Environment:
# Run from anywhere in the repo:  scripts/transformers-serve-vision.sh
#   PG                 promptgauge binary     [target/release/promptgauge, else target/debug]
#   VENV               venv for transformers  [.venv-transformers, shared with transformers-serve.sh] (made if missing)
#   PORT               server port            [8766]
#   LIMIT              cases per run          [3]
#   TRANSFORMERS_SPEC  pip spec               [transformers[serving]==5.24.0]
#   TORCH_SPEC         pip spec               [torch==2.15.0]
#   TORCH_INDEX_URL    CPU wheel index tried first, PyPI after [https://download.pytorch.org/whl/cpu]
#   KEEP=1             keep the work dir (model, bench, reports, server log)
set -euo pipefail
cd "$(dirname "$0")/.."

PG=${PG:-$PWD/target/release/promptgauge}
[ -x "$PG" ] || PG=$PWD/target/debug/promptgauge
VENV=${VENV:-$PWD/.venv-transformers}
PORT=${PORT:-8766}
LIMIT=${LIMIT:-3}
TRANSFORMERS_SPEC=${TRANSFORMERS_SPEC:-transformers[serving]==5.24.0}
TORCH_SPEC=${TORCH_SPEC:-torch==2.15.0}
TORCH_INDEX_URL=${TORCH_INDEX_URL-https://download.pytorch.org/whl/cpu}
KEEP=${KEEP:-0}
BASE="http://127.0.0.1:$PORT"
T_START=$SECONDS

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 2; }

[ -x "$PG" ] || die "promptgauge not found (set PG)"
command -v curl >/dev/null || die "curl is needed"

# ---- 1. the venv (skipped when it already works) -------------------------------------------
PY="$VENV/bin/python"
if [ -x "$PY" ] && "$PY" -c 'import torch, transformers, fastapi, uvicorn, openai, PIL' 2>/dev/null; then
  log "venv $VENV is ready"
else
  log "installing into $VENV (torch is large; this takes minutes)"
  command -v python3 >/dev/null || die "python3 is needed"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
  t0=$SECONDS
  if [ -n "$TORCH_INDEX_URL" ] &&
     nice -n 10 "$PY" -m pip install -q --retries 0 --timeout 15 --index-url "$TORCH_INDEX_URL" "$TORCH_SPEC" 2>/dev/null; then
    log "torch from the CPU wheel index"
  else
    log "CPU wheel index unreachable: torch from PyPI (pulls CUDA wheels, a few GB)"
    nice -n 10 "$PY" -m pip install -q "$TORCH_SPEC"
  fi
  nice -n 10 "$PY" -m pip install -q "$TRANSFORMERS_SPEC" pillow
  log "installed in $((SECONDS - t0)) s"
fi
"$PY" - <<'EOF' >&2
import importlib.metadata as m
def v(p):
    try: return m.version(p)
    except m.PackageNotFoundError: return "absent"
print("== versions:", ", ".join(f"{p} {v(p)}" for p in
      ("transformers", "torch", "torchvision", "tokenizers", "pillow", "fastapi", "uvicorn", "openai")))
EOF
"$PG" --version >&2 || true

# ---- 2. work dir, cleanup ------------------------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/pg-transformers-serve-vision.XXXXXX")
SERVER_PID=""
STATUS=1
cleanup() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "$KEEP" = 1 ] || [ "$STATUS" != 0 ]; then
    echo "work dir kept: $WORK (server.log, bench/, reports/, *.sse)" >&2
  else
    rm -rf "$WORK"
  fi
}
trap 'cleanup' EXIT
trap 'exit 130' INT TERM
fail_with_log() {
  echo "FAILED: $*" >&2
  echo "---- server log tail ($WORK/server.log)" >&2
  tail -40 "$WORK/server.log" >&2 || true
  exit 1
}

# ---- 3. a tiny random vision-language model, built offline ---------------------------------
MODEL="$WORK/tiny-llava"
log "building a tiny random Llava in $MODEL"
HF_HUB_OFFLINE=1 "$PY" - "$MODEL" <<'EOF'
import random, sys
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (CLIPVisionConfig, GenerationConfig, LlamaConfig, LlavaConfig,
                          LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast)
from transformers.utils import is_torchvision_available, logging

logging.set_verbosity_error()
logging.disable_progress_bar()
out = sys.argv[1]
random.seed(0)
torch.manual_seed(0)

IMAGE, PATCH = 32, 8  # the tower sees 32x32 pictures in 8x8 patches: 16 image tokens each

words = ["How", "many", "shapes", "are", "in", "the", "picture", "squares", "and", "circles",
         "together", "Answer", "with", "a", "number", "only", "Look", "at", "closely", "Count",
         "then", "step", "by", "What", "is", "plus", "You", "helpful", "assistant", "image"]
lines = []
for i in range(400):
    a, b = random.randint(0, 99), random.randint(0, 99)
    lines.append(f"How many shapes are in the picture? Answer: {a + b}. {a} plus {b}.")
    lines.append(" ".join(random.choice(words) for _ in range(8)) + f" {i}.")
lines += ["system user assistant", "Answer with a number only.", "0 1 2 3 4 5 6 7 8 9 10"]

specials = ["<|bos|>", "<|eos|>", "<|pad|>", "<|unk|>", "<image>"]
tok = Tokenizer(models.BPE(unk_token="<|unk|>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.post_processor = processors.ByteLevel(trim_offsets=False)
tok.train_from_iterator(lines, trainer=trainers.BpeTrainer(
    vocab_size=512, special_tokens=specials, show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))

# `transformers serve` hands the template content lists of {"type": "text", "text": ...} and
# {"type": "image", "url": ...} (chat's image_url and Responses' input_image both become the
# latter, system strings become one text part); plain strings and the raw OpenAI part types
# are rendered too. The processor expands each <image> into 16 copies.
chat_template = (
    "{{ bos_token }}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}"
    "{% if c['type'] in ['image', 'image_url', 'input_image'] %}<image>\n"
    "{% elif c['type'] in ['text', 'input_text', 'output_text'] %}{{ c['text'] }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ eos_token }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                               pad_token="<|pad|>", unk_token="<|unk|>",
                               extra_special_tokens={"image_token": "<image>"})
image_token_id = fast.convert_tokens_to_ids("<image>")

# transformers 5 has a torchvision and a PIL backend per image processor; torchvision is not
# a dependency of transformers[serving], and AutoProcessor falls back to PIL without it.
if is_torchvision_available():
    from transformers import CLIPImageProcessor as ImageProcessor
else:
    from transformers import CLIPImageProcessorPil as ImageProcessor
image_processor = ImageProcessor(size={"shortest_edge": IMAGE},
                                 crop_size={"height": IMAGE, "width": IMAGE})
# CLIP adds a CLS position (num_additional_image_tokens=1) that "default" feature selection drops.
processor = LlavaProcessor(image_processor=image_processor, tokenizer=fast, patch_size=PATCH,
                           vision_feature_select_strategy="default", num_additional_image_tokens=1,
                           image_token="<image>", chat_template=chat_template)
processor.save_pretrained(out)

vision = CLIPVisionConfig(image_size=IMAGE, patch_size=PATCH, hidden_size=32, intermediate_size=64,
                          num_hidden_layers=2, num_attention_heads=2, projection_dim=32)
# Untied head, wide init: greedy decoding says varied tokens and sometimes <|eos|>.
text = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                   initializer_range=0.2, tie_word_embeddings=False,
                   bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                   pad_token_id=fast.pad_token_id)
cfg = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                  image_seq_length=(IMAGE // PATCH) ** 2, vision_feature_select_strategy="default",
                  vision_feature_layer=-2, tie_word_embeddings=False)
model = LlavaForConditionalGeneration(cfg)
model.generation_config = GenerationConfig(max_new_tokens=64, do_sample=False,
                                           bos_token_id=fast.bos_token_id,
                                           eos_token_id=fast.eos_token_id,
                                           pad_token_id=fast.pad_token_id)
model.save_pretrained(out)
print(f"== tiny Llava: vocab {len(fast)}, <image> id {image_token_id}, "
      f"{sum(p.numel() for p in model.parameters())} parameters, image processor "
      f"{ImageProcessor.__name__} {IMAGE}x{IMAGE}, {(IMAGE // PATCH) ** 2} image tokens per image",
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
t0=$SECONDS
for i in $(seq 180); do
  if curl -sf --max-time 2 "$BASE/health" >/dev/null; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then fail_with_log "the server exited while starting"; fi
  [ "$i" = 180 ] && fail_with_log "the server did not answer /health in 180 s"
  sleep 1
done
MODEL_ID=$(curl -sf "$BASE/v1/models" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
log "server ready in $((SECONDS - t0)) s; it serves model id: $MODEL_ID"

# ---- 5. raw streamed requests with an image, by curl ---------------------------------------
# A small PNG (48x40, two coloured squares), as a data URL.
"$PY" - "$WORK/raw.png" <<'EOF'
import sys
from PIL import Image, ImageDraw
im = Image.new("RGB", (48, 40), "white")
d = ImageDraw.Draw(im)
d.rectangle([4, 4, 18, 18], fill="red")
d.ellipse([26, 16, 44, 34], fill="blue")
im.save(sys.argv[1])
EOF
DATA_URL="data:image/png;base64,$(base64 -w0 "$WORK/raw.png")"
log "raw PNG: $(stat -c %s "$WORK/raw.png") bytes, data URL ${#DATA_URL} chars"

"$PY" - "$MODEL_ID" "$DATA_URL" "$WORK" <<'EOF'
import json, sys
model, url, work = sys.argv[1:4]
json.dump({"model": model, "stream": True, "max_tokens": 12, "messages": [
    {"role": "user", "content": [
        {"type": "text", "text": "How many shapes are in the picture?"},
        {"type": "image_url", "image_url": {"url": url}}]}]},
    open(f"{work}/raw-chat.json", "w"))
json.dump({"model": model, "stream": True, "max_output_tokens": 12, "input": [
    {"role": "user", "content": [
        {"type": "input_text", "text": "How many shapes are in the picture?"},
        {"type": "input_image", "image_url": url}]}]},
    open(f"{work}/raw-responses.json", "w"))
EOF

raw_ok=1
log "raw POST /v1/chat/completions (stream, text part + image_url data URL)"
code=$(curl -sN --max-time 120 -o "$WORK/raw-chat.sse" -w '%{http_code}' "$BASE/v1/chat/completions" \
  -H 'content-type: application/json' --data-binary @"$WORK/raw-chat.json") || true
echo "HTTP $code; the stream as it came:" >&2
sed -e '/^$/d' "$WORK/raw-chat.sse" | cut -c1-300 >&2
"$PY" - "$WORK/raw-chat.sse" <<'EOF' >&2 || raw_ok=0
import json, sys
text, finish, usage, done = "", None, None, False
for line in open(sys.argv[1]):
    if not line.startswith("data: "): continue
    d = line[6:].strip()
    if d == "[DONE]": done = True; continue
    c = json.loads(d)
    usage = c.get("usage") or usage
    for ch in c.get("choices", []):
        text += (ch.get("delta") or {}).get("content") or ""
        finish = ch.get("finish_reason") or finish
print(f"== raw chat: finish_reason {finish}, [DONE] {done}, usage {usage}, text {text!r}")
sys.exit(0 if finish else 1)
EOF

log "raw POST /v1/responses (stream, input_text + input_image data URL)"
code=$(curl -sN --max-time 120 -o "$WORK/raw-responses.sse" -w '%{http_code}' "$BASE/v1/responses" \
  -H 'content-type: application/json' --data-binary @"$WORK/raw-responses.json") || true
echo "HTTP $code" >&2
"$PY" - "$WORK/raw-responses.sse" <<'EOF' >&2 || raw_ok=0
import collections, json, sys
events, last, text, raw = collections.Counter(), None, "", open(sys.argv[1]).read()
for line in raw.splitlines():
    if line.startswith("data: ") and line[6:].strip() != "[DONE]":
        last = json.loads(line[6:]); events[last.get("type")] += 1
        if last.get("type") == "response.output_text.delta": text += last.get("delta", "")
if not events: print("== raw responses: no events; body:", raw[:500])
print("== raw responses events:", ", ".join(f"{k} x{v}" for k, v in events.items()))
r = (last or {}).get("response", {})
print(f"== last event {last and last.get('type')}: status {r.get('status')}, usage {r.get('usage')}, "
      f"error {r.get('error')}, text {text!r}")
sys.exit(0 if (last or {}).get("type") == "response.completed" else 1)
EOF
[ "$raw_ok" = 1 ] || fail_with_log "a raw image request did not stream to a finish"

# ---- 6. promptgauge's vision bench, both protocols ------------------------------------------
"$PG" init "$WORK/bench" --task vision >/dev/null
fail=0
for proto in openai-chat openai-responses; do
  short=${proto#openai-}
  log "promptgauge run --protocol $proto"
  rc=0
  t0=$SECONDS
  "$PG" run "$WORK/bench/promptgauge.yaml" --base-url "$BASE/v1" --model "$MODEL_ID" \
    --protocol "$proto" --no-store --limit "$LIMIT" --concurrency 1 \
    --out "$WORK/reports/$short" -v >"$WORK/$short.out" 2>&1 || rc=$?
  log "promptgauge exit $rc in $((SECONDS - t0)) s; its last lines:"
  tail -6 "$WORK/$short.out" | cut -c1-240 >&2
  run_dir=$(ls -d "$WORK/reports/$short"/*/ 2>/dev/null | head -1)
  if [ -z "$run_dir" ]; then
    cat "$WORK/$short.out" >&2; echo "$proto: no run folder (exit $rc)"; fail=1; continue
  fi
  "$PY" - "$proto" "$rc" "$run_dir" "$WORK/bench/prompts" <<'EOF' || fail=1
import collections, glob, json, os, sys
proto, rc, run, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
# The variants that send the image: every prompt file without `files: none`.
no_files = {os.path.basename(p)[:-5] for p in glob.glob(prompts + "/*.yaml")
            if any(l.strip().startswith("files: none") for l in open(p))}
s = json.load(open(run + "summary.json"))
bad, per = [], collections.defaultdict(list)
statuses = collections.Counter()
for line in open(run + "results.jsonl"):
    r = json.loads(line)
    v, files = r.get("variant"), r.get("files") or []
    for a in r.get("attempts", []):
        statuses[a.get("status")] += 1
    u = r.get("usage") or {}
    real = r.get("status") == "graded" and not u.get("estimated")
    per[v].append((r.get("status"), r.get("finish_reason"), u.get("prompt_tokens") if real else None,
                   len(files), len(r.get("attempts", []))))
    if r.get("status") != "graded":
        bad.append(f"case {r.get('case_id')} {v}: status {r.get('status')}: {r.get('error') or r.get('outcome')}")
    if v not in no_files and not any(f.get("kind") == "png" for f in files):
        bad.append(f"case {r.get('case_id')} {v}: sends the image but its record lists no files")
    if v in no_files and files:
        bad.append(f"case {r.get('case_id')} {v}: `files: none` yet its record lists files")
    if r.get("finish_reason") is None:
        bad.append(f"case {r.get('case_id')} {v}: no finish_reason")
# The server expands each image into 16 <image> tokens: plain (image) and no-image have the
# same text, so a plain record with no more prompt tokens than no-image had its image dropped.
tok = lambda v: [row[2] for row in per.get(v, []) if row[2] is not None]
if "plain" in per and no_files:
    with_img, without = tok("plain"), tok(sorted(no_files)[0])
    if with_img and without:
        extra = min(with_img) - max(without)
        print(f"{proto}: the image adds {extra} prompt tokens (plain vs {sorted(no_files)[0]})")
        if extra <= 0:
            bad.append("the image-sending variant has no more prompt tokens than the one without: image dropped?")
planned, done, failed = s["run"]["jobs_planned"], s["jobs_finished"], s["jobs_failed"]
print(f"{proto}: jobs {done}/{planned}, failed {failed}, HTTP statuses of attempts {dict(statuses)}, "
      f"promptgauge exit {rc}")
for v, rows in per.items():
    tag = "no image" if v in no_files else "image"
    print(f"   {v:9} ({tag:8}) status/finish/prompt_tokens/files/attempts: "
          + "; ".join("/".join(str(x) for x in row) for row in rows))
for e in bad:
    print("   BAD", e)
ok = rc == 0 and failed == 0 and done == planned and not bad
sys.exit(0 if ok else 1)
EOF
done

if [ "$fail" != 0 ]; then
  fail_with_log "some jobs failed; see $WORK/*.out and $WORK/reports"
fi
grep -iE "error|exception|traceback|warn|ignoring" "$WORK/server.log" | sort | uniq -c | sort -rn | head -8 \
  | sed 's/^/   server log: /' | cut -c1-260 >&2 || true
STATUS=0
echo "ok: every image request (raw curl and promptgauge, chat completions and Responses) streamed to a finish in $((SECONDS - T_START)) s"
