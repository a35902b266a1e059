#!/usr/bin/env bash
# Figure r of docs/dev/performance.md: files in cases. A run whose every case attaches a
# 1 MB image (its own), against the same run with no image, on the zero-latency simulator
# in another process: the client's peak RSS and CPU per job. Not part of `cargo test`.
#
#   bench/files.sh               1,000 cases × 2 variants × 5 repeats = 10,000 jobs
#                                (1 GB of images in a scratch folder, removed at the end)
#   CASES=200 bench/files.sh     a smaller run
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
PG="$PWD/target/release/promptgauge"
WORK=$(mktemp -d)
# shellcheck source=bench/mock.sh
source bench/mock.sh
N=${CASES:-1000}

# Two benches over the same cases, one whose cases attach their image. Each image is a real
# PNG of 1 MB: 600 × 560 pixels of noise (which no compressor shrinks) and a tEXt chunk.
python3 - "$WORK" "$N" <<'PY'
import json, os, struct, sys, zlib
work, n = sys.argv[1], int(sys.argv[2])
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
os.makedirs(f"{work}/files/img")
os.makedirs(f"{work}/text")
w, h = 600, 560
for i in range(n):
    rows = b"".join(b"\0" + os.urandom(w * 3) for _ in range(h))
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"tEXt", f"Comment\0picture {i}".encode()) + chunk(b"IDAT", zlib.compress(rows, 1))
           + chunk(b"IEND", b""))
    with open(f"{work}/files/img/p{i}.png", "wb") as f:
        f.write(png)
for kind in ("files", "text"):
    with open(f"{work}/{kind}/cases.jsonl", "w") as f:
        for i in range(n):
            case = {"id": f"c{i}", "vars": {"text": f"answer number {i} is here"}, "expected": f"answer number {i} is here"}
            if kind == "files":
                case["files"] = {"photo": f"img/p{i}.png"}
            f.write(json.dumps(case) + "\n")
    for v in ("a.txt", "b.md"):
        with open(f"{work}/{kind}/{v}", "w") as f:
            f.write("Echo: {{ text }}")
    with open(f"{work}/{kind}/bench.yaml", "w") as f:
        f.write("name: perf\ncases: cases.jsonl\nvariants: [a.txt, b.md]\nrepeats: 5\n"
                "grade: { kind: exact }\nlimits: { concurrency: 32 }\n")
PY
size=$(du -sm "$WORK/files/img" | awk '{print $1}')
URL=$(start_mock)

# Runs a bench; prints "wall_s user_s sys_s maxrss_kb".
timed_run() { # dir
  local start end
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S %M" -o "$WORK/time" \
    "$PG" run "$1/bench.yaml" --base-url "$URL" --model m --quiet --no-store --out "$1/reports" > /dev/null || true
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $(cat "$WORK/time")"
}

jobs=$((N * 10))
echo "promptgauge $("$PG" --version | awk '{print $2}') on $(nproc) cores, $(uname -m): $jobs jobs, $N images ($size MB)"
read -r wall_t user_t sys_t rss_t < <(timed_run "$WORK/text")
read -r wall_f user_f sys_f rss_f < <(timed_run "$WORK/files")
printf 'r. files in cases    text only: peak RSS %.1f MB, %.3f ms CPU a job, %.1f s\n' \
  "$(echo "$rss_t / 1024" | bc -l)" "$(echo "($user_t + $sys_t) * 1000 / $jobs" | bc -l)" "$wall_t"
printf '                     a 1 MB image a case: peak RSS %.1f MB (%.2f× text only; target < 2×), %.3f ms CPU a job, %.1f s\n' \
  "$(echo "$rss_f / 1024" | bc -l)" "$(echo "$rss_f / $rss_t" | bc -l)" \
  "$(echo "($user_f + $sys_f) * 1000 / $jobs" | bc -l)" "$wall_f"
sent=$(curl -s "${URL%/v1}/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["files"])')
echo "                     the simulator read $sent files"
