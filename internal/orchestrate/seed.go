package orchestrate

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// SeedJobName names the Job that copies a donor's data into the instance of the ordinal.
func SeedJobName(c *v1.MysqlCluster, ordinal int32) string {
	return fmt.Sprintf("%s-seed-%d", c.Name, ordinal)
}

// seedComponent is the component label of seed Jobs and their pods. Their labels leave out
// LabelName, so neither the StatefulSet nor any Service of the cluster selects a seed pod.
const seedComponent = "seed"

// seedScript copies the donor into the target, run by bash with pipefail, so that a copy that
// fails anywhere (the dump, the load, the donor restarting) fails the Job:
//
//  1. every non-system database of the target is dropped (a volume kept from an earlier life
//     may hold one the primary dropped since), or, for a rebuild, its tables are set aside in
//     a schema named topology.AsidePrefix+database, dropped once the copy has joined; the
//     system schemas, and topology.FenceSchema (the target's own fencing token, which must not
//     go back to the donor's epoch), are neither dropped nor copied; then the target's binary
//     log is reset (GTIDs the copy does not hold, errant ones on a rebuild, would refuse the
//     copy's position);
//  2. every non-system database of the donor is dumped in one consistent snapshot
//     (--single-transaction) that ends with the donor's GTID position (--master-data --gtid
//     writes SET GLOBAL gtid_slave_pos after the data), followed by the accounts and grants
//     that mysqlctl does not own (the mysql privilege tables' rows of every other user and role,
//     replacing the target's own: an account revoked or made errantly there does not survive),
//     so that replicated GRANTs keep applying and a promoted copy serves the applications;
//  3. the target loads it without binary logging, so that the copy writes no GTID of its own
//     (it would be errant), with the role that lets mysqlctl's sessions write to a read-only
//     server;
//  4. the list of databases and the accounts are read again after the dump: the privilege
//     tables are not transactional and the list is read before the snapshot, so a database or
//     an account made or changed during the copy would be missing on the copy, or replayed
//     over it (a replica stopped by error 1396); the copy then fails and the Job tries again;
//  5. the target's binary log starts again at the copied position (RESET MASTER, then
//     gtid_binlog_state): its binary logs never claim to hold the history it was copied, so a
//     later seed from it, if it becomes primary, copies instead of replaying too little; the
//     state still names the donor's other servers up to where the copy holds them, so that
//     elections and rejoins compare it server by server like any replica.
//
// Names come from the servers, and any account with CREATE chooses them: no name read from a
// server is ever pasted into SQL or a command line by the shell. The target's schemas are
// dropped or set aside by one server-side block that quotes each identifier itself; the donor's
// database names cross the shell in hex and are decoded into an array, passed to the dump as
// arguments after "--" (no word splitting, no globbing, no option).
//
// The password comes from MYSQL_PWD, never from the command line, where ps would show it.
func seedScript(t specs.FlavorTools, donorHost, targetHost string, owned []string, aside bool) string {
	quoted := make([]string, len(owned))
	for i, u := range owned {
		quoted[i] = "'" + strings.ReplaceAll(u, "'", "''") + "'"
	}
	return fmt.Sprintf(`set -euo pipefail
src=%[3]s
dst=%[4]s
session="SET SESSION sql_log_bin=0; SET ROLE %[5]s;"
q() { %[1]s -h "$1" -P %[6]d -uroot -N -B -e "$2"; }
run() { %[1]s -h "$1" -P %[6]d -uroot; }
fail() { echo "mysqlctl seed: $*" >&2; exit 1; }
system="%[8]s"
# The target's old databases, dropped or set aside by the server itself.
run "$dst" <<'SQL'
SET SESSION sql_log_bin=0; SET ROLE %[5]s;
DELIMITER ;;
%[9]s;;
DELIMITER ;
SQL
# Its binary log goes too: GTIDs the copy does not hold (errant ones, on a rebuild) would refuse
# the copy's position.
echo "$session RESET MASTER;" | run "$dst"
# donor_databases sets dbs to the donor's databases, read in hex and decoded byte by byte.
donor_databases() {
  local hex h s i
  hex=$(q "$src" "SELECT HEX(schema_name) FROM information_schema.schemata WHERE $system ORDER BY 1")
  dbs=()
  for h in $hex; do
    s=
    for ((i = 0; i < ${#h}; i += 2)); do s+="\\x${h:i:2}"; done
    printf -v s '%%b' "$s"
    dbs+=("$s")
  done
}
grants() {
  %[2]s -h "$src" -P %[6]d -uroot --skip-comments --skip-dump-date --no-create-info --replace --skip-triggers --where="User NOT IN (%[7]s)" mysql global_priv db tables_priv columns_priv procs_priv proxies_priv roles_mapping
}
donor_databases
listed=("${dbs[@]}")
accounts=$(grants)
srcpos=$(q "$src" "SELECT @@gtid_binlog_pos") # the position of a copy of no database (read here, where a failure fails the Job)
echo "mysqlctl seed: copying databases [${dbs[*]@Q}] and the accounts mysqlctl does not own from $src to $dst"
{
  echo "$session"
  if [ ${#dbs[@]} -gt 0 ]; then
    %[2]s -h "$src" -P %[6]d -uroot --single-transaction --master-data=1 --gtid --routines --events --triggers --databases -- "${dbs[@]}"
  else
    echo "SET GLOBAL gtid_slave_pos='$srcpos';"
  fi
  echo "USE mysql;"
  for t in global_priv db tables_priv columns_priv procs_priv proxies_priv roles_mapping; do
    echo "DELETE FROM $t WHERE User NOT IN (%[7]s);"
  done
  printf '%%s\n' "$accounts"
  echo "FLUSH PRIVILEGES;"
} | run "$dst"
donor_databases
[ "${dbs[*]@Q}" = "${listed[*]@Q}" ] || fail "the donor's databases changed during the copy ([${listed[*]@Q}], then [${dbs[*]@Q}]): copying again"
[ "$(grants)" = "$accounts" ] || fail "the donor's accounts or grants changed during the copy: copying again"
pos=$(q "$dst" "SELECT @@gtid_slave_pos")
# The binlog state names, besides the position, every other server the donor's does below the
# position's number in its domain: the copy holds their transactions, and a failover or a rejoin
# compares them server by server. (A number past the position was written after the copy.) Each
# domain's position goes last: it is the domain's current GTID.
# (Sequence numbers are compared as digit strings: exact at any size.)
[ "$(q "$src" "SELECT @@gtid_strict_mode")" = 1 ] || fail "the donor runs without gtid_strict_mode"
donor_state=$(q "$src" "SELECT @@gtid_binlog_state")
state=$(awk -v pos="$pos" -v st="$donor_state" 'function lt(x, y) { x = x ""; y = y ""; return length(x) != length(y) ? length(x) < length(y) : x < y }
BEGIN {
  n = split(pos, P, ","); for (i = 1; i <= n; i++) { split(P[i], a, "-"); seq[a[1]] = a[3]; srv[a[1]] = a[2] }
  m = split(st, S, ","); for (i = 1; i <= m; i++) { split(S[i], b, "-"); if ((b[1] in seq) && b[2] != srv[b[1]] && lt(b[3], seq[b[1]])) out = out S[i] "," }
  print out pos }')
echo "$session RESET MASTER; SET GLOBAL gtid_binlog_state='$state';" | run "$dst"
got=$(q "$dst" "SELECT @@gtid_binlog_pos")
[ "$got" = "$pos" ] || fail "binlog restarted at [$got], not at the copied position [$pos]"
echo "mysqlctl seed: done at GTID position [$pos]"
`, t.Client, t.Dump, donorHost, targetHost, topology.ReadOnlyAdminRole, specs.MySQLPort, strings.Join(quoted, ","), seedSystemSchemas, clearTargetBlock(aside))
}

