#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The placement tier's server (tests/placement/README.md): Debian 12's real
# Placement 8.0.0 (python3-placement) on 127.0.0.1, in a directory of its own:
# its placement.conf (noauth2, sqlite), its database, its log and pid.
#
#   placement-server.sh start DIR [PORT]   db sync (first start), then
#                                          placement-api on PORT (default: a
#                                          free one); waits until GET /
#                                          answers; prints the port
#   placement-server.sh stop DIR           stops it (the database stays)
#
# On a failed start the log's last lines go to stderr; the log stays in
# DIR/placement-api.log either way.
set -u

die() { echo "placement-server: $*" >&2; exit 1; }

[ $# -ge 2 ] || die "usage: placement-server.sh start DIR [PORT] | stop DIR"
cmd=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)

stop() {
    [ -f "$dir/server.pid" ] || return 0
    pid=$(cat "$dir/server.pid")
    rm -f "$dir/server.pid"
    # Only our own server: the pid must still run placement-api.
    case "$(cat "/proc/$pid/cmdline" 2>/dev/null | tr '\0' ' ')" in
        *placement-api*) ;;
        *) return 0 ;;
    esac
    kill "$pid" 2>/dev/null
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    kill -9 "$pid" 2>/dev/null
    return 0
}

case $cmd in
    stop) stop; exit 0 ;;
    start) ;;
    *) die "unknown command '$cmd'" ;;
esac

command -v placement-api >/dev/null && command -v placement-manage >/dev/null ||
    die "placement-api or placement-manage missing: install python3-placement (build-aux/install-deps --placement)"
mkdir -p "$dir" || die "cannot make $dir"
dir=$(cd "$dir" && pwd)
port=${3:-}
if [ -z "$port" ]; then
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])') ||
        die "no free port"
fi

if [ ! -f "$dir/placement.conf" ]; then
    cat >"$dir/placement.conf" <<CONF
[DEFAULT]
debug = False
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///$dir/placement.db
CONF
fi
if [ ! -f "$dir/placement.db" ]; then
    placement-manage --config-file "$dir/placement.conf" db sync >>"$dir/placement-api.log" 2>&1 ||
        { tail -20 "$dir/placement-api.log" >&2; die "placement-manage db sync failed"; }
fi

stop
echo "== placement-api --host 127.0.0.1 --port $port ($(date -u +%FT%TZ))" >>"$dir/placement-api.log"
# The server reads DIR/placement.conf (it ignores --config-file: research f).
OS_PLACEMENT_CONFIG_DIR=$dir setsid placement-api --host 127.0.0.1 --port "$port" \
    </dev/null >>"$dir/placement-api.log" 2>&1 &
echo $! >"$dir/server.pid"
echo "$port" >"$dir/port"
if ! python3 "$here/placement.py" --url "http://127.0.0.1:$port" wait 60 "$(cat "$dir/server.pid")"; then
    tail -20 "$dir/placement-api.log" >&2
    stop
    die "placement-api did not answer GET / on 127.0.0.1:$port within 60 s"
fi
echo "$port"
