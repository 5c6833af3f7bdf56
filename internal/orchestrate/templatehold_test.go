package orchestrate

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestTemplateHeldMidRollout, against the real API server: with a pod already on a revision
// other than the StatefulSet's current one, a changed template (another mysqlConfig) is not
// written and the partition is not raised; the StatefulSet keeps the template it rolls out and
// is reported Held. Once every pod runs the current revision, the change is written. Each
// configuration gets its own ConfigMap, and one that no revision names is deleted while one a
// ControllerRevision still names is kept.
func TestTemplateHeldMidRollout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, key, get := clustertest.RequestCluster(t, ctx, env, "held")
	cluster := get()
	if _, err := ApplyDerived(ctx, c, cluster, specs.Convergence{}); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, key, sts); err != nil {
		t.Fatal(err)
	}
	oldImage := sts.Spec.Template.Spec.Containers[0].Image
	// A rollout part-way: the partition lowered to 2, held-2 on revision r2, the others on r1.
	two := int32(2)
	sts.Spec.UpdateStrategy.RollingUpdate.Partition = &two
	if err := c.Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 3, CurrentRevision: "held-r1", UpdateRevision: "held-r2"}
	if err := c.Status().Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	oldCM := ""
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			oldCM = v.ConfigMap.Name
		}
	}
	// The current revision as the controller keeps it: the old image, the old ConfigMap.
	raw, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: specs.ContainerName, Image: oldImage}},
		Volumes: []corev1.Volume{{Name: "conf",
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: oldCM}}}}},
	}})
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "held-r1", Namespace: "default", Labels: specs.LabelsWith(cluster, "database")}, Revision: 1}
	var err error
	if rev.Data.Raw, err = json.Marshal(map[string]any{"spec": map[string]any{"template": raw, "$patch": "replace"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// held-2 ran the new image; held-1 was made from the new revision too, but its image never
	// pulled (it holds nothing).
	for i, p := range []struct {
		rev, image string
		ran        bool
	}{{"held-r1", oldImage, true}, {"held-r2", "mariadb:11.99", false}, {"held-r2", "mariadb:11.4", true}} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "held-" + string(rune('0'+i)), Namespace: "default", Labels: specs.LabelsWith(cluster, "database")},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: specs.ContainerName, Image: p.image}}},
		}
		pod.Labels[revisionLabel] = p.rev
		if err := c.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		state := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
		if p.ran {
			state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: specs.ContainerName, Image: p.image, State: state}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}

	changed := get()
	changed.Spec.MysqlConfig = map[string]string{"max_connections": "345"}
	applied, err := ApplyDerived(ctx, c, changed, specs.Convergence{})
	if err != nil {
		t.Fatal(err)
	}
	var stsLine string
	for _, a := range applied {
		if a.Kind == "StatefulSet" {
			stsLine = a.String()
		}
	}
	if !strings.Contains(stsLine, "held") || !strings.Contains(stsLine, "held-2") || strings.Contains(stsLine, "held-1") {
		t.Fatalf("the StatefulSet's line is %q, want held naming held-2 (not held-1, which never ran)", stsLine)
	}
	live := &appsv1.StatefulSet{}
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	if p := live.Spec.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 2 || live.Spec.Template.Spec.Containers[0].Image != oldImage || !volumeNames(live, oldCM) {
		t.Fatalf("mid-rollout the StatefulSet changed: partition %v, template volumes %+v", p, live.Spec.Template.Spec.Volumes)
	}

	// The rollout finished (every pod on the current revision): the change is written.
	live.Status.CurrentRevision = "held-r2"
	if err := c.Status().Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"held-0", "held-1"} {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: n}, p); err != nil {
			t.Fatal(err)
		}
		p.Labels[revisionLabel] = "held-r2"
		if err := c.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// The revision the controller keeps still names the old ConfigMap; a third one names none.
	cnf, err := specs.RenderMyCnf(changed)
	if err != nil {
		t.Fatal(err)
	}
	newCM := specs.ConfigMapName(changed, cnf)
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held-config-0000000000000000", Namespace: "default", Labels: specs.LabelsWith(cluster, "config")}}
	if err := c.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	// Pods read nothing here: they mount the old ConfigMap only through the revision.
	for _, n := range []string{"held-0", "held-1", "held-2"} {
		if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "default"}}); err != nil {
			t.Fatal(err)
		}
	}
	applied, err = ApplyDerived(ctx, c, changed, specs.Convergence{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range applied {
		if a.Result == Held {
			t.Fatalf("after the rollout: %s", a)
		}
	}
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	if !volumeNames(live, newCM) {
		t.Fatalf("the change was not written: template volumes %+v", live.Spec.Template.Spec.Volumes)
	}
	if p := live.Spec.UpdateStrategy.RollingUpdate.Partition; p == nil || *p != 3 {
		t.Fatalf("a new template was written with partition %v, want 3 (every pod held back)", p)
	}
	for name, want := range map[string]bool{oldCM: true, newCM: true, orphan.Name: false} {
		err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.ConfigMap{})
		if kept := err == nil; kept != want || err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s: kept %v (%v), want kept %v", name, kept, err, want)
		}
	}
}

// volumeNames reports whether the StatefulSet's template mounts the ConfigMap name.
func volumeNames(s *appsv1.StatefulSet, name string) bool {
	for _, v := range s.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	return false
}
