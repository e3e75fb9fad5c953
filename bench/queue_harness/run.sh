#!/usr/bin/env bash
# The portable PostgreSQL queue benchmark (hardbyte/postgresql-job-queue-benchmarking) at a
# pinned commit, patched to run without a container engine, for aios-ledger and Procrastinate
# side by side: a clean baseline at saturation, the five chaos scenarios and three pressure
# scenarios, each adapter on a native cluster of its own that the harness may restart.
#
#   bench/queue_harness/run.sh [OUT]      # OUT: bench/results/queue-harness/<today> by default
#
# Environment:
#   QUEUE_HARNESS_SOURCE  a git URL or git directory of the harness (default: GitHub)
#   QUEUE_HARNESS_WORK    scratch folder: the harness's copy, its venv, the clusters
#   QUEUE_HARNESS_PYTHON  a Python 3.12 (default: the newest 3.12 under ~/.pyenv/versions)
#   QUEUE_HARNESS_SYSTEMS adapters to run (default "aios-ledger procrastinate")
#   QUEUE_HARNESS_CELLS   cells to run (default: all, see CELLS below)
#   QUEUE_HARNESS_PARALLEL 1: the adapters' cell sequences run at the same time, each on its
#                          own cluster and port (the machine's cores shared between them)
# The harness's own scenarios last hours; the phases below keep each one's shape (warmup,
# baseline, stress, recovery) at minutes, as its own full sweep (scripts/run_full_sweep.sh)
# shortens them with --phase.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
pin=93677cab92dad89ee9eccb0d6e113893de43cbe6
source_repo="${QUEUE_HARNESS_SOURCE:-https://github.com/hardbyte/postgresql-job-queue-benchmarking.git}"
work="${QUEUE_HARNESS_WORK:-/tmp/aios-queue-harness}"
out="${1:-$root/bench/results/queue-harness/$(date -u +%Y-%m-%d)}"
systems=(${QUEUE_HARNESS_SYSTEMS:-aios-ledger procrastinate})
python312="${QUEUE_HARNESS_PYTHON:-$(ls -d "$HOME"/.pyenv/versions/3.12.* 2>/dev/null | sort -V | tail -1)/bin/python}"
harness="$work/harness"
mkdir -p "$work" "$out"
rm -rf "$work/runs"

# -- the harness at the pinned commit, patched ---------------------------------------------
if [[ -d "$source_repo" ]]; then
  git_dir="$source_repo"
else
  git_dir="$work/source.git"
  [[ -d "$git_dir" ]] || git clone --quiet --bare "$source_repo" "$git_dir"
fi
rm -rf "$harness" && mkdir -p "$harness"
# Everything but its published results (large, and not needed to run it).
# (A partial mirror lacks those blobs, and git archive says so on stderr: silenced.)
git --git-dir "$git_dir" ls-tree --name-only "$pin" | grep -vx results \
  | xargs git --git-dir "$git_dir" archive "$pin" 2>/dev/null | tar -x -C "$harness"
[[ -f "$harness/bench.py" ]] || { echo "no harness at $pin in $git_dir" >&2; exit 1; }
patch --quiet -p1 -d "$harness" < "$here/native-postgres.patch"
mkdir -p "$harness/aios-ledger-bench"
cp "$here/adapter.json" "$harness/aios-ledger-bench/adapter.json"

# -- its venv: its own dependencies and the Procrastinate adapter's pins ----------------------
if [[ ! -x "$work/venv/bin/python" ]]; then
  "$python312" -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet "psycopg[binary]==3.3.3" "procrastinate==3.8.1" \
    "matplotlib>=3.9" "pandas>=2.2" "numpy>=2.0" "pydantic>=2"
fi

