package orchestrate

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// EventSource names mysqlctl as the reporting component of its Events.
const EventSource = "mysqlctl"

// event records a decision as a Kubernetes Event on the cluster, so that `kubectl describe` and
// `kubectl get events` tell the story next to the status. Events are best effort: a refused
// Event never stops an operation, whose persisted status remains the record.
func (r *Runner) event(ctx context.Context, c *v1.MysqlCluster, warning bool, reason, message string) {
	if r.Kube == nil {
		return
	}
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(message) > 1000 {
		message = message[:997] + "..."
	}
	now := metav1.NewTime(r.now())
	e := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, GenerateName: c.Name + "."},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster", Namespace: c.Namespace, Name: c.Name,
			UID: c.UID, ResourceVersion: c.ResourceVersion,
		},
		Reason: reason, Message: strings.TrimSpace(message), Type: typ,
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Source:              corev1.EventSource{Component: EventSource},
		ReportingController: "mysqlctl.io/" + EventSource, ReportingInstance: r.Holder,
	}
	_ = r.Kube.Create(ctx, e)
}
