package orchestrate

import (
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// TestBuildSeedJob pins what makes the copy safe: its pod is selected by no Service and by the
// StatefulSet, the password reaches it only through the Secret, the target loads without binary
// logging, and the dump carries the donor's GTID position.
func TestBuildSeedJob(t *testing.T) {
	c := testenv.Cluster()
	job := BuildSeedJob(c, 3, c.Name+"-1", []string{"root", "repl", "o'k"}, false)
	if job.Name != SeedJobName(c, 3) || job.Namespace != c.Namespace || len(job.OwnerReferences) != 1 {
		t.Fatalf("job %s/%s owners %+v", job.Namespace, job.Name, job.OwnerReferences)
	}
	sel := labels.SelectorFromSet(specs.SelectorLabels(c))
	if sel.Matches(labels.Set(job.Spec.Template.Labels)) || sel.Matches(labels.Set(job.Labels)) {
		t.Fatalf("the seed pod's labels %v are selected by the cluster's selector %v", job.Spec.Template.Labels, sel)
	}
	ctr := job.Spec.Template.Spec.Containers[0]
	if ctr.Image != c.Spec.Image || len(ctr.Env) != 1 || ctr.Env[0].Name != "MYSQL_PWD" || ctr.Env[0].ValueFrom == nil ||
		ctr.Env[0].ValueFrom.SecretKeyRef.Name != specs.SecretName(c) || ctr.Env[0].ValueFrom.SecretKeyRef.Key != specs.SecretRootPassword {
		t.Fatalf("container %+v", ctr)
	}
	script := strings.Join(ctr.Command, " ")
	for _, want := range []string{
		specs.PodHost(c, c.Name+"-1"), specs.PodHost(c, c.Name+"-3"), "sql_log_bin=0", "--single-transaction", "--master-data=1", "--gtid", "SET GLOBAL gtid_slave_pos", "mariadb-dump",
		"set -euo pipefail", "RESET MASTER; SET GLOBAL gtid_binlog_state", "User NOT IN ('root','repl','o''k')", "FLUSH PRIVILEGES",
		// The target keeps its own fencing token: the schema is neither dropped nor copied.
		"('mysql','information_schema','performance_schema','sys','mysqlctl')",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("the seed script does not contain %q:\n%s", want, script)
		}
	}
	if regexp.MustCompile(`\s-p\S|--password`).MatchString(script) {
		t.Errorf("the seed script passes a password on the command line:\n%s", script)
	}
	if job.Spec.Template.Spec.RestartPolicy != "Never" || job.Spec.ActiveDeadlineSeconds == nil || job.Spec.BackoffLimit == nil {
		t.Fatalf("job spec %+v", job.Spec)
	}
	if mysql := BuildSeedJob(testenv.Cluster(func(c *v1.MysqlCluster) { c.Spec.Image, c.Spec.Flavor = "mysql:8.4", v1.FlavorMySQL }), 3, "x-1", nil, false); !strings.Contains(strings.Join(mysql.Spec.Template.Spec.Containers[0].Command, " "), "mysqldump") {
		t.Fatalf("a MySQL cluster's seed script does not use mysqldump")
	}
}
