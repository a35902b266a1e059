#!/bin/bash
# Submit a sharded run: the shard array, then its merge, which waits for every task to
# end however it ended (afterany). Extra arguments go to the array's sbatch, e.g.
#   slurm/submit.sh --array=1-16%8 --partition=cpu
# Export PROMPTGAUGE_STORE (and the API key, BENCH, ...) first: sbatch passes them on.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${PROMPTGAUGE_STORE:?set PROMPTGAUGE_STORE to the postgres:// URL of the history store}"

array=$(sbatch --parsable "$@" "$here/shard.sbatch")
array=${array%%;*}                  # --parsable prints "jobid[;cluster]"
run_id=${RUN_ID:-$array}
merge=$(sbatch --parsable --dependency="afterany:$array" --export="ALL,RUN_ID=$run_id" \
  "$here/merge.sbatch")
merge=${merge%%;*}
echo "run $run_id: shards in array job $array, merge in job $merge"
echo "verdict: sacct -j $merge --format=JobID,State,ExitCode  (ExitCode 0:0 ok, 1:0 gate failed, 3:0 incomplete)"
