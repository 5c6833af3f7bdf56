#!/bin/bash
# healthcheck.sh of the official mariadb image (the tests a Kubernetes probe uses), as the mysqlctl
# rig emulates it. Usage as in the image: healthcheck.sh [--defaults-file=F | --no-defaults]
# [--datadir=D] [--su-mysql] --connect | --innodb_initialized | --innodb_buffer_pool_loaded | --replication ...
# Every test must pass. It connects with the account in DATADIR/.my-healthcheck.cnf that the
# entrypoint created; --connect uses the Unix socket (the image uses TCP to localhost, where the rig's
# server does not listen: it is bound to the pod's own address).
set -eo pipefail

datadir=/var/lib/mysql
defaults=()
tests=()
for arg; do
	case "$arg" in
	--datadir=*) datadir="${arg#--datadir=}" ;;
	--defaults-file=* | --defaults-extra-file=* | --defaults-group-suffix=*) defaults+=("$arg") ;;
	--no-defaults) defaults+=("$arg") ;;
	--su=* | --su-mysql | --verbose) ;;
	--replication_*=*) ;;
	--*) tests+=("${arg#--}") ;;
	*)
		echo "healthcheck: unexpected argument $arg" >&2
		exit 1
		;;
	esac
done
if [ ${#defaults[@]} -eq 0 ] && [ -r "$datadir/.my-healthcheck.cnf" ]; then
	defaults=(--defaults-extra-file="$datadir/.my-healthcheck.cnf")
fi

query() {
	mariadb "${defaults[@]}" --protocol=socket -N -B -e "$1"
}

for t in "${tests[@]}"; do
	case "$t" in
	connect)
		query 'SELECT 1' >/dev/null
		;;
	innodb_initialized)
		[ "$(query "SELECT 1 FROM information_schema.ENGINES WHERE engine='innodb' AND support IN ('YES','DEFAULT','ENABLED')")" = 1 ]
		;;
	innodb_buffer_pool_loaded)
		query "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='INNODB_BUFFER_POOL_LOAD_STATUS'" | grep -q -e 'completed' -e '^$' -e 'not started'
		;;
	replication)
		status="$(query 'SHOW ALL REPLICAS STATUS\G' || true)"
		! grep -q -E 'Slave_(IO|SQL)_Running: No' <<<"$status"
		;;
	mariadbupgrade)
		;;
	*)
		echo "healthcheck: unknown test $t" >&2
		exit 1
		;;
	esac
done
