// Package specs holds the pure builders of the objects a MysqlCluster owns: the StatefulSet, the
// Services, the ConfigMap (my.cnf), the PodDisruptionBudget and the Secret, with their names and
// labels. Each Build* function maps the resource (and, where the desired state depends on it, an
// observed fact passed in) to the desired object, with nothing defaulted that the API server would
// default differently, so a server-side apply of an unchanged spec is a no-op.
//
// It imports only the API types, internal/outcome (error kinds) and Kubernetes' object types: no
// client, no SQL, no clock; it is tested without a server. internal/orchestrate applies what it
// builds.
package specs
