#!/usr/bin/env bash
# `run --best` end to end on the simulator, against the seeded simulation
# (crates/stats/benches/best_arm.rs; docs/dev/statistics.md §9): a bench of N cases and K
# prompts, the best GAP points ahead of the others at 70%, searched with SEEDS seeds; prints
# how often one arm was named, how often the answer was right, and the share of the bench's
# jobs sent, to set beside the simulation's row for the same K, N and gap.
#
#   scripts/best-e2e.sh                    # K=8, N=300, the best 15 points ahead, 20 seeds
#   K=8 N=300 GAP=0 SEEDS=20 scripts/best-e2e.sh
#   PG=target/release/promptgauge scripts/best-e2e.sh   # a build of your own (no build)
set -euo pipefail
cd "$(dirname "$0")/.."
K=${K:-8}
N=${N:-300}
GAP=${GAP:-15}
SEEDS=${SEEDS:-20}
if [ -z "${PG:-}" ]; then
  cargo build --release --quiet
  PG="$PWD/target/release/promptgauge"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK" "$K" "$N" "$GAP" <<'PY'
import json, sys
d, k, n, gap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
with open(f"{d}/cases.jsonl", "w") as f:
    for i in range(n):
        a, b = i % 97 + 3, i // 97 + 11
        f.write(json.dumps({"id": f"s-{i}", "vars": {"q": f"What is {a} + {b}?"}, "expected": str(a + b)}) + "\n")
variants = []
for v in range(k):
    acc = 70 + (gap if v == 0 else 0)
    with open(f"{d}/v{v}.yaml", "w") as f:
        f.write(f"name: v{v}\nmessages:\n  - {{ role: system, content: \"Answer with a number only (simulated accuracy {acc}%).\" }}\n  - {{ role: user, content: \"{{{{ q }}}}\" }}\n")
    variants.append(f"  - v{v}.yaml\n")
with open(f"{d}/bench.yaml", "w") as f:
    f.write("name: e2e\ncases: cases.jsonl\nvariants:\n" + "".join(variants) + "grade: { kind: number }\nlimits: { concurrency: 12 }\n")
PY
cd "$WORK"
for seed in $(seq 1 "$SEEDS"); do
  "$PG" run bench.yaml --best --seed "$seed" --no-store --quiet --out "r$seed" >/dev/null 2>&1 || true
done
python3 - "$WORK" "$K" "$N" "$GAP" "$SEEDS" <<'PY'
import glob, json, sys
d, k, n, gap, seeds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
one = right = 0
share = 0.0
for path in glob.glob(f"{d}/r*/*/summary.json"):
    best = json.load(open(path))["sequential"]["best"]
    named = best["named"]
    decided = best["outcome"] in ("one", "within_epsilon")
    one += decided and len(named) == 1
    good = lambda a: gap <= 2 or a == "v0"
    right += all(map(good, named)) if decided else any(map(good, named))
    share += best["jobs_sent"] / best["jobs_bench"]
print(f"K={k} N={n} gap={gap} seeds={seeds}: one arm named {100*one/seeds:.0f}%, right {100*right/seeds:.0f}%, jobs {100*share/seeds:.1f}% of the bench's")
PY
