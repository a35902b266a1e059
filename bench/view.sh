#!/usr/bin/env bash
# view's figures for docs/dev/performance.md (l, m, n, p). Not part of `cargo test`.
#
#   bench/view.sh               10,000 recorded runs; a 200,000-job run
#   RUNS=1000 JOBS=20000 bench/view.sh   smaller
#
# l. the runs list over RUNS recorded runs (copies of one small run, indexed into the store);
# m. a JOBS-job run's pages: its report, its answers (the first read builds the index,
#    later ones use it), a filter, a word search, a job; its matrix (a page, a far page,
#    filtered, words);
# n. the server's peak RSS while a JOBS-job run streams into it, its live page following;
# p. what the server holds after a second JOBS-job run, the two compared and the history.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
PG="$PWD/target/release/promptgauge"
WORK=$(mktemp -d)
# shellcheck source=bench/mock.sh
source bench/mock.sh
RUNS=${RUNS:-10000}
JOBS=${JOBS:-200000}

# Seconds one GET takes (the whole answer read).
took() { curl -s -o /dev/null -w '%{time_total}' "$1"; }

# Starts `view` in DIR on PORT; its PID in $VIEW.
start_view() { # dir port
  cd "$1"
  # Loopback, one user: the timings are of the pages, not of the token.
  "$PG" view --no-token --port "$2" > "$WORK/view.$2.out" 2>&1 &
  VIEW=$!
  echo "$VIEW" >> "$WORK/mock.pids"
  cd - > /dev/null
  for _ in $(seq 100); do
    grep -q "promptgauge view:" "$WORK/view.$2.out" 2>/dev/null && break
    sleep 0.05
  done
}

URL=$(start_mock)
mkdir -p "$WORK/l"
cd "$WORK/l"
python3 - "$JOBS" <<'PY'
import json, sys
n = int(sys.argv[1]) // 2
with open("cases.jsonl", "w") as f:
    for i in range(n):
        text = f"answer number {i} is here"
        f.write(json.dumps({"id": f"c{i}", "vars": {"text": text}, "expected": text, "tags": ["even" if i % 2 == 0 else "odd"]}) + "\n")
PY
printf 'Echo: {{ text }}' > a.txt
printf 'Echo: {{ text }}' > b.md
cat > bench.yaml <<YAML
name: perf
cases: cases.jsonl
variants: [a.txt, b.md]
grade: { kind: exact, case_sensitive: true }
limits: { concurrency: 32 }
YAML

# l. RUNS copies of a 20-job run, indexed.
"$PG" run bench.yaml --quiet --limit 10 --model perf --base-url "$URL" > /dev/null
one=$(ls -d reports/perf-* | head -1)
mkdir -p copies
python3 - "$one" "$RUNS" <<'PY'
import json, os, shutil, sys
src, n = sys.argv[1], int(sys.argv[2])
record = json.load(open(os.path.join(src, "run.json")))
for i in range(n):
    d = f"copies/run-{i:05d}"
    shutil.copytree(src, d)
    r = dict(record)
    r["run_id"] = f"perf-copy-{i:05d}"
    r["started_at"] = f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
    json.dump(r, open(os.path.join(d, "run.json"), "w"))
PY
t0=$(date +%s.%N)
"$PG" index copies --store reports/promptgauge.db > /dev/null 2>&1
t1=$(date +%s.%N)
echo "l. indexed $RUNS runs in $(echo "$t1 - $t0" | bc) s"
start_view "$WORK/l" 8751
B=http://127.0.0.1:8751
echo "l. runs list (newest 500 of $RUNS): first $(took "$B/") s, again $(took "$B/") s"
echo "l. all $RUNS as JSON: $(took "$B/api/runs?limit=10000") s"
echo "l. filtered (q=copy-0999, status=complete): $(took "$B/?q=copy-0999&status=complete") s"

