//go:build tools

// Package tools pins the Kubernetes control-plane commands this module builds.
// It exists only so `go mod tidy` keeps their dependencies; see hack/build-controlplane.sh.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
