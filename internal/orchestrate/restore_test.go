package orchestrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
)

// TestRestoreLeavesOthersObjects attacks what a restore finds under its own names: a Job it did
// not make (someone else's, not an earlier restore's) is refused and left alone, never deleted;
// an earlier cluster's restore Job is deleted and waited for; a volume claim of an earlier
// cluster that is being deleted is waited for (never restored into, never refused for good).
func TestRestoreLeavesOthersObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := recordingClient(t)
	r := &Runner{Kube: c, Holder: "test-restore", Epoch: 1}
	cl := guardCluster("rs-foreign", 1)
	cl.Spec.Backup = &v1.BackupSpec{Bucket: "bucket", Endpoint: "http://127.0.0.1:9", CredentialsSecretName: "bucket-creds"}
	cl.Spec.Restore = &v1.RestoreSpec{SourceNamespace: "default", SourceCluster: "src", BackupID: "20261206T120000Z",
		Key: "default/src/backups/20261206T120000Z/data.xbstream.zst", Size: 1, SHA256: strings.Repeat("ab", 32)}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cl) })

	name := specs.RestoreJobName(cl)
	foreign := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": "theirs"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "busybox"}},
		}}},
	}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), foreign, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	_, _, err := r.bsRestoringData(ctx, &stageEnv{c: cl})
	if !errors.Is(err, outcome.ErrUnsafe) || !strings.Contains(err.Error(), "is not a restore Job of mysqlctl") {
		t.Fatalf("a foreign Job under the restore Job's name: %v, want refused as unsafe", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), &batchv1.Job{}); err != nil {
		t.Fatalf("the foreign Job after the refusal: %v, want it left alone", err)
	}

	// An earlier cluster's restore Job (its labels, its owner gone): deleted, and waited for.
	earlier := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), earlier); err != nil {
		t.Fatal(err)
	}
	earlier.Labels = map[string]string{specs.LabelManagedBy: specs.FieldOwner, specs.LabelComponent: specs.RestoreComponent, specs.LabelInstance: cl.Name}
	if err := c.Update(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.bsRestoringData(ctx, &stageEnv{c: cl})
	var wait errNotYet
	if !errors.As(err, &wait) || !strings.Contains(err.Error(), "of an earlier cluster") {
		t.Fatalf("an earlier cluster's restore Job: %v, want it deleted and waited for", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(foreign), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the earlier cluster's restore Job: %v, want it deleted", err)
	}

	// A claim of an earlier cluster, held by a finalizer while it is deleted: waited for.
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: specs.DataClaimName(cl, 0), Finalizers: []string{"test.mysqlctl.io/hold"}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p := &corev1.PersistentVolumeClaim{}
		if c.Get(context.Background(), client.ObjectKeyFromObject(pvc), p) == nil {
			p.Finalizers = nil
			_ = c.Update(context.Background(), p)
		}
		_ = c.Delete(context.Background(), pvc)
	})
	if err := r.claimRestoreVolume(ctx, cl); !errors.Is(err, outcome.ErrUnsafe) {
		t.Fatalf("a kept claim of an earlier cluster: %v, want refused as unsafe", err)
	}
	if err := c.Delete(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	err = r.claimRestoreVolume(ctx, cl)
	if !errors.As(err, &wait) || !strings.Contains(err.Error(), "is being deleted") {
		t.Fatalf("a claim being deleted: %v, want it waited for", err)
	}
}
