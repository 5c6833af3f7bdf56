#!/usr/bin/env bash
# make demo-down: stop the rig that hack/demo.sh started — every pod process, the control plane,
# the rig's iptables rules and cgroups, by the PIDs recorded in its work directory — and remove the
# work directory (its volumes included).
#
#   MYSQLCTL_DEMO_DIR   work directory of the rig (default /tmp/mysqlctl-demo)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${MYSQLCTL_DEMO_DIR:-/tmp/mysqlctl-demo}

if [ ! -x bin/rig ]; then
	go build -o bin/rig ./test/rig/cmd/rig
fi
bin/rig down --dir "$dir"
