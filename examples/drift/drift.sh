#!/usr/bin/env bash
# Replays a small CI history on the built-in simulator, into a history store of its own:
# four runs on main, a pull request that shortens the prompt (and loses accuracy), the gate
# that catches it against main's newest run, and the history that shows the step.
#
#   examples/drift/drift.sh            (needs promptgauge on PATH, or PG=path/to/promptgauge)
set -euo pipefail
cd "$(dirname "$0")"
PG=${PG:-promptgauge}
out=$(mktemp -d)
trap 'cp prompts/careful.txt prompts/answer.txt' EXIT

run() { # branch, extra flags…
  local branch=$1
  shift
  GITHUB_REF_NAME=$branch "$PG" run drift.yaml --out "$out" --quiet "$@"
}

cp prompts/careful.txt prompts/answer.txt
for _ in 1 2 3 4; do run main > /dev/null; done

echo "== a pull request shortens the prompt; CI gates it against main's newest run"
cp prompts/terse.txt prompts/answer.txt
set +e
GITHUB_HEAD_REF=shorter-prompt run 42/merge --baseline latest:main --fail-if-worse
echo "exit code: $? (1: a gate failed)"
set -e

echo
echo "== the history of main and the pull request"
"$PG" history --store "$out/promptgauge.db"
echo
echo "history.html and the run folders: $out"