free_port() { "$work/venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# -- the cells: name, replicas, a timeout in seconds, then the harness's arguments -----------
warm="--phase warmup=warmup:15s --phase baseline=clean:45s"
CELLS=(
  "baseline|1|600|--producer-mode depth-target --target-depth 4000 --producer-rate 50000 --worker-count 32 --phase warmup=warmup:20s --phase clean=clean:60s"
  "chaos_crash_recovery|2|600|--producer-rate 300 $warm --phase kill=kill-worker(instance=0):30s --phase restart=start-worker(instance=0):30s --phase recovery=clean:60s"
  "chaos_repeated_kills|2|600|--producer-rate 300 $warm --phase repeated=repeated-kill(instance=0,period=20s):60s --phase recovery=clean:60s"
  "chaos_pg_backend_kill|1|600|--producer-rate 600 $warm --phase kills=pg-backend-kill(rate=2):30s --phase recovery=clean:60s"
  "chaos_pool_exhaustion|1|600|--producer-rate 600 $warm --phase exhaustion=pool-exhaustion(idle_conns=300):30s --phase recovery=clean:60s"
  "chaos_postgres_restart|1|600|--producer-rate 600 $warm --phase restart=postgres-restart:30s --phase recovery=clean:60s"
  "idle_in_tx_saturation|1|600|--producer-rate 800 --worker-count 32 $warm --phase idle_1=idle-in-tx:60s --phase recovery_1=recovery:60s"
  "sustained_high_load|1|600|--producer-rate 800 --worker-count 32 $warm --phase pressure_1=high-load:60s --phase recovery_1=clean:60s"
  "active_readers|1|600|--producer-rate 800 --worker-count 32 $warm --phase readers_1=active-readers:60s --phase recovery_1=clean:60s"
  "event_delivery_burst|1|600|--producer-rate 1200 --worker-count 64 $warm --phase pressure_1=high-load:90s --phase recovery_1=clean:60s"
)
wanted=" ${QUEUE_HARNESS_CELLS:-${CELLS[*]%%|*}} "

run_system() {
  local system="$1" port; port="$(free_port)"
  local cluster="$work/pg-$system"
  for cell in "${CELLS[@]}"; do
    IFS='|' read -r name replicas limit args <<<"$cell"
    [[ "$wanted" == *" $name "* ]] || continue
    local log="$out/logs/$name-$system.log"
    mkdir -p "$out/logs"
    echo "[run] $(date -u +%H:%M:%S) $name $system" >&2
    local rc=0
    # shellcheck disable=SC2086
    (cd "$harness" && env BENCH_PG_CONTROL="$here/pg.sh" BENCH_PG_PORT="$port" QH_PG_DIR="$cluster" \
      QH_PG_CONF="$harness/postgres.conf" BENCH_NATIVE_ADAPTERS=1 KEEP_DB=1 \
      AIOS_LEDGER_PYTHON="$root/.venv/bin/python" AIOS_LEDGER_ROOT="$root" \
      timeout --signal=KILL "$limit" "$work/venv/bin/python" bench.py run --systems "$system" \
      --replicas "$replicas" --skip-build --no-wait-events $args) >"$log" 2>&1 || rc=$?
    local run_dir; run_dir="$(grep -oE "$harness/results/[A-Za-z0-9_]+-[0-9TZ]+-[a-f0-9]+" "$log" | tail -1 || true)"
    mkdir -p "$out/$name" "$work/runs/$name"
    if [[ -n "$run_dir" ]]; then echo "$run_dir" >"$work/runs/$name/$system"; fi
    # What the database holds once the run ends: every job by state, beside the harness's
    # own rate-based estimate of jobs lost.
    "$work/venv/bin/python" "$here/count_jobs.py" "$system" "$port" "$rc" "$limit" \
      >"$out/$name/jobs-$system.json" || true
    BENCH_PG_PORT="$port" QH_PG_DIR="$cluster" QH_PG_CONF="$harness/postgres.conf" "$here/pg.sh" down
  done
}

if [[ "${QUEUE_HARNESS_PARALLEL:-0}" == 1 ]]; then
  for system in "${systems[@]}"; do run_system "$system" & done
  wait
else
  for system in "${systems[@]}"; do run_system "$system"; done
fi

# One report per cell with the adapters side by side (the harness's `combine`): its summary,
# manifest and the throughput and claim-latency plots are kept.
for cell_runs in "$work"/runs/*/; do
  name="$(basename "$cell_runs")"
  dirs=()
  for system in "${systems[@]}"; do
    if [[ -f "$cell_runs/$system" && -f "$(cat "$cell_runs/$system")/summary.json" ]]; then
      dirs+=("$(cat "$cell_runs/$system")")
    fi
  done
  [[ ${#dirs[@]} -gt 0 ]] || continue
  rm -rf "$work/combined/$name"
  (cd "$harness" && "$work/venv/bin/python" bench.py combine --out "$work/combined/$name" "${dirs[@]}") \
    >"$out/logs/combine-$name.log" 2>&1 || continue
  # `combine` writes no plots: its combined raw.csv gets them as `run` draws them.
  (cd "$harness" && "$work/venv/bin/python" - "$work/combined/$name" <<'PLOT'
import json
import sys
from pathlib import Path

from bench_harness.combine import _phase_objects
from bench_harness.plots import render_all

run = Path(sys.argv[1])
manifest = json.loads((run / "manifest.json").read_text())
render_all(
    run / "raw.csv",
    systems=manifest["systems"],
    phases=_phase_objects(manifest),
    out_dir=run / "plots",
)
PLOT
  ) >>"$out/logs/combine-$name.log" 2>&1 || true
  cp "$work/combined/$name/summary.json" "$work/combined/$name/manifest.json" "$out/$name/"
  for plot in throughput claim_p99; do
    if [[ -f "$work/combined/$name/plots/$plot.svg" ]]; then
      cp "$work/combined/$name/plots/$plot.svg" "$out/$name/"
    fi
  done
done
"$root/.venv/bin/python" -m bench.queue_harness.report "$out" >"$out/README.md"
echo "[run] results in $out" >&2
