package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// TestUpgradeImageCompareAndSwap, against the real API server: upgrade --image writes the
// image only onto the spec it checked the version rules against. A status write in between
// (a supervisor's, every few seconds) does not refuse it; a spec changed in between (another
// upgrade --image) does, and nothing is written.
func TestUpgradeImageCompareAndSwap(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kc := kubeClient(t)
	cl := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "cas", Namespace: "default"}, Spec: v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: 3}}
	if err := kc.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kc.Delete(context.Background(), cl) }()
	ios, _, _, _ := iostreams.Test()
	f := newFactory(ios, "mysqlctl", func(string) string { return "" })
	kubeconfig := env.Kubeconfig
	f.ConfigFlags.KubeConfig = &kubeconfig
	read := func() *v1.MysqlCluster {
		t.Helper()
		c := &v1.MysqlCluster{}
		if err := kc.Get(ctx, client.ObjectKeyFromObject(cl), c); err != nil {
			t.Fatal(err)
		}
		return c
	}

	checked := read()
	live := read()
	live.Status.Phase = v1.PhaseRunning
	if err := kc.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := (&UpgradeOptions{f: f, Image: "mariadb:11.4"}).setImage(ctx, checked); err != nil {
		t.Fatalf("a status write in between refused the image: %v", err)
	}
	if img := read().Spec.Image; img != "mariadb:11.4" {
		t.Fatalf("spec.image %s, want mariadb:11.4", img)
	}

	checked = read()
	other := read()
	other.Spec.Image = "mariadb:11.8"
	if err := kc.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	err := (&UpgradeOptions{f: f, Image: "mariadb:11.6"}).setImage(ctx, checked)
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "changed while") {
		t.Fatalf("a spec changed in between: %v, want a refusal", err)
	}
	if img := read().Spec.Image; img != "mariadb:11.8" {
		t.Fatalf("spec.image %s after the refusal, want the other command's mariadb:11.8", img)
	}
}
