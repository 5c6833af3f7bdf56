// Package manifests embeds the Kubernetes manifests mysqlctl applies itself: the generated
// MysqlCluster CRD (crd/, from `make generate`) and the namespaced RBAC set (rbac/) that
// `mysqlctl install --rbac` applies.
package manifests

import "embed"

// FS holds crd/*.yaml and rbac/*.yaml.
//
//go:embed crd/*.yaml rbac/*.yaml
var FS embed.FS
