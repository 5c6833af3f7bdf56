#!/bin/bash
# docker-entrypoint.sh of the official mariadb image, as the mysqlctl rig emulates it.
#
# It follows the image's documented conventions (https://hub.docker.com/_/mariadb, "Environment
# Variables" and "Initializing the database contents"): when the datadir holds no database yet it is
# initialised once, with the root password from MARIADB_ROOT_PASSWORD / MYSQL_ROOT_PASSWORD (or their
# _FILE variants), MARIADB_ALLOW_EMPTY_ROOT_PASSWORD, MARIADB_RANDOM_ROOT_PASSWORD, MARIADB_ROOT_HOST,
# MARIADB_DATABASE, MARIADB_USER / MARIADB_PASSWORD, MARIADB_REPLICATION_USER / _PASSWORD and the
# files in /docker-entrypoint-initdb.d (*.sh, *.sql, *.sql.gz); with MARIADB_AUTO_UPGRADE, a data
# directory last used by another version gets its system tables upgraded (mariadb-upgrade) first;
# then the server is exec'd with the container's arguments. Arguments that start with "-" are
# mariadbd options.
#
# Differences from the image, all invisible to a client: the datadir is copied from a template that
# mariadb-install-db built once per rig (seconds faster per instance), the time zone tables are not
# loaded, and the server runs as root (the rig has no user namespaces, so the image's gosu step to the
# mysql user is skipped; the rig's configuration sets user=root).
set -eo pipefail
shopt -s nullglob

RIG_TEMPLATE_DATADIR='@RIG_TEMPLATE_DATADIR@'

mysql_log() {
	local type="$1"
	shift
	printf '%s 0 [%s] [Entrypoint]: %s\n' "$(date --rfc-3339=seconds)" "$type" "$*"
}
mysql_note() { mysql_log Note "$@"; }
mysql_warn() { mysql_log Warn "$@" >&2; }
mysql_error() {
	mysql_log ERROR "$@" >&2
	exit 1
}

# file_env VAR [DEFAULT] sets VAR from $VAR or from the file named by $VAR_FILE; a MARIADB_* variable
# falls back to the matching MYSQL_* one, as in the image.
file_env() {
	local var="$1" def="${2:-}"
	local fileVar="${var}_FILE"
	local mysqlVar="${var/#MARIADB/MYSQL}"
	local mysqlFileVar="${mysqlVar}_FILE"
	if [ -n "${!var:-}" ] && [ -n "${!fileVar:-}" ]; then
		mysql_error "Both $var and $fileVar are set (but are exclusive)"
	fi
	local val="$def"
	if [ -n "${!var:-}" ]; then
		val="${!var}"
	elif [ -n "${!fileVar:-}" ]; then
		val="$(<"${!fileVar}")"
	elif [ "$var" != "$mysqlVar" ] && [ -n "${!mysqlVar:-}" ]; then
		val="${!mysqlVar}"
	elif [ "$var" != "$mysqlVar" ] && [ -n "${!mysqlFileVar:-}" ]; then
		val="$(<"${!mysqlFileVar}")"
	fi
	export "$var"="$val"
	unset "$fileVar"
}

# mysql_get_config NAME mariadbd-args... prints the value the server would use for NAME.
mysql_get_config() {
	local conf="$1"
	shift
	"$@" --verbose --help 2>/dev/null |
		awk -v conf="$conf" '$1 == conf && /^[^ \t]/ { sub(/^[^ \t]+[ \t]+/, ""); print; exit }'
}

# sql_escape escapes a string for a single-quoted SQL literal.
sql_escape() {
	local s="$1"
	s="${s//\\/\\\\}"
	s="${s//\'/\\\'}"
	printf '%s' "$s"
}

# cnf_escape escapes a string for a double-quoted option-file value.
cnf_escape() {
	local s="$1"
	s="${s//\\/\\\\}"
	s="${s//\"/\\\"}"
	printf '%s' "$s"
}

process_sql() {
	if [ -n "$CLIENT_CNF" ]; then
		mariadb --defaults-extra-file="$CLIENT_CNF" --protocol=socket -uroot -hlocalhost --socket="$SOCKET" "$@"
	else
		mariadb --protocol=socket -uroot -hlocalhost --socket="$SOCKET" "$@"
	fi
}

temp_server_start() {
	"$@" --skip-networking --default-time-zone=SYSTEM --socket="$SOCKET" --wsrep_on=OFF \
		--expire-logs-days=0 --skip-slave-start --loose-innodb_buffer_pool_load_at_startup=0 &
	TEMP_PID=$!
	local i
	for i in $(seq 600); do
		if process_sql --database=mysql -e 'SELECT 1' >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$TEMP_PID" 2>/dev/null; then
			wait "$TEMP_PID" || true
			mysql_error "Unable to start server."
		fi
		sleep 0.1
	done
	mysql_error "Unable to start server."
}