# m. a JOBS-job run.
t0=$(date +%s.%N)
"$PG" run bench.yaml --quiet --model perf --base-url "$URL" > /dev/null || true
t1=$(date +%s.%N)
big=$(curl -s "$B/api/runs?bench=perf&limit=10000" | python3 -c "import json,sys; r=[x for x in json.load(sys.stdin) if x['jobs_planned']>20]; print(r[0]['run_id'])")
echo "m. the $JOBS-job run took $(echo "$t1 - $t0" | bc) s; journal $(du -m "$(ls -d reports/perf-* | tail -1)/results.jsonl" | cut -f1) MB"
echo "m. report page: $(took "$B/runs/$big/") s ($(curl -s "$B/runs/$big/" | wc -c) bytes)"
echo "m. answers, first (index built): $(took "$B/runs/$big/answers") s"
echo "m. answers, again: $(took "$B/runs/$big/answers") s"
echo "m. answers, page 2,000 of 50: $(took "$B/runs/$big/answers?offset=100000&limit=50") s"
echo "m. answers, variant b, odd tag, failed: $(took "$B/runs/$big/answers?variant=b&tag=odd&status=failed") s"
echo "m. answers, arms disagree: $(took "$B/runs/$big/answers?disagreeing=1") s"
echo "m. answers, words (c12345): $(took "$B/runs/$big/answers?q=c12345") s"
echo "m. a job's page: $(took "$B/runs/$big/jobs/150000") s"
echo "m. matrix, first page: $(took "$B/runs/$big/matrix") s"
echo "m. matrix, page 1,000 of 50 cases: $(took "$B/runs/$big/matrix?offset=50000") s"
echo "m. matrix, arms disagree, odd tag: $(took "$B/runs/$big/matrix?disagreeing=1&tag=odd") s"
echo "m. matrix, words (c12345): $(took "$B/runs/$big/matrix?q=c12345") s"
echo "m. view's RSS after: $(grep VmRSS /proc/"$VIEW"/status | awk '{print $2/1024 " MB"}'), peak $(grep VmHWM /proc/"$VIEW"/status | awk '{print $2/1024 " MB"}')"

# p. a second JOBS-job run, the two compared, the bench's history: what view holds after.
"$PG" run bench.yaml --quiet --model perf2 --base-url "$URL" > /dev/null || true
second=$(curl -s "$B/api/runs?bench=perf&limit=10000" | python3 -c "import json,sys; r=[x for x in json.load(sys.stdin) if x['jobs_planned']>20]; print(r[0]['run_id'])")
echo "p. compare of two $JOBS-job runs: $(took "$B/compare?run=$big&run=$second") s"
echo "p. the bench's history: $(took "$B/history/perf") s"
echo "p. view's RSS after: $(grep VmRSS /proc/"$VIEW"/status | awk '{print $2/1024 " MB"}'), peak $(grep VmHWM /proc/"$VIEW"/status | awk '{print $2/1024 " MB"}')"
kill "$VIEW" 2>/dev/null || true

# n. the server while a JOBS-job run streams in, its live page following.
start_view "$WORK/l" 8752
B=http://127.0.0.1:8752
SLOW=$(start_mock --first-token-delay 2ms)
"$PG" run bench.yaml --quiet --model perf --base-url "$SLOW" > /dev/null 2>&1 &
RUN=$!
name=""
for _ in $(seq 200); do
  name=$(curl -s "$B/api/live" | python3 -c "import json,sys; r=json.load(sys.stdin); print(r[0]['name'] if r else '')")
  [ -n "$name" ] && break
  sleep 0.05
done
curl -s -N "$B/api/live/$name/events" > "$WORK/events" &
EVENTS=$!
( while kill -0 "$RUN" 2>/dev/null; do curl -s -o /dev/null "$B/api/live"; sleep 0.5; done ) &
wait "$RUN" || true
sleep 1
kill "$EVENTS" 2>/dev/null || true
echo "n. live: $(grep -c '^event: progress' "$WORK/events") progress events, last done=$(grep -o '"done":[0-9]*' "$WORK/events" | tail -1)"
echo "n. view's peak RSS while the run streamed in: $(grep VmHWM /proc/"$VIEW"/status | awk '{print $2/1024 " MB"}'); CPU $(ps -o cputime= -p "$VIEW")"
kill "$VIEW" 2>/dev/null || true
