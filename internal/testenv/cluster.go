package testenv

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Cluster is a valid 3-instance MariaDB MysqlCluster db/demo that no server has seen, changed by
// each mutate in turn: the fixture of the unit tests of the builders and operations.
func Cluster(mutate ...func(*v1.MysqlCluster)) *v1.MysqlCluster {
	c := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "db", UID: "uid-1", Generation: 1},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3, Storage: v1.StorageSpec{Size: "1Gi"}},
	}
	for _, m := range mutate {
		m(c)
	}
	return c
}
