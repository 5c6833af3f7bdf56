package supervisor

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// TestSentinelThatCannotLogInBacksOff: a sentinel whose login fails (a real loopback port that
// closes every connection) pokes no check, and the healthy checks that call watchSentinel every 10 ms
// start it again further and further apart, not at every check; a new primary starts afresh.
func TestSentinelThatCannotLogInBacksOff(t *testing.T) {
	// A listener that closes every connection at once: each login fails, and the port stays
	// this test's.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	var logins atomic.Int32
	r := orchestrate.Runner{Connect: func(ctx context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
		logins.Add(1)
		return topology.Connect(topology.Target{Name: pod.Name, Host: "127.0.0.1", Port: port},
			topology.ConnectOptions{Dialer: topology.DirectDialer{Timeout: time.Second}, Credentials: creds})
	}}
	w := &watcher{s: &Supervisor{Runner: r}, wake: make(chan struct{}, 1), repairWake: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer func() {
		if w.sentinel != nil {
			w.sentinel.stop()
			<-w.sentinel.done
		}
	}()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", UID: "a"}, Status: corev1.PodStatus{PodIP: "127.0.0.1"}}
	const interval = 100 * time.Millisecond
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		w.watchSentinel(ctx, r, pod, orchestrate.Credentials{Root: "x"}, interval)
		time.Sleep(10 * time.Millisecond)
	}
	// Runs started at 0 and then 100, 200, 400 ms after each failure: 4 or 5 in a second,
	// where starting one at every check would be about 90.
	if n := logins.Load(); n < 2 || n > 6 {
		t.Errorf("%d sentinel logins in a second of checks 10 ms apart; want 2 to 6 (backing off)", n)
	}
	select {
	case <-w.wake:
		t.Error("a sentinel whose login failed poked a check")
	default:
	}
	// Another primary incarnation: started at once.
	before := logins.Load()
	pod2 := pod.DeepCopy()
	pod2.UID = "b"
	w.watchSentinel(ctx, r, pod2, orchestrate.Credentials{Root: "x"}, interval)
	<-w.sentinel.done
	if n := logins.Load(); n != before+1 {
		t.Errorf("a new primary's sentinel was not started at once (%d logins, was %d)", n, before)
	}
}
