package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/metrics"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
)

// WatchOptions holds the watch command's flags.
type WatchOptions struct {
	f *cmdutil.Factory

	Name          string
	AllNamespaces bool
	Selector      string
	Output        string
	Dialer        string
	Grace         time.Duration
	MetricsAddr   string
	LeaderElect   bool
	LeaderLease   string
	LeaderNS      string
}

// NewCmdWatch supervises clusters until interrupted.
func NewCmdWatch(f *cmdutil.Factory, runF func(*WatchOptions) error) *cobra.Command {
	o := &WatchOptions{f: f}
	cmd := &cobra.Command{
		Use:   "watch [NAME | -A | -l SELECTOR]",
		Short: "Supervise clusters: detect a dead primary and fail over by itself",
		Long: `Watch supervises one cluster, every cluster in the namespace, or (-A) in every namespace, until
it receives SIGINT or SIGTERM.

Every failover.detectionInterval (default 1s) it checks each cluster's primary with a timeout
shorter than the interval (and at once when its pods, its endpoints or its spec change, or a
request arrives), and records the HA state with its evidence in status.ha:

  Healthy            the primary answers and is writable
  Suspected          it failed fewer than failover.failureThreshold consecutive checks, or it is
                     unreachable from here while a replica still receives from it (unreachable is
                     not dead: nothing is done), or no replica can vouch for its death
  FailoverRequired   it failed the threshold of checks and every reachable replica lost it (or it
                     restarted read-only): a failover starts at once, through the same recorded
                     stages, evidence and refusals as the failover command
  Degraded           a failover is needed but withheld: the last one finished inside
                     failover.cooldown, or an automatic failover failed; the exact command a
                     person would run is in the reason

A refused connection (or a pod gone, or a read-only answer) is re-checked at a sixteenth of the
interval (at least 25ms); a silent primary at the full interval until every replica has lost it
too, because a frozen or partitioned server needs the replicas' view to tell it from a slow
network. A session kept asleep on the primary (a quarter of the interval at a time) starts a check
at once when it ends, or when its answer is late (at most once an interval); one that cannot log
in starts none. spec.paused or failover.auto=false: watch observes
and reports only.

An operation recorded in status whose holder stopped (a killed laptop, a cancelled CI job, a
killed watch) is continued from its recorded stage once the holder's lease expires.

A cluster with spec.backup.schedule (cron, in UTC) is backed up by the watch that supervises it:
one backup per schedule time, never two at once, continued by the next watch when this one dies;
times missed are counted in status.backup.schedule and reported.

One watch supervises a cluster at a time: it holds the Lease NAME-watch while it runs. A second
watch of the same cluster stands by and takes over when the first stops (at once after SIGTERM,
within 15s after a SIGKILL). While a watch supervises a cluster, switchover, failover, resume and
abort run from another terminal hand their request to it (the mysqlctl.io/request annotation),
follow its progress and exit with its outcome; the outcome is kept in status.request.

With --leader-elect, several watch processes (a Deployment's replicas, two terminals) elect a
leader on a Lease and only the leader supervises; another takes over about 15s after it dies.
With --metrics-addr it serves Prometheus metrics on /metrics, and /healthz and /readyz (see
manifests/monitoring/ for alert rules, manifests/watch/ for the in-cluster Deployment).

On SIGINT or SIGTERM the stage in hand finishes and records its successor (within --grace), the
Lease is released, and watch exits 0; a later watch or 'resume' continues from the status.

Output: on a terminal, a live view redrawn every second: one panel per cluster with its HA
state, primary, operation and stage, the last check of the primary, each instance's role,
replication threads, lag, GTID set and when it was last seen, and the latest transitions.
Off a terminal (a pipe, a log file, CI), one line per transition and action; with -o json, one
JSON object per line.`,
		Example: example(f,
			"# Supervise one cluster",
			"%[1]s watch demo",
			"# Every cluster in every namespace, JSON lines for a log pipeline",
			"%[1]s watch -A -o json",
			"# As in the Deployment: leader election, metrics for Prometheus",
			"%[1]s watch -A --leader-elect --metrics-addr 127.0.0.1:9090"),
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return cmdutil.FlagErrorf("%s takes at most one cluster NAME, got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Name = args[0]
			}
			if o.Name != "" && (o.AllNamespaces || o.Selector != "") {
				return cmdutil.FlagErrorf("a cluster NAME goes without -A and -l")
			}
			if _, err := labels.Parse(o.Selector); err != nil {
				return cmdutil.FlagErrorf("-l %q: %v", o.Selector, err)
			}
			if err := cmdutil.ValidateOutput(o.Output, "text", cmdutil.OutputJSON); err != nil {
				return err
			}
			if runF != nil {
				return runF(o)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.Run(ctx)
		},
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Supervise every cluster in every namespace")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "Supervise only clusters with these labels (as kubectl -l)")
	cmd.Flags().DurationVar(&o.Grace, "grace", 10*time.Second, "On SIGINT/SIGTERM, how long the stage in hand may take to finish")
	cmd.Flags().BoolVar(&o.LeaderElect, "leader-elect", false, "Supervise only while this process leads (client-go leader election on a Lease): run two or more for a standby that takes over about 15s after the leader dies")
	cmd.Flags().StringVar(&o.LeaderLease, "leader-elect-lease", "", "With --leader-elect: the name of the Lease the watch processes elect their leader on (default: one per scope, mysqlctl.watch-leader for -A)")
	cmd.Flags().StringVar(&o.LeaderNS, "leader-elect-namespace", "", "With --leader-elect: the namespace of that Lease (default: the namespace of -n, the kubeconfig, or the pod)")
	cmd.Flags().StringVar(&o.MetricsAddr, "metrics-addr", "", "Serve Prometheus metrics on /metrics (and /healthz, /readyz) at this address, for example 127.0.0.1:9090 or :9090 in a pod")
	cmdutil.AddOutputFlag(cmd, &o.Output, "text", cmdutil.OutputJSON)
	addDialerFlag(cmd, &o.Dialer)
	return cmd
}

// Run supervises until ctx ends.
func (o *WatchOptions) Run(ctx context.Context) error {
	c, err := o.f.Client()
	if err != nil {
		return err
	}
	connect, closeFn, err := o.f.Connector(o.Dialer)
	if err != nil {
		return err
	}
	defer closeFn()
	observeConnect, closePools, err := o.f.PooledConnector(o.Dialer)
	if err != nil {
		return err
	}
	defer closePools()
	ns := ""
	if !o.AllNamespaces {
		if ns, err = o.f.Namespace(); err != nil {
			return err
		}
	}
	if o.Name != "" {
		if _, _, err := loadCluster(ctx, o.f, o.Name); err != nil {
			return err
		}
	}
	out := &transitionPrinter{f: o.f, json: o.Output == cmdutil.OutputJSON}
	ios := o.f.IOStreams
	sup := &supervisor.Supervisor{
		Runner: orchestrate.Runner{Kube: c, Connect: connect, Holder: holderName()},
		// One line per stage entered, naming the cluster (one process watches many) and
		// stamped to the millisecond like the transitions, so a failover's stages can be timed.
		Progress: func(key client.ObjectKey, op v1.OperationStatus) {
			fmt.Fprintf(ios.ErrOut, "%s %s %s %s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), key, op.ID, op.Type, op.Stage)
		},
		Report:         out.print,
		Grace:          o.Grace,
		ObserveConnect: observeConnect,
	}
	if stage := o.f.Getenv(failpointPauseAtStage); stage != "" {
		// End-to-end tests: announce the stage, then hold until killed.
		sup.Runner.BeforeStage = func(ctx context.Context, s string) {
			if s == stage {
				fmt.Fprintf(ios.ErrOut, "failpoint: paused at stage %s\n", s)
				<-ctx.Done()
			}
		}
	}
	if hold := o.f.Getenv(failpointHoldAtStage); hold != "" {
		stage, d, _ := strings.Cut(hold, "=")
		wait, err := time.ParseDuration(d)
		if err != nil {
			return fmt.Errorf("%s=%q: want STAGE=DURATION: %w", failpointHoldAtStage, hold, err)
		}
		var once sync.Once
		before := sup.Runner.BeforeStage
		sup.Runner.BeforeStage = func(ctx context.Context, s string) {
			if before != nil {
				before(ctx, s)
			}
			if s == stage {
				once.Do(func() {
					fmt.Fprintf(ios.ErrOut, "failpoint: holding at stage %s for %s\n", s, wait)
					select {
					case <-ctx.Done():
					case <-time.After(wait):
					}
				})
			}
		}
	}
	report := out.print
	if o.Output == "text" && ios.IsStdoutTTY() {
		// On a terminal: a live view instead of lines (and no progress lines under it: the
		// panel shows the operation's stage).
		view := newLiveView(c, ios.Out, ios.Styles())
		report, sup.Report, sup.Checked = view.print, view.print, view.checked
		sup.Progress = nil
		vctx, stopView := context.WithCancel(ctx)
		defer stopView()
		go view.run(vctx)
	}
	cfg, err := o.f.RESTConfig()
	if err != nil {
		return err
	}
	ictx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	var rec *metrics.Recorder
	var onCluster func(*v1.MysqlCluster, bool)
	if o.MetricsAddr != "" {
		rec = metrics.New()
		sup.Observer = rec
		onCluster = func(c *v1.MysqlCluster, deleted bool) {
			if deleted {
				rec.Forget(client.ObjectKeyFromObject(c))
				return
			}
			rec.Cluster(c)
		}
	}
	cache, err := supervisor.Cache(ictx, cfg, cmdutil.Scheme(), ns)
	if err != nil {
		return cmdutil.ExplainAPIError(err)
	}
	sup.Cache = cache
	if err := supervisor.WakeOnChanges(ictx, cache, sup, onCluster); err != nil {
		return err
	}
	if rec != nil {
		stopServer, err := serveMetrics(ctx, o.MetricsAddr, rec, func() bool { return cache.WaitForCacheSync(ctx) })
		if err != nil {
			return err
		}
		defer stopServer()
		fmt.Fprintf(ios.ErrOut, "metrics on http://%s/metrics\n", o.MetricsAddr)
	}
	sel, _ := labels.Parse(o.Selector)
	if !o.LeaderElect {
		return superviseAll(ctx, c, sup, ns, o.Name, sel, report)
	}
	leaderNS := o.LeaderNS
	if leaderNS == "" {
		if leaderNS, err = o.f.Namespace(); err != nil {
			return err
		}
	}
	setLeader := func(bool) {}
	if rec != nil {
		rec.SetLeader(false)
		setLeader = rec.SetLeader
	}
	lease := o.LeaderLease
	if lease == "" {
		lease = supervisor.LeaderLeaseName(o.AllNamespaces, ns, o.Name, o.Selector)
	}
	le := supervisor.LeaderElection{Namespace: leaderNS, Name: lease, Identity: sup.Runner.Holder, SetLeader: setLeader, Report: report}
	return le.Run(ctx, cfg,
		func(lctx context.Context) { _ = superviseAll(lctx, c, sup, ns, o.Name, sel, report) },
		func(sctx context.Context) {
			// Standing by: observe the Leases of every cluster in scope (the observations run
			// on until the cluster's Watch takes them over, if this process comes to lead).
			forEachCluster(sctx, c, ns, o.Name, sel, report, func(key client.ObjectKey) { sup.Prewatch(ctx, key) })
		})
}

// superviseAll runs one supervisor per cluster, discovering clusters as they appear.
func superviseAll(ctx context.Context, c client.Client, sup *supervisor.Supervisor, ns, name string, sel labels.Selector, report func(supervisor.Transition)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[client.ObjectKey]bool{}
	var mu sync.Mutex
	start := func(key client.ObjectKey) {
		mu.Lock()
		defer mu.Unlock()
		if running[key] {
			return
		}
		running[key] = true
		report(supervisor.Transition{Time: time.Now(), Namespace: key.Namespace, Cluster: key.Name, Action: "watch", Reason: "found: taking its supervisor Lease"})
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sup.Watch(ctx, key)
			mu.Lock()
			delete(running, key)
			mu.Unlock()
		}()
	}
	if name != "" {
		start(client.ObjectKey{Namespace: ns, Name: name})
		wg.Wait()
		return nil
	}
	forEachCluster(ctx, c, ns, "", sel, report, start)
	return nil
}

// forEachCluster calls fn for every cluster in scope (the one named, or those in ns, "" for all,
// matching sel), and again every 5 seconds for the clusters found then, until ctx ends.
func forEachCluster(ctx context.Context, c client.Client, ns, name string, sel labels.Selector, report func(supervisor.Transition), fn func(client.ObjectKey)) {
	for {
		if name != "" {
			fn(client.ObjectKey{Namespace: ns, Name: name})
		} else {
			list := &v1.MysqlClusterList{}
			opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
			if ns != "" {
				opts = append(opts, client.InNamespace(ns))
			}
			if err := c.List(ctx, list, opts...); err != nil && ctx.Err() == nil {
				report(supervisor.Transition{Time: time.Now(), Action: "error", Reason: "listing clusters: " + cmdutil.ExplainAPIError(err).Error()})
			}
			for i := range list.Items {
				fn(client.ObjectKeyFromObject(&list.Items[i]))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// transitionPrinter writes one line (or one JSON object) per transition.
type transitionPrinter struct {
	f    *cmdutil.Factory
	json bool
	mu   sync.Mutex
}

func (p *transitionPrinter) print(t supervisor.Transition) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.f.IOStreams.Out
	if p.json {
		b, _ := json.Marshal(t)
		fmt.Fprintln(w, string(b))
		return
	}
	what := t.Action
	if t.To != "" {
		from := t.From
		if from == "" {
			from = "-"
		}
		what = from + " -> " + t.To
	}
	where := t.Namespace + "/" + t.Cluster
	if t.Cluster == "" {
		where = "-" // about this process (leadership), not one cluster
	}
	fmt.Fprintf(w, "%s %s %s: %s\n", t.Time.UTC().Format("2006-01-02T15:04:05.000Z"), where, what, t.Reason)
}

// serveMetrics serves /metrics, /healthz (the process runs) and /readyz (its view of the
// clusters has synced) at addr until stop is called.
func serveMetrics(ctx context.Context, addr string, rec *metrics.Recorder, synced func() bool) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cmdutil.FlagErrorf("--metrics-addr %s: %v", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", rec.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		// A supervisor that stopped checking (hung) fails its liveness probe and is restarted;
		// 5 minutes leaves room for the longest operation, during which no check runs.
		if key := rec.Stalled(5 * time.Minute); key != "" {
			http.Error(w, "the supervision of "+key+" has made no check for 5 minutes", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "the cluster informer has not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