// seedSystemSchemas is the SQL condition that leaves out what a copy never touches: the
// server's own schemas, mysqlctl's fencing token, and the schemas a rebuild set aside. Names are
// compared byte for byte: information_schema compares them without case, and SYS or Mysql are
// an application's own databases on a server with lower_case_table_names=0.
var seedSystemSchemas = fmt.Sprintf("BINARY schema_name NOT IN ('mysql','information_schema','performance_schema','sys','%s') AND BINARY schema_name NOT LIKE '%s%%'",
	topology.FenceSchema, strings.ReplaceAll(topology.AsidePrefix, "_", `\_`))

// quoteIdentExpr is the SQL expression that quotes the identifier the expression expr yields
// (backticks around it, each backtick in it doubled): names are quoted by the server, never
// pasted by a script.
func quoteIdentExpr(expr string) string {
	return "CONCAT('`', REPLACE(" + expr + ", '`', '``'), '`')"
}

// clearTargetBlock is the MariaDB compound statement that drops the target's non-system
// databases or, when aside, first moves each base table to the database's aside schema (without
// its triggers: the copy brings its own). A table an earlier attempt already set aside is not
// moved again: what holds its name now is a partial copy, dropped with its database.
func clearTargetBlock(aside bool) string {
	asideName := "CONCAT('" + topology.AsidePrefix + "', s.n)"
	var b strings.Builder
	b.WriteString("BEGIN NOT ATOMIC\n")
	b.WriteString("  FOR s IN (SELECT schema_name AS n FROM information_schema.schemata WHERE " + seedSystemSchemas + ") DO\n")
	if aside {
		b.WriteString("    EXECUTE IMMEDIATE CONCAT('CREATE DATABASE IF NOT EXISTS ', " + quoteIdentExpr(asideName) + ");\n")
		b.WriteString("    FOR t IN (SELECT table_name AS n FROM information_schema.tables WHERE table_schema = s.n AND table_type IN ('BASE TABLE', 'SYSTEM VERSIONED') AND table_name NOT IN (SELECT table_name FROM information_schema.tables WHERE table_schema = " + asideName + ")) DO\n")
		b.WriteString("      FOR g IN (SELECT trigger_name AS n FROM information_schema.triggers WHERE event_object_schema = s.n AND event_object_table = t.n) DO\n")
		b.WriteString("        EXECUTE IMMEDIATE CONCAT('DROP TRIGGER ', " + quoteIdentExpr("s.n") + ", '.', " + quoteIdentExpr("g.n") + ");\n")
		b.WriteString("      END FOR;\n")
		b.WriteString("      EXECUTE IMMEDIATE CONCAT('RENAME TABLE ', " + quoteIdentExpr("s.n") + ", '.', " + quoteIdentExpr("t.n") + ", ' TO ', " + quoteIdentExpr(asideName) + ", '.', " + quoteIdentExpr("t.n") + ");\n")
		b.WriteString("    END FOR;\n")
	}
	b.WriteString("    EXECUTE IMMEDIATE CONCAT('DROP DATABASE ', " + quoteIdentExpr("s.n") + ");\n")
	b.WriteString("  END FOR;\n")
	b.WriteString("END")
	return b.String()
}

