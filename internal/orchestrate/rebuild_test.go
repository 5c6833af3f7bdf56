package orchestrate

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// TestAbortRebuild: abort is the way out of a rebuild that cannot go on (its donor gone, its
// pod never back): a recorded one ends as Aborted, a stopped one is cleared, and in both cases
// status.scale is gone (scale and reconcile are free again) while the instance stays
// quarantined, its data possibly half replaced.
func TestAbortRebuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := recordingClient(t)
	r := &Runner{Kube: c, Holder: "test-abort", Epoch: 1}
	for _, recorded := range []bool{true, false} {
		name := map[bool]string{true: "rb-recorded", false: "rb-stopped"}[recorded]
		createGuarded(t, ctx, c, name, func(s *v1.MysqlClusterStatus) {
			s.Phase, s.CurrentPrimary = v1.PhaseDegraded, name+"-0"
			s.Scale = &v1.ScaleStatus{ID: "rebuild-1", From: 3, To: 3, Replicas: 3, Action: ScaleRebuild, Ordinal: 2, Donor: name + "-1", SeedMethod: "copy"}
			s.ErrantInstances = []v1.ErrantInstance{{Name: name + "-2", Reason: "being rebuilt"}}
			if recorded {
				s.Operation = &v1.OperationStatus{ID: "rebuild-1", Type: OperationRebuild, Stage: StageSeeding, Holder: r.Holder, Epoch: r.Epoch, StartedAt: metav1.Now()}
			}
		})
		msg, err := r.Abort(ctx, client.ObjectKey{Namespace: "default", Name: name})
		if err != nil || !strings.Contains(msg, "stays quarantined") {
			t.Fatalf("%s: abort: %q, %v", name, msg, err)
		}
		cl := &v1.MysqlCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cl); err != nil {
			t.Fatal(err)
		}
		st := cl.Status
		if st.Scale != nil || st.Operation != nil || len(st.ErrantInstances) != 1 || st.Phase != v1.PhaseDegraded {
			t.Fatalf("%s after abort: scale %+v, operation %+v, errant %+v, phase %s", name, st.Scale, st.Operation, st.ErrantInstances, st.Phase)
		}
		if recorded && (len(st.History) == 0 || st.History[0].Result != "Aborted" || st.History[0].Type != OperationRebuild) {
			t.Fatalf("%s: history %+v, want the rebuild Aborted", name, st.History)
		}
		if pending, err := ScalePending(ctx, c, cl); err != nil || pending {
			t.Fatalf("%s: a scale still pending after the abort: %v %v", name, pending, err)
		}
	}
}
