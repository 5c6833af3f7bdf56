package orchestrate

import (
	"fmt"

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

// seedScript copies every database of the donor except the system schemas into the target, in
// one consistent snapshot (--single-transaction) that carries the donor's GTID position
// (--master-data --gtid emits SET GLOBAL gtid_slave_pos at the end). The target loads it without
// binary logging, so the copy writes no GTIDs of its own (they would be errant), and with the
// role that lets mysqlctl's sessions write to a read-only server. mysqlctl's accounts are made on
// the target before the copy and live in the mysql schema, which the copy leaves alone. The
// password comes from MYSQL_PWD, never from the command line, where ps would show it.
func seedScript(t flavorTools, donorHost, targetHost string) string {
	return fmt.Sprintf(`set -eu
src=%[3]s
dst=%[4]s
session="SET SESSION sql_log_bin=0; SET ROLE %[5]s;"
dbs=$(%[1]s -h "$src" -P %[6]d -uroot -N -B -e "SELECT schema_name FROM information_schema.schemata WHERE schema_name NOT IN ('mysql','information_schema','performance_schema','sys')" | tr '\n' ' ')
echo "mysqlctl seed: copying databases [$dbs] from $src to $dst"
if [ -n "$dbs" ]; then
  { echo "$session"; %[2]s -h "$src" -P %[6]d -uroot --single-transaction --master-data=1 --gtid --add-drop-database --routines --events --triggers --databases $dbs; } | %[1]s -h "$dst" -P %[6]d -uroot
else
  pos=$(%[1]s -h "$src" -P %[6]d -uroot -N -B -e "SELECT @@gtid_binlog_pos")
  echo "$session SET GLOBAL gtid_slave_pos='$pos';" | %[1]s -h "$dst" -P %[6]d -uroot
fi
%[1]s -h "$dst" -P %[6]d -uroot -N -B -e "SELECT CONCAT('mysqlctl seed: done, gtid_slave_pos ', @@gtid_slave_pos)"
`, t.client, t.dump, donorHost, targetHost, topology.ReadOnlyAdminRole, MySQLPort)
}

// BuildSeedJob returns the Job that copies the donor's data into the instance of the ordinal,
// run from the cluster's own image (its client tools) inside the cluster, so the copy never
// passes through the machine mysqlctl runs on. Only MariaDB is copied this way (MySQL has CLONE).
func BuildSeedJob(c *v1.MysqlCluster, ordinal int32, donor string) *batchv1.Job {
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
						Command: []string{"sh", "-c", seedScript(t, PodHost(c, donor), PodHost(c, target))},
						Env: []corev1.EnvVar{{Name: "MYSQL_PWD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: SecretName(c)}, Key: SecretRootPassword,
						}}}},
					}},
				},
			},
		},
	}
}