// BuildSeedJob returns the Job that copies the donor's data into the instance of the ordinal,
// run from the cluster's own image (its client tools) inside the cluster, so the copy never
// passes through the machine mysqlctl runs on. Only MariaDB is copied this way (MySQL has CLONE).
// owned names the accounts and roles mysqlctl makes on every instance itself: their rows are not copied.
// aside keeps the target's old tables in aside schemas instead of dropping them (a rebuild).
func BuildSeedJob(c *v1.MysqlCluster, ordinal int32, donor string, owned []string, aside bool) *batchv1.Job {
	t := specs.ToolsFor(c)
	target := fmt.Sprintf("%s-%d", c.Name, ordinal)
	labels := map[string]string{specs.LabelInstance: c.Name, specs.LabelManagedBy: specs.FieldOwner, specs.LabelComponent: seedComponent}
	backoff, deadline := int32(1), int64(scaleBound.Seconds())
	meta := specs.ObjectMeta(c, SeedJobName(c, ordinal), seedComponent)
	meta.Labels = labels
	return &batchv1.Job{
		TypeMeta:   specs.TypeMeta("batch/v1", "Job"),
		ObjectMeta: meta,
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name:    "seed",
						Image:   c.Spec.Image,
						Command: []string{"bash", "-c", seedScript(t, specs.PodHost(c, donor), specs.PodHost(c, target), owned, aside)},
						Env: []corev1.EnvVar{{Name: "MYSQL_PWD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: specs.SecretName(c)}, Key: specs.SecretRootPassword,
						}}}},
					}},
				},
			},
		},
	}
}
