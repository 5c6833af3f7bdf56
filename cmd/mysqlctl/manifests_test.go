package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// readYAMLDocs decodes every document of every YAML file in dir.
func readYAMLDocs(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in %s (%v)", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
	}
	return out
}

// TestWatchManifestsApply: manifests/watch/ applies cleanly to a real API server (server-side
// apply with dryRun=All, in its namespace), and its ClusterRole grants exactly the rules of the
// Role `install --rbac` applies.
func TestWatchManifestsApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	objs := readYAMLDocs(t, filepath.Join("..", "..", "manifests", "watch"))
	c := kubeClient(t)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mysqlctl"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := c.RESTMapper()
	kinds := map[string]bool{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		kinds[gvk.Kind] = true
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := u.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "test", DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("%s %s does not apply: %v", gvk.Kind, u.GetName(), err)
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"} {
		if !kinds[k] {
			t.Errorf("manifests/watch has no %s", k)
		}
	}

	var role rbacv1.Role
	var clusterRole rbacv1.ClusterRole
	for file, into := range map[string]any{"rbac/role.yaml": &role, "watch/clusterrole.yaml": &clusterRole} {
		b, err := os.ReadFile(filepath.Join("..", "..", "manifests", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if !reflect.DeepEqual(role.Rules, clusterRole.Rules) {
		t.Errorf("manifests/watch/clusterrole.yaml's rules differ from manifests/rbac/role.yaml's")
	}
	// The Deployment runs the watch with leader election and metrics on the port its probes use.
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		text, _ := yaml.Marshal(containers)
		for _, want := range []string{"- watch", "- --all-namespaces", "- --leader-elect", "- --metrics-addr=:9090", "path: /readyz", "path: /healthz"} {
			if !strings.Contains(string(text), want) {
				t.Errorf("the Deployment's container lacks %q", want)
			}
		}
		if r, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
			t.Errorf("the Deployment runs %v replicas, want 2", r)
		}
	}
}
