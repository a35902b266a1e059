#!/usr/bin/env bash
# The saving of waves (`run --until-decided --batch`, docs/guide/batch.md, "Waves"), measured on
# the simulator over seeded case orders: for each seed, the jobs (and dollars) waves send,
# against one batch of the fixed design, one batch of every case, and streaming with and
# without --until-decided. Not part of `cargo test`; figures in docs/dev/performance.md.
#
#   bench/waves.sh            10 seeds, 600 cases × 3 variants
#   SEEDS=3 bench/waves.sh    fewer
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
PG="$PWD/target/release/promptgauge"
WORK=$(mktemp -d)
# shellcheck source=bench/mock.sh
source bench/mock.sh
URL=$(start_mock)
SEEDS=${SEEDS:-10}

# The arithmetic bench of the tests: "careful" is about 11 points better than "plain" on
# the simulator, "polite" about the same.
python3 - "$WORK" <<'PY'
import sys
d = sys.argv[1]
with open(f"{d}/cases.jsonl", "w") as f:
    for i in range(1, 601):
        f.write('{"id": "add-%03d", "vars": {"question": "What is %d + %d?"}, "expected": "%d"}\n' % (i, i, i, 2 * i))
open(f"{d}/plain.txt", "w").write("{{ question }}")
open(f"{d}/careful.yaml", "w").write('name: careful\nmessages:\n  - { role: system, content: "Think step by step." }\n  - { role: user, content: "{{ question }}" }\n')
open(f"{d}/polite.txt", "w").write("Please answer: {{ question }}")
PY

echo "seed  waves: jobs \$   | decided, streamed: jobs \$ | fixed design, one batch: jobs \$ | every case, one batch: jobs \$"
python_rows=()
for seed in $(seq 1 "$SEEDS"); do
  cat > "$WORK/bench.yaml" <<YAML
name: waves
cases: cases.jsonl
variants: [plain.txt, careful.yaml, polite.txt]
grade: { kind: number }
params: { temperature: 0, max_tokens: 100 }
price: { input_per_mtok: 1.0, output_per_mtok: 2.0, batch_discount: 0.5 }
sequential: { seed: $seed }
YAML
  rm -rf "$WORK/b" "$WORK/s"
  "$PG" run "$WORK/bench.yaml" --base-url "$URL" --model m --quiet --no-store --out "$WORK/b" \
    --until-decided --batch --batch-poll 10ms > /dev/null 2>&1 || true
  "$PG" run "$WORK/bench.yaml" --base-url "$URL" --model m --quiet --no-store --out "$WORK/s" \
    --until-decided > /dev/null 2>&1 || true
  row=$(python3 - "$WORK" <<'PY'
import glob, json, sys
d = sys.argv[1]
def summary(sub):
    return json.load(open(glob.glob(f"{d}/{sub}/*/summary.json")[0]))
b, s = summary("b"), summary("s")
def spent(x):
    return sum(v.get("spent_usd") or 0 for v in x["variants"])
seq = b["sequential"]
# Jobs sent: every record in the journal (waves send whole waves; what a decision did
# not need is still paid for).
jobs_b = b["jobs_finished"]
jobs_s = s["jobs_finished"]
per_job_streamed = spent(s) / jobs_s
fixed = seq["jobs_fixed_design"]
every = 600 * 3
print(f'{jobs_b} {spent(b):.5f} {jobs_s} {spent(s):.5f} {fixed} {fixed * per_job_streamed / 2:.5f} {every} {every * per_job_streamed / 2:.5f}')
PY
)
  read -r jb cb js cs jf cf je ce <<< "$row"
  printf '%4d  %5d %.5f   | %5d %.5f             | %5d %.5f                 | %5d %.5f\n' \
    "$seed" "$jb" "$cb" "$js" "$cs" "$jf" "$cf" "$je" "$ce"
  python_rows+=("$row")
done
printf '%s\n' "${python_rows[@]}" | python3 -c '
import sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
n = len(rows)
mean = [sum(r[i] for r in rows) / n for i in range(8)]
print(f"mean  waves {mean[0]:.0f} jobs ${mean[1]:.5f}; decided, streamed {mean[2]:.0f} jobs ${mean[3]:.5f}; "
      f"fixed design by batch {mean[4]:.0f} jobs ${mean[5]:.5f}; every case by batch {mean[6]:.0f} jobs ${mean[7]:.5f}")
print(f"waves cost {mean[1] / mean[5]:.0%} of one batch of the fixed design, {mean[1] / mean[7]:.0%} of one batch of every case, "
      f"{mean[1] / mean[3]:.0%} of streaming until decided, {mean[1] / (mean[7] * 2):.0%} of streaming every case")
'
