#!/bin/bash
# Run the bench sharded on Kubernetes, then merge: create the shard Job, wait until it has
# ended (Complete or Failed: a failed shard still merges, and the merge then says the run
# is incomplete), create the merge Job, wait for it, print its log and exit with
# promptgauge merge's exit code (0 ok, 1 a gate failed, 2 nothing to merge, 3 incomplete;
# 125: the merge pod never ran).
#
# Usage: kubernetes/submit.sh [RUN_ID]
#   RUN_ID  default triage-<UTC time>: a new id per submission, so two submissions never
#           share a shard folder. Give an old id (after `kubectl delete job -l
#           promptgauge/run-id=ID`) to continue that run: each shard resumes its folder.
# Once per namespace first: the ConfigMap, the PVC and the two Secrets (README.md).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
run_id=${1:-triage-$(date -u +%Y%m%d-%H%M%S)}
if [[ ! $run_id =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || (( ${#run_id} > 50 )); then
  echo "RUN_ID must be lowercase letters, digits and '-', at most 50 characters: $run_id" >&2
  exit 2
fi
poll=${POLL_SECONDS:-20}

render() { sed "s/__RUN_ID__/$run_id/g" "$here/$1"; }

# Prints Complete or Failed once the Job has ended; fails while it runs. (`kubectl wait
# --for=condition=complete` alone would wait forever for a Job that failed.)
ended() {
  kubectl get job "$1" \
    -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{"\n"}{end}' |
    grep -m1 -x -E 'Complete|Failed'
}
wait_ended() {
  local state
  until state=$(ended "$1"); do sleep "$poll"; done
  echo "job/$1: $state" >&2
}

render bench-job.yaml | kubectl create -f -
echo "run $run_id: waiting for job/$run_id-shards to end" >&2
wait_ended "$run_id-shards"

render merge-job.yaml | kubectl create -f -
wait_ended "$run_id-merge"
kubectl logs "job/$run_id-merge" || true
code=$(kubectl get pods -l "batch.kubernetes.io/job-name=$run_id-merge" \
  -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.exitCode}')
echo "run $run_id: promptgauge merge exited ${code:-(never ran)}" >&2
exit "${code:-125}"
