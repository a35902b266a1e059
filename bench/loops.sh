#!/usr/bin/env bash
# Figure s of docs/dev/performance.md: agent loops. 1,000 jobs of a 4-step loop (three
# tool calls, then the answer) against 4,000 single-step jobs, both on the zero-latency
# simulator in another process (`promptgauge mock --agent-steps 3`): the client's CPU per
# step over a single-step job's, and peak RSS. Not part of `cargo test`.
#
#   bench/loops.sh            JOBS=1000
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
PG="$PWD/target/release/promptgauge"
WORK=$(mktemp -d)
# shellcheck source=bench/mock.sh
source bench/mock.sh
JOBS=${JOBS:-1000}

make() { # dir cases tools?
  mkdir -p "$1"
  python3 - "$1" "$2" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
with open(f"{d}/cases.jsonl", "w") as f:
    for i in range(n):
        text = f"answer number {i} is here"
        f.write(json.dumps({"id": f"c{i}", "vars": {"text": text}, "expected": text}) + "\n")
PY
  printf 'Echo: {{ text }}' > "$1/a.txt"
  printf 'Echo: {{ text }}' > "$1/b.md"
  printf 'name: perf\ncases: cases.jsonl\nvariants: [a.txt, b.md]\ngrade: { kind: exact, case_sensitive: true }\nlimits: { concurrency: 32 }\n' > "$1/bench.yaml"
  if [ "${3:-}" = tools ]; then
    printf 'tools:\n  - name: step\n    default: ok\nloop: { max_turns: 8, max_tool_calls: 8 }\n' >> "$1/bench.yaml"
  fi
}

timed_run() { # dir url
  /usr/bin/time -f "%U %S %M" -o "$WORK/time" \
    "$PG" run "$1/bench.yaml" --base-url "$2" --model m --quiet --no-store --out "$1/reports" > /dev/null
  cat "$WORK/time"
}

make "$WORK/single" $((JOBS * 2))
make "$WORK/loop" $((JOBS / 2)) tools
URL=$(start_mock --agent-steps 3)
echo "promptgauge $("$PG" --version | awk '{print $2}') on $(nproc) cores, $(uname -m)"
read -r user_s sys_s rss_s < <(timed_run "$WORK/single" "$URL")
read -r user_l sys_l rss_l < <(timed_run "$WORK/loop" "$URL")
steps=$((JOBS * 4))
cpu_s=$(echo "$user_s + $sys_s" | bc)
cpu_l=$(echo "$user_l + $sys_l" | bc)
calls=$(grep -o '"tool":"step"' "$WORK"/loop/reports/*/results.jsonl | wc -l)
printf 's. agent loops       %d jobs of 4 steps (%d tool calls journaled) against %d single-step jobs: client CPU %.2f s against %.2f s → %+.3f ms a step over a single-step job (target ≤ 0.1); peak RSS %.1f MB against %.1f MB\n' \
  "$JOBS" "$calls" "$steps" "$cpu_l" "$cpu_s" "$(echo "($cpu_l - $cpu_s) * 1000 / $steps" | bc -l)" \
  "$(echo "$rss_l / 1024" | bc -l)" "$(echo "$rss_s / 1024" | bc -l)"
