package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Provisioner is the provisioner name of the rig's StorageClass.
const Provisioner = "rig.mysqlctl.io/hostpath"

// Annotations the PV controller and the scheduler set on claims (k8s.io/component-helpers/storage/volume).
const (
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annSelectedNode           = "volume.kubernetes.io/selected-node"
	annProvisionedBy          = "pv.kubernetes.io/provisioned-by"
	annDefaultStorageClass    = "storageclass.kubernetes.io/is-default-class"
)

// ensureStorageClass creates the rig's default StorageClass: volumes are provisioned when the first
// pod using a claim is scheduled (WaitForFirstConsumer), as with node-local storage in a cluster.
func (a *Agent) ensureStorageClass(ctx context.Context) error {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        a.cfg.StorageClass,
			Annotations: map[string]string{annDefaultStorageClass: "true"},
		},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	_, err := a.cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create storage class: %w", err)
	}
	return nil
}

// volumesDir holds one directory per provisioned volume.
func (a *Agent) volumesDir() string { return filepath.Join(a.cfg.Dir, "volumes") }

// onClaim provisions a volume for a claim the PV controller handed to this provisioner.
func (a *Agent) onClaim(obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending {
		return
	}
	if pvc.Annotations[annStorageProvisioner] != Provisioner && pvc.Annotations[annBetaStorageProvisioner] != Provisioner {
		return
	}
	if node, ok := pvc.Annotations[annSelectedNode]; ok && node != a.cfg.NodeName {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
		defer cancel()
		if err := a.provision(ctx, pvc); err != nil && a.ctx.Err() == nil {
			a.logf("provision %s/%s: %v", pvc.Namespace, pvc.Name, err)
		}
	}()
}

func (a *Agent) provision(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(pvc.UID)
	if _, err := a.pvLister.Get(name); err == nil {
		return nil
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class != "" {
		if sc, err := a.cs.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{}); err == nil && sc.ReclaimPolicy != nil {
			reclaim = *sc.ReclaimPolicy
		}
	}
	dir := filepath.Join(a.volumesDir(), name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{annProvisionedBy: Provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: labelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{a.cfg.NodeName},
				}}}},
			}},
		},
	}
	if _, err := a.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	a.logf("provisioned %s for claim %s/%s at %s", name, pvc.Namespace, pvc.Name, dir)
	return nil
}

// onVolume deletes the directory and the object of a released volume this provisioner made, when
// its reclaim policy is Delete (the claim is gone, so its data goes too, as with any dynamic volume).
func (a *Agent) onVolume(obj any) {
	pv, ok := obj.(*corev1.PersistentVolume)
	if !ok || pv.Annotations[annProvisionedBy] != Provisioner || pv.DeletionTimestamp != nil {
		return
	}
	if pv.Status.Phase != corev1.VolumeReleased || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if dir, err := a.volumeDir(pv); err == nil {
			if err := os.RemoveAll(dir); err != nil {
				a.logf("delete volume %s: %v", pv.Name, err)
				return
			}
		}
		ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
		defer cancel()
		err := a.cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err != nil && !apierrors.IsNotFound(err) && a.ctx.Err() == nil {
			a.logf("delete volume %s: %v", pv.Name, err)
			return
		}
		a.logf("deleted released volume %s", pv.Name)
	}()
}

// volumeDir is the host directory of a volume, refusing any this provisioner did not make.
func (a *Agent) volumeDir(pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("volume %s is not a host path volume", pv.Name)
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	if !strings.HasPrefix(dir, a.volumesDir()+string(filepath.Separator)) {
		return "", fmt.Errorf("volume %s (%s) was not provisioned by this rig", pv.Name, dir)
	}
	return dir, nil
}

// claimDir resolves a bound claim to its host directory.
func (a *Agent) claimDir(namespace, name string) (string, error) {
	pvc, err := a.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return "", fmt.Errorf("persistentvolumeclaim %s/%s: %w", namespace, name, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", errClaimPending
	}
	pv, err := a.pvLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("persistentvolume %s: %w", pvc.Spec.VolumeName, err)
	}
	switch {
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("persistentvolume %s: only hostPath and local volumes can be mounted by the rig", pv.Name)
}

var errClaimPending = errors.New("claim not bound yet")

// WipeClaim deletes the contents of a claim's volume (disk loss). A pod still using it keeps its open
// files; the next start of its server finds an empty datadir.
func (a *Agent) WipeClaim(namespace, name string) error {
	pvc, err := a.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if err != nil {
		return fmt.Errorf("persistentvolumeclaim %s/%s: %w", namespace, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return fmt.Errorf("persistentvolumeclaim %s/%s is not bound", namespace, name)
	}
	pv, err := a.pvLister.Get(pvc.Spec.VolumeName)
	if err != nil {
		return err
	}
	dir, err := a.volumeDir(pv)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	a.logf("wiped the data of claim %s/%s (%s)", namespace, name, dir)
	return nil
}
