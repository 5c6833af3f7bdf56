package orchestrate

import (
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
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
//  1. the target's binary log is reset (GTIDs the copy does not hold, errant ones on a rebuild,
//     would refuse the copy's position) and every non-system database of it is dropped (a volume kept from an earlier life
//     may hold one the primary dropped since), or, for a rebuild, its tables are set aside in
//     a schema named topology.AsidePrefix+database, dropped once the copy has joined; the
//     system schemas, and topology.FenceSchema (the target's own fencing token, which must not
//     go back to the donor's epoch), are neither dropped nor copied;
//  2. every non-system database of the donor is dumped in one consistent snapshot
//     (--single-transaction) that ends with the donor's GTID position (--master-data --gtid
//     writes SET GLOBAL gtid_slave_pos after the data), followed by the accounts and grants
//     that mysqlctl does not own (the mysql privilege tables' rows of every other user and role,
//     replacing the target's own: an account revoked or made errantly there does not survive),
//     so that replicated GRANTs keep applying and a promoted copy serves the applications;
//  3. the target loads it without binary logging, so that the copy writes no GTID of its own
//     (it would be errant), with the role that lets mysqlctl's sessions write to a read-only
//     server;
//  4. the target's binary log starts again at the copied position (RESET MASTER, then
//     gtid_binlog_state): its binary logs never claim to hold the history it was copied, so a
//     later seed from it, if it becomes primary, copies instead of replaying too little; the
//     state still names the donor's other servers up to where the copy holds them, so that
//     elections and rejoins compare it server by server like any replica.
//
// The password comes from MYSQL_PWD, never from the command line, where ps would show it.
func seedScript(t flavorTools, donorHost, targetHost string, owned []string, aside bool) string {
	quoted := make([]string, len(owned))
	for i, u := range owned {
		quoted[i] = "'" + strings.ReplaceAll(u, "'", "''") + "'"
	}
	return fmt.Sprintf(`set -euo pipefail
src=%[3]s
dst=%[4]s
session="SET SESSION sql_log_bin=0; SET ROLE %[5]s;"
q() { %[1]s -h "$1" -P %[6]d -uroot -N -B -e "$2"; }
system="('mysql','information_schema','performance_schema','sys','%[11]s') AND schema_name NOT LIKE '%[9]s%%'"
for db in $(q "$dst" "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN $system"); do
  if [ "%[8]t" = true ]; then
    echo "$session CREATE DATABASE IF NOT EXISTS `+"\\`%[10]s$db\\`"+`;" | %[1]s -h "$dst" -P %[6]d -uroot
    for t in $(q "$dst" "SELECT table_name FROM information_schema.tables WHERE table_schema = '$db' AND table_type = 'BASE TABLE'"); do
      if [ "$(q "$dst" "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '%[10]s$db' AND table_name = '$t'")" = 0 ]; then
        # A table moves to another schema only without its triggers (the copy brings its own).
        for trg in $(q "$dst" "SELECT trigger_name FROM information_schema.triggers WHERE event_object_schema = '$db' AND event_object_table = '$t'"); do
          echo "$session DROP TRIGGER `+"\\`$db\\`.\\`$trg\\`"+`;" | %[1]s -h "$dst" -P %[6]d -uroot
        done
        echo "$session RENAME TABLE `+"\\`$db\\`.\\`$t\\` TO \\`%[10]s$db\\`.\\`$t\\`"+`;" | %[1]s -h "$dst" -P %[6]d -uroot
      fi # else an earlier attempt set the old table aside: this one is a partial copy, dropped below
    done
  fi
  echo "$session DROP DATABASE `+"\\`$db\\`"+`;" | %[1]s -h "$dst" -P %[6]d -uroot
done
# Its binary log goes too: GTIDs the copy does not hold (errant ones, on a rebuild) would refuse
# the copy's position.
echo "$session RESET MASTER;" | %[1]s -h "$dst" -P %[6]d -uroot
dbs=$(q "$src" "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN $system" | tr '\n' ' ')
echo "mysqlctl seed: copying databases [$dbs] and the accounts mysqlctl does not own from $src to $dst"
{
  echo "$session"
  if [ -n "$dbs" ]; then
    %[2]s -h "$src" -P %[6]d -uroot --single-transaction --master-data=1 --gtid --routines --events --triggers --databases $dbs
  else
    echo "SET GLOBAL gtid_slave_pos='$(q "$src" "SELECT @@gtid_binlog_pos")';"
  fi
  echo "USE mysql;"
  for t in global_priv db tables_priv columns_priv procs_priv proxies_priv roles_mapping; do
    echo "DELETE FROM $t WHERE User NOT IN (%[7]s);"
  done
  %[2]s -h "$src" -P %[6]d -uroot --no-create-info --replace --skip-triggers --where="User NOT IN (%[7]s)" mysql global_priv db tables_priv columns_priv procs_priv proxies_priv roles_mapping
  echo "FLUSH PRIVILEGES;"
} | %[1]s -h "$dst" -P %[6]d -uroot
pos=$(q "$dst" "SELECT @@gtid_slave_pos")
# The binlog state names, besides the position, every other server the donor's does below the
# position's number in its domain: the copy holds their transactions, and a failover or a rejoin
# compares them server by server. (A number past the position was written after the copy.) Each
# domain's position goes last: it is the domain's current GTID.
# (Sequence numbers are compared as digit strings: exact at any size.)
[ "$(q "$src" "SELECT @@gtid_strict_mode")" = 1 ] || { echo "mysqlctl seed: the donor runs without gtid_strict_mode" >&2; exit 1; }
donor_state=$(q "$src" "SELECT @@gtid_binlog_state")
state=$(awk -v pos="$pos" -v st="$donor_state" 'function lt(x, y) { x = x ""; y = y ""; return length(x) != length(y) ? length(x) < length(y) : x < y }
BEGIN {
  n = split(pos, P, ","); for (i = 1; i <= n; i++) { split(P[i], a, "-"); seq[a[1]] = a[3]; srv[a[1]] = a[2] }
  m = split(st, S, ","); for (i = 1; i <= m; i++) { split(S[i], b, "-"); if ((b[1] in seq) && b[2] != srv[b[1]] && lt(b[3], seq[b[1]])) out = out S[i] "," }
  print out pos }')
echo "$session RESET MASTER; SET GLOBAL gtid_binlog_state='$state';" | %[1]s -h "$dst" -P %[6]d -uroot
got=$(q "$dst" "SELECT @@gtid_binlog_pos")
[ "$got" = "$pos" ] || { echo "mysqlctl seed: binlog restarted at [$got], not at the copied position [$pos]" >&2; exit 1; }
echo "mysqlctl seed: done at GTID position [$pos]"
`, t.client, t.dump, donorHost, targetHost, topology.ReadOnlyAdminRole, MySQLPort, strings.Join(quoted, ","), aside, strings.ReplaceAll(topology.AsidePrefix, "_", `\_`), topology.AsidePrefix, topology.FenceSchema)
}

// BuildSeedJob returns the Job that copies the donor's data into the instance of the ordinal,
// run from the cluster's own image (its client tools) inside the cluster, so the copy never
// passes through the machine mysqlctl runs on. Only MariaDB is copied this way (MySQL has CLONE).
// owned names the accounts and roles mysqlctl makes on every instance itself: their rows are not copied.
// aside keeps the target's old tables in aside schemas instead of dropping them (a rebuild).
func BuildSeedJob(c *v1.MysqlCluster, ordinal int32, donor string, owned []string, aside bool) *batchv1.Job {
	t := toolsFor(c)
	target := fmt.Sprintf("%s-%d", c.Name, ordinal)
	labels := map[string]string{LabelInstance: c.Name, LabelManagedBy: FieldOwner, LabelComponent: seedComponent}
	backoff, deadline := int32(1), int64(scaleBound.Seconds())
	meta := objectMeta(c, SeedJobName(c, ordinal), seedComponent)
	meta.Labels = labels
	return &batchv1.Job{
		TypeMeta:   typeMeta("batch/v1", "Job"),
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
						Command: []string{"bash", "-c", seedScript(t, PodHost(c, donor), PodHost(c, target), owned, aside)},
						Env: []corev1.EnvVar{{Name: "MYSQL_PWD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(c)}, Key: SecretRootPassword,
						}}}},
					}},
				},
			},
		},
	}
}
