#!/usr/bin/env bash
# The benchmark's Postgres as a native cluster (initdb/pg_ctl) instead of its compose service:
# the harness, patched by native-postgres.patch, calls this with `up`, `stop`, `start`, `down`.
#   QH_PG_DIR       the cluster's folder (its data, socket and log)
#   BENCH_PG_PORT   the port it listens on, at 127.0.0.1 only
#   QH_PG_CONF      the harness's postgres.conf, included so the tuning is the harness's own
# PostgreSQL refuses to run as root: as root the cluster runs as `nobody`, as the tests' do.
set -euo pipefail
: "${QH_PG_DIR:?}" "${BENCH_PG_PORT:?}" "${QH_PG_CONF:?}"
data="$QH_PG_DIR/data"
as_owner=()
if [[ $(id -u) == 0 ]]; then
  as_owner=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
fi
pg_ctl_() { "${as_owner[@]}" pg_ctl -D "$data" -l "$QH_PG_DIR/postgresql.log" "$@"; }

down() {
  if [[ -f "$data/postmaster.pid" ]]; then pg_ctl_ -m immediate -w stop >/dev/null || true; fi
  rm -rf "$QH_PG_DIR"
}

case "${1:-}" in
  up)
    down
    mkdir -p "$QH_PG_DIR"
    cp "$QH_PG_CONF" "$QH_PG_DIR/harness.conf"
    [[ $(id -u) == 0 ]] && chown -R nobody:nogroup "$QH_PG_DIR"
    "${as_owner[@]}" initdb -D "$data" -U bench --auth=trust -E UTF8 >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
include '$QH_PG_DIR/harness.conf'
listen_addresses = '127.0.0.1'
port = $BENCH_PG_PORT
unix_socket_directories = '$QH_PG_DIR'
CONF
    pg_ctl_ -w start >/dev/null
    ;;
  start) pg_ctl_ -w start >/dev/null ;;
  # `fast`, as `docker compose stop` sends SIGTERM: the server ends every session and stops.
  stop) pg_ctl_ -m fast -w stop >/dev/null ;;
  down) down ;;
  *) echo "usage: $0 up|stop|start|down" >&2; exit 2 ;;
esac