temp_server_stop() {
	process_sql -e 'SHUTDOWN' >/dev/null 2>&1 || kill "$TEMP_PID"
	wait "$TEMP_PID" || true
}

setup_db() {
	local rootHost="${MARIADB_ROOT_HOST:-%}"
	local rootPw=""
	if [ -n "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		MARIADB_ROOT_PASSWORD="$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32)"
		export MARIADB_ROOT_PASSWORD
		mysql_note "GENERATED ROOT PASSWORD: $MARIADB_ROOT_PASSWORD"
	fi
	rootPw="$(sql_escape "$MARIADB_ROOT_PASSWORD")"
	local sql="SET autocommit = 1;
SET @@SESSION.SQL_LOG_BIN=0;
SET @@SESSION.SQL_MODE=REPLACE(@@SESSION.SQL_MODE, 'NO_BACKSLASH_ESCAPES', '');
DROP USER IF EXISTS root@'127.0.0.1', root@'::1', root@'$(sql_escape "$TEMPLATE_HOST")', ''@'localhost', ''@'$(sql_escape "$TEMPLATE_HOST")';
EXECUTE IMMEDIATE CONCAT('DROP USER IF EXISTS root@\'', @@hostname,'\'');
SET PASSWORD FOR 'root'@'localhost'= PASSWORD('$rootPw');"
	if [ "$rootHost" != localhost ]; then
		sql+="
CREATE USER 'root'@'$(sql_escape "$rootHost")' IDENTIFIED BY '$rootPw';
GRANT ALL ON *.* TO 'root'@'$(sql_escape "$rootHost")' WITH GRANT OPTION;
GRANT PROXY ON ''@'%' TO 'root'@'$(sql_escape "$rootHost")' WITH GRANT OPTION;"
	fi
	local hcPw
	hcPw="$(head -c 24 /dev/urandom | base64 | tr -d '/+=' | head -c 32)"
	sql+="
CREATE USER healthcheck@'127.0.0.1' IDENTIFIED BY '$hcPw';
CREATE USER healthcheck@'::1' IDENTIFIED BY '$hcPw';
CREATE USER healthcheck@localhost IDENTIFIED BY '$hcPw';"
	if [ -n "$MARIADB_DATABASE" ]; then
		sql+="
CREATE DATABASE IF NOT EXISTS \`$MARIADB_DATABASE\`;"
	fi
	if [ -n "$MARIADB_USER" ] && [ -n "$MARIADB_PASSWORD" ]; then
		sql+="
CREATE USER '$(sql_escape "$MARIADB_USER")'@'%' IDENTIFIED BY '$(sql_escape "$MARIADB_PASSWORD")';"
		if [ -n "$MARIADB_DATABASE" ]; then
			sql+="
GRANT ALL ON \`${MARIADB_DATABASE//_/\\_}\`.* TO '$(sql_escape "$MARIADB_USER")'@'%';"
		fi
	fi
	if [ -n "$MARIADB_REPLICATION_USER" ] && [ -n "$MARIADB_REPLICATION_PASSWORD" ]; then
		sql+="
CREATE USER '$(sql_escape "$MARIADB_REPLICATION_USER")'@'%' IDENTIFIED BY '$(sql_escape "$MARIADB_REPLICATION_PASSWORD")';
GRANT REPLICATION REPLICA ON *.* TO '$(sql_escape "$MARIADB_REPLICATION_USER")'@'%';"
	fi
	process_sql --database=mysql <<<"$sql"

	# From now on the root password is needed on the socket too.
	CLIENT_CNF="$(mktemp)"
	printf '[client]\npassword="%s"\n' "$(cnf_escape "$MARIADB_ROOT_PASSWORD")" >"$CLIENT_CNF"
	printf '[mariadb-client]\nport=3306\nsocket=%s\nuser=healthcheck\npassword="%s"\n' "$SOCKET" "$hcPw" >"$DATADIR/.my-healthcheck.cnf"
	chmod 600 "$DATADIR/.my-healthcheck.cnf"
}

process_init_files() {
	local f
	for f in "$@"; do
		case "$f" in
		*.sh)
			if [ -x "$f" ]; then
				mysql_note "$0: running $f"
				"$f"
			else
				mysql_note "$0: sourcing $f"
				# shellcheck disable=SC1090
				. "$f"
			fi
			;;
		*.sql)
			mysql_note "$0: running $f"
			process_sql <"$f"
			;;
		*.sql.gz)
			mysql_note "$0: running $f"
			gunzip -c "$f" | process_sql
			;;
		*) mysql_warn "$0: ignoring $f" ;;
		esac
	done
}

if [ "${1:0:1}" = '-' ]; then
	set -- mariadbd "$@"
fi

case "$1" in
mariadbd | mysqld) ;;
*) exec "$@" ;;
esac
for arg; do
	case "$arg" in
	-'?' | --help | --print-defaults | -V | --version) exec "$@" ;;
	esac
done

mysql_note "Entrypoint script for MariaDB Server (mysqlctl rig emulation) started."
file_env MARIADB_ROOT_HOST '%'
file_env MARIADB_ROOT_PASSWORD
file_env MARIADB_DATABASE
file_env MARIADB_USER
file_env MARIADB_PASSWORD
file_env MARIADB_REPLICATION_USER
file_env MARIADB_REPLICATION_PASSWORD
: "${MARIADB_ALLOW_EMPTY_ROOT_PASSWORD:=${MYSQL_ALLOW_EMPTY_PASSWORD:-}}"
: "${MARIADB_RANDOM_ROOT_PASSWORD:=${MYSQL_RANDOM_ROOT_PASSWORD:-}}"

DATADIR="$(mysql_get_config datadir "$@")"
DATADIR="${DATADIR%/}"
SOCKET="$(mysql_get_config socket "$@")"
CLIENT_CNF=""
TEMPLATE_HOST="$(cat "$RIG_TEMPLATE_DATADIR/.rig-template-host" 2>/dev/null || true)"
# The version the server reports (the tag's, or the host build's).
SERVER_VERSION="${RIG_REPORTED_VERSION:-${MARIADB_VERSION#*:}}"

if [ ! -d "$DATADIR/mysql" ]; then
	if [ -z "$MARIADB_ROOT_PASSWORD" ] && [ -z "$MARIADB_ALLOW_EMPTY_ROOT_PASSWORD" ] && [ -z "$MARIADB_RANDOM_ROOT_PASSWORD" ]; then
		mysql_error $'Database is uninitialized and password option is not specified\n\tYou need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ROOT_PASSWORD_FILE, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD or MARIADB_RANDOM_ROOT_PASSWORD'
	fi
	mkdir -p "$DATADIR"
	mysql_note "Initializing database files"
	if [ -d "$RIG_TEMPLATE_DATADIR/mysql" ]; then
		cp -a "$RIG_TEMPLATE_DATADIR/." "$DATADIR/"
		rm -f "$DATADIR/.rig-template-host"
	else
		mariadb-install-db --datadir="$DATADIR" --rpm --auth-root-authentication-method=normal \
			--skip-test-db --skip-log-bin --expire-logs-days=0 --default-time-zone=SYSTEM
	fi
	mysql_note "Database files initialized"
	mysql_note "Starting temporary server"
	temp_server_start "$@"
	mysql_note "Temporary server started."
	setup_db
	process_init_files /docker-entrypoint-initdb.d/*
	mysql_note "Stopping temporary server"
	temp_server_stop
	rm -f "$CLIENT_CNF"
	mysql_note "Temporary server stopped"
	printf '%s' "$SERVER_VERSION" >"$DATADIR/mysql_upgrade_info"
	mysql_note "MariaDB init process done. Ready for start up."
elif [ -n "${MARIADB_AUTO_UPGRADE:-}" ] && [ "$(cat "$DATADIR/mysql_upgrade_info" 2>/dev/null || true)" != "$SERVER_VERSION" ]; then
	# MARIADB_AUTO_UPGRADE: the data directory was last upgraded by another version (its
	# mysql_upgrade_info), so the system tables are upgraded on a temporary server before the real
	# one starts; mariadb-upgrade writes no binary log, so replicas see no transaction of it.
	# Rig differences: the one build reports several versions, so the client's version check is
	# skipped and the info file is written here with the version the server reports.
	mysql_note "MariaDB upgrade from $(cat "$DATADIR/mysql_upgrade_info" 2>/dev/null || echo unknown) to $SERVER_VERSION: starting temporary server"
	temp_server_start "$@" --skip-grant-tables --loose-innodb_buffer_pool_dump_at_shutdown=0 ${RIG_REPORTED_VERSION:+--version=$RIG_REPORTED_VERSION}
	if ! mariadb-upgrade --upgrade-system-tables --skip-version-check --force --skip-write-binlog --protocol=socket --socket="$SOCKET" -uroot; then
		temp_server_stop
		mysql_error "mariadb-upgrade to $SERVER_VERSION failed: the server is not started on system tables it could not upgrade"
	fi
	temp_server_stop
	printf '%s' "$SERVER_VERSION" >"$DATADIR/mysql_upgrade_info"
	mysql_note "MariaDB upgrade to $SERVER_VERSION done"
fi

# The rig runs one MariaDB build for every tag; a tag of another version makes the server report
# that version (see reportedVersion in image.go).
if [ -n "${RIG_REPORTED_VERSION:-}" ]; then
	set -- "$@" "--version=$RIG_REPORTED_VERSION"
fi
exec "$@"
