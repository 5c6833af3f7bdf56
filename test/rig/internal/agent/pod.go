package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// volumeResync is how often ConfigMap, Secret and downward API volumes are refreshed (the kubelet
// takes up to a minute; the rig is quicker so tests need not wait).
const volumeResync = 5 * time.Second

// ctr is the agent's record of one container of a pod (init or regular).
type ctr struct {
	spec corev1.Container
	init bool

	// Owned by the worker goroutine; read under podWorker.mu by faults and info.
	proc         *process // current instance, or the last one
	running      bool
	instance     int
	restartCount int32
	startedAt    time.Time
	started      bool // the startup probe passed (or there is none)
	ready        bool
	answered     *atomic.Bool // a server container answered on its port since this start
	cancelProbes context.CancelFunc
	env          []string
	workDir      string
	server       bool

	crashes        int
	nextStart      time.Time
	lastTerminated *corev1.ContainerStateTerminated
	terminated     *corev1.ContainerStateTerminated // final state (completed init container, no restart)
	waitingReason  string
	waitingMessage string
}

// workerEvent reaches the worker goroutine from process waiters and probers.
type workerEvent struct {
	container string
	instance  int
	exited    bool
	probe     probeKind
	ok        bool
}

// podWorker runs one pod: it is the pod's sandbox, container runtime and status manager.
type podWorker struct {
	a                     *Agent
	uid                   types.UID
	namespace, name, key  string
	dir                   string
	events                chan workerEvent
	updated               chan struct{}
	stopCh, goneCh, loseC chan struct{}
	lostDone              chan struct{} // closed once a lost pod's processes are gone
	stopOnce, goneOnce    sync.Once
	loseOnce              sync.Once

	mu         sync.Mutex
	pod        *corev1.Pod
	ip         string
	addressed  bool // the sandbox holds ip: the pod's DNS names resolve to it (hosts.go)
	cgroup     string
	lost       bool
	containers []*ctr // init containers first, in spec order

	// Owned by the worker goroutine.
	sandbox     bool
	vols        map[string]string
	tokens      map[string]podToken // service account tokens by audience and lifetime (volumes.go)
	volSynced   time.Time
	volErr      error
	startTime   *metav1.Time
	failed      bool // restartPolicy forbids another start of a failed init container
	terminating bool
	confirmed   bool // the deletion was confirmed to the API server
}

func newPodWorker(a *Agent, pod *corev1.Pod) *podWorker {
	w := &podWorker{
		a:         a,
		uid:       pod.UID,
		namespace: pod.Namespace,
		name:      pod.Name,
		key:       pod.Namespace + "/" + pod.Name,
		dir:       filepath.Join(a.cfg.Dir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)),
		events:    make(chan workerEvent, 64),
		updated:   make(chan struct{}, 1),
		stopCh:    make(chan struct{}),
		goneCh:    make(chan struct{}),
		loseC:     make(chan struct{}),
		lostDone:  make(chan struct{}),
		pod:       pod,
	}
	for _, c := range pod.Spec.InitContainers {
		w.containers = append(w.containers, &ctr{spec: c, init: true, answered: new(atomic.Bool)})
	}
	for _, c := range pod.Spec.Containers {
		w.containers = append(w.containers, &ctr{spec: c, answered: new(atomic.Bool)})
	}
	return w
}

func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	// The informer can deliver an older version after the worker's own status write returned a
	// newer one; resource versions of one object are etcd revisions, so they order.
	if newer, older := rvNumber(pod.ResourceVersion), rvNumber(w.pod.ResourceVersion); newer > 0 && older > 0 && newer < older {
		w.mu.Unlock()
		return
	}
	w.pod = pod
	w.mu.Unlock()
	select {
	case w.updated <- struct{}{}:
	default:
	}
}

// gone tells the worker the pod object no longer exists (deleted with grace period 0 by someone).
func (w *podWorker) gone() { w.goneOnce.Do(func() { close(w.goneCh) }) }

// shutdown makes the worker kill everything without touching the API, and waits for it.
func (w *podWorker) shutdown() {
	w.stopOnce.Do(func() { close(w.stopCh) })
	w.mu.Lock()
	procs := w.procsLocked()
	w.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
}

func rvNumber(rv string) uint64 {
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func (w *podWorker) currentPod() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) hostname() string {
	pod := w.currentPod()
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func (w *podWorker) hostsPath() string { return filepath.Join(w.dir, "hosts") }

func (w *podWorker) resolvConfPath() string { return filepath.Join(w.dir, "resolv.conf") }

func (w *podWorker) procsLocked() []*process {
	var procs []*process
	for _, c := range w.containers {
		if c.proc != nil && !c.proc.exited() {
			procs = append(procs, c.proc)
		}
	}
	return procs
}

func (w *podWorker) container(name string) *ctr {
	for _, c := range w.containers {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

// run is the worker goroutine.
func (w *podWorker) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, done := w.sync()
		if done {
			return
		}
		if next <= 0 || next > volumeResync {
			next = volumeResync
		}
		timer.Reset(next)
		select {
		case <-w.stopCh:
			w.killAll()
			w.teardownSandbox(false)
			return
		case <-w.goneCh:
			w.a.logf("pod %s was removed from the API: killing its containers", w.key)
			w.killAll()
			w.teardownSandbox(true)
			return
		case <-w.loseC:
			w.loseNow()
			return
		case ev := <-w.events:
			w.handle(ev)
		case <-w.updated:
		case <-timer.C:
		}
		// Take every event that is already queued before the next sync.
		for drained := false; !drained; {
			select {
			case ev := <-w.events:
				w.handle(ev)
			default:
				drained = true
			}
		}
	}
}

// sync moves the pod one step towards its spec and writes its status. It returns when it wants to
// run again and whether the worker is finished.
func (w *podWorker) sync() (time.Duration, bool) {
	ctx := w.a.ctx
	if ctx.Err() != nil {
		return 0, false
	}
	pod := w.currentPod()
	if pod.DeletionTimestamp != nil {
		w.terminate(pod)
		return 0, true
	}
	if !w.sandbox {
		if err := w.setupSandbox(); err != nil {
			w.a.logf("pod %s: sandbox: %v", w.key, err)
			return time.Second, false
		}
	}
	if w.vols == nil || time.Since(w.volSynced) >= volumeResync {
		vols, err := w.prepareVolumes(ctx)
		w.volErr = err
		if err == nil {
			w.vols, w.volSynced = vols, time.Now()
		} else if !errors.Is(err, errVolumesPending) {
			w.a.logf("pod %s: volumes: %v", w.key, err)
		}
	}
	var next time.Duration
	if w.vols != nil && !w.failed {
		next = w.startContainers(ctx)
	}
	w.writeStatus(ctx)
	if w.vols == nil {
		return time.Second, false
	}
	return next, false
}

// startContainers runs the init containers one after the other, then starts (and restarts) the
// regular containers. It returns the time until the next back-off expires (0 for none).
func (w *podWorker) startContainers(ctx context.Context) time.Duration {
	now := time.Now()
	var next time.Duration
	due := func(c *ctr) bool {
		if c.nextStart.After(now) {
			if d := c.nextStart.Sub(now); next == 0 || d < next {
				next = d
			}
			return false
		}
		return true
	}
	for _, c := range w.containers {
		if !c.init {
			continue
		}
		if c.terminated != nil && c.terminated.ExitCode == 0 {
			continue // completed
		}
		if !c.running && due(c) {
			w.startContainer(ctx, c)
		}
		return next // one init container at a time, and regular ones only after all completed
	}
	for _, c := range w.containers {
		if c.init || c.running || c.terminated != nil {
			continue
		}
		if due(c) {
			w.startContainer(ctx, c)
		}
	}
	return next
}

// setupSandbox gives the pod its address, cgroup, directories, hosts and resolv.conf files.
func (w *podWorker) setupSandbox() error {
	ip, err := w.a.sub.allocate()
	if err != nil {
		return err
	}
	for _, d := range []string{"volumes", "containers", "logs"} {
		if err := os.MkdirAll(filepath.Join(w.dir, d), 0o755); err != nil {
			w.a.sub.release(ip)
			return err
		}
	}
	cg := w.a.net.podCgroup(string(w.uid))
	w.mu.Lock()
	w.ip, w.cgroup, w.addressed = ip, cg, true
	w.mu.Unlock()
	if err := w.a.writeDNSFiles(w); err != nil {
		w.mu.Lock()
		w.addressed = false
		w.mu.Unlock()
		w.a.sub.release(ip)
		return err
	}
	now := secs(time.Now())
	w.startTime = &now
	w.sandbox = true
	w.a.logf("pod %s: sandbox ready, address %s", w.key, ip)
	w.a.markDirty()
	return nil
}

// teardownSandbox releases what setupSandbox took; the pod's directory goes with it, its claims'
// data stays.
func (w *podWorker) teardownSandbox(removeDir bool) {
	w.mu.Lock()
	ip, cg := w.ip, w.cgroup
	// The address goes back to the pool: the pod's names stop resolving to it first, in every
	// other pod's hosts file, so that no name ever leads to the next pod given this address.
	w.addressed = false
	w.mu.Unlock()
	w.a.writeAllHosts()
	if err := w.a.net.restorePod(w.key); err != nil {
		w.a.logf("pod %s: remove network cut: %v", w.key, err)
	}
	removeCgroup(cg)
	if ip != "" {
		w.a.sub.release(ip)
	}
	if removeDir {
		_ = os.RemoveAll(w.dir)
	}
}

// startContainer starts one container, recording why when it cannot.
func (w *podWorker) startContainer(ctx context.Context, c *ctr) {
	kind, err := classifyImage(c.spec.Image, c.spec.Command)
	if err != nil {
		w.setWaiting(c, "ImageNotEmulated", err.Error(), 10*time.Second)
		return
	}
	env, vars, err := w.containerEnv(ctx, &c.spec, kind)
	if err != nil {
		w.setWaiting(c, "CreateContainerConfigError", err.Error(), 2*time.Second)
		return
	}
	if kind == imageMysqlctl && w.a.cfg.MysqlctlBinary == "" {
		w.setWaiting(c, "ImageNotEmulated", "image "+c.spec.Image+": the rig runs mysqlctl's image only when given the binary (rig.Options.MysqlctlBinary)", 10*time.Second)
		return
	}
	var argv []string
	if kind == imageMysqlctl && len(c.spec.Command) == 0 {
		argv = []string{mysqlctlEntrypoint} // ENTRYPOINT ["/mysqlctl"], no CMD
		for _, s := range c.spec.Args {
			argv = append(argv, expand(s, vars))
		}
	} else if len(c.spec.Command) > 0 {
		for _, s := range c.spec.Command {
			argv = append(argv, expand(s, vars))
		}
		for _, s := range c.spec.Args {
			argv = append(argv, expand(s, vars))
		}
	} else {
		// The mariadb image: ENTRYPOINT ["docker-entrypoint.sh"], CMD ["mariadbd"].
		argv = []string{"docker-entrypoint.sh"}
		if len(c.spec.Args) == 0 {
			argv = append(argv, "mariadbd")
		}
		for _, s := range c.spec.Args {
			argv = append(argv, expand(s, vars))
		}
	}
	switch kind {
	case imageMariaDB:
		argv = serverArgv(argv, w.ip)
	case imageMysqlctl:
		argv = mysqlctlArgv(argv, w.ip)
	}
	layer := w.layerDir(c)
	if err := os.RemoveAll(layer); err != nil {
		w.setWaiting(c, "CreateContainerError", err.Error(), 2*time.Second)
		return
	}
	mounts, err := w.containerMounts(&c.spec, kind, w.vols, vars, layer)
	if err != nil {
		w.setWaiting(c, "CreateContainerError", err.Error(), 2*time.Second)
		return
	}
	logPath := w.logPath(c)
	if f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		_, _ = fmt.Fprintf(f, "---- rig: start #%d of container %s at %s: %q\n", c.instance+1, c.spec.Name, time.Now().Format(time.RFC3339Nano), argv)
		_ = f.Close()
	}
	var user *identity
	if kind == imageMysqlctl {
		if user, err = runAs(w.currentPod(), &c.spec); err != nil {
			w.setWaiting(c, "CreateContainerConfigError", err.Error(), 2*time.Second)
			return
		}
	}
	w.mu.Lock()
	cg := w.cgroup
	w.mu.Unlock()
	p, err := startProcess(processSpec{
		user:     user,
		argv:     argv,
		env:      env,
		workDir:  c.spec.WorkingDir,
		hostname: w.hostname(),
		mounts:   mounts,
		cgroup:   cg,
		logPath:  logPath,
	})
	if err != nil {
		w.setWaiting(c, "StartError", err.Error(), 2*time.Second)
		return
	}
	w.mu.Lock()
	if c.instance > 0 {
		c.restartCount++
	}
	c.instance++
	c.proc = p
	c.running = true
	c.startedAt = p.started
	c.env, c.workDir = env, c.spec.WorkingDir
	c.server = kind == imageMariaDB
	c.started = c.spec.StartupProbe == nil
	c.ready = false
	c.answered = new(atomic.Bool)
	c.waitingReason, c.waitingMessage = "", ""
	inst := c.instance
	w.mu.Unlock()
	w.a.logf("pod %s: started container %s (pid %d, start #%d)", w.key, c.spec.Name, p.pid, inst)

	name := c.spec.Name
	go func() {
		<-p.done
		w.send(workerEvent{container: name, instance: inst, exited: true})
	}()
	if !c.init {
		pctx, cancel := context.WithCancel(w.a.ctx)
		c.cancelProbes = cancel
		w.startProbes(pctx, c, inst, p)
		if c.server {
			go w.watchAnswer(pctx, c.answered, serverPort(&c.spec))
		}
	}
}

func (w *podWorker) send(ev workerEvent) {
	select {
	case w.events <- ev:
	case <-w.stopCh:
	case <-w.goneCh:
	}
}

func (w *podWorker) setWaiting(c *ctr, reason, msg string, retry time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.waitingReason != reason || c.waitingMessage != msg {
		w.a.logf("pod %s: container %s: %s: %s", w.key, c.spec.Name, reason, msg)
	}
	c.waitingReason, c.waitingMessage = reason, msg
	c.nextStart = time.Now().Add(retry)
}

// handle applies an event from a process waiter or a prober.
func (w *podWorker) handle(ev workerEvent) {
	c := w.container(ev.container)
	if c == nil || ev.instance != c.instance {
		return // a previous instance
	}
	if ev.exited {
		w.containerExited(c)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev.probe {
	case probeStartup:
		c.started = ev.ok
		if !ev.ok {
			w.killForProbe(c, "startup")
		}
	case probeReadiness:
		c.ready = ev.ok
	case probeLiveness:
		if !ev.ok {
			w.killForProbe(c, "liveness")
		}
	}
}

// killForProbe restarts a container whose liveness or startup probe failed: SIGTERM, then SIGKILL
// after the pod's termination grace period, as the kubelet does. w.mu is held.
func (w *podWorker) killForProbe(c *ctr, kind string) {
	p := c.proc
	grace := 30 * time.Second
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	w.a.logf("pod %s: container %s failed its %s probe: restarting it", w.key, c.spec.Name, kind)
	go func() {
		_ = p.signalGroup(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			p.kill()
		}
	}()
}

// layerDir is a container's own directory: what its image's layer would hold (its /tmp, its
// termination message, the mariadb image's /etc/mysql).
func (w *podWorker) layerDir(c *ctr) string { return filepath.Join(w.dir, "containers", c.spec.Name) }

// logPath is a container's log file.
func (w *podWorker) logPath(c *ctr) string { return filepath.Join(w.dir, "logs", c.spec.Name+".log") }

// containerExited records a finished container and decides about its restart.
func (w *podWorker) containerExited(c *ctr) {
	code, sig, finished := c.proc.result()
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.cancelProbes != nil {
		c.cancelProbes()
		c.cancelProbes = nil
	}
	c.running, c.ready, c.started = false, false, false
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	term := &corev1.ContainerStateTerminated{
		ExitCode:    int32(code),
		Signal:      int32(sig),
		Reason:      reason,
		StartedAt:   secs(c.startedAt),
		FinishedAt:  secs(finished),
		ContainerID: w.containerID(c),
		Message:     terminationMessage(&c.spec, w.layerDir(c), w.logPath(c), c.instance, code),
	}
	w.a.logf("pod %s: container %s exited with code %d", w.key, c.spec.Name, code)
	if w.terminating {
		c.terminated = term // a pod being deleted restarts nothing
		return
	}
	policy := w.pod.Spec.RestartPolicy
	restart := policy == corev1.RestartPolicyAlways || policy == "" || (policy == corev1.RestartPolicyOnFailure && code != 0)
	if c.init {
		restart = code != 0 && policy != corev1.RestartPolicyNever
		if code == 0 {
			c.terminated = term
			return
		}
	}
	if !restart {
		c.terminated = term
		if c.init {
			w.failed = true
		}
		return
	}
	c.lastTerminated = term
	// The kubelet's crash-loop back-off: the first restart is immediate, then base, 2×base, … up to
	// the maximum; a container that ran for 10 minutes starts over.
	if finished.Sub(c.startedAt) > 10*time.Minute {
		c.crashes = 0
	}
	delay := time.Duration(0)
	if c.crashes > 0 {
		delay = w.a.cfg.RestartBackoff << (c.crashes - 1)
		if delay > w.a.cfg.MaxRestartBackoff || delay <= 0 {
			delay = w.a.cfg.MaxRestartBackoff
		}
		c.waitingReason = "CrashLoopBackOff"
		c.waitingMessage = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", delay, c.spec.Name, w.name, w.namespace, w.uid)
	}
	c.crashes++
	c.nextStart = finished.Add(delay)
}

func (w *podWorker) containerID(c *ctr) string {
	return fmt.Sprintf("rig://%s-%s-%d", w.uid, c.spec.Name, c.instance)
}

// killAll ends every process of the pod at once.
func (w *podWorker) killAll() {
	w.mu.Lock()
	procs := w.procsLocked()
	for _, c := range w.containers {
		if c.cancelProbes != nil {
			c.cancelProbes()
		}
	}
	w.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	// Anything else left in the pod's cgroup (children that changed their process group).
	w.mu.Lock()
	cg := w.cgroup
	w.mu.Unlock()
	for _, pid := range cgroupPIDs(cg) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// terminate runs a graceful deletion: preStop hooks and SIGTERM, SIGKILL after the grace period,
// then confirms the deletion to the API server with grace period 0, as the kubelet does.
func (w *podWorker) terminate(pod *corev1.Pod) {
	w.terminating = true
	grace := 30 * time.Second
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	deadline := time.Now().Add(grace)
	w.a.logf("pod %s: deleting with a grace period of %s", w.key, grace)
	w.mu.Lock()
	var stopping []*ctr
	for _, c := range w.containers {
		if c.running && c.proc != nil {
			stopping = append(stopping, c)
		}
	}
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range stopping {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.stopContainer(c, deadline)
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case ev := <-w.events:
			w.handle(ev)
		case <-w.stopCh:
			w.killAll()
			<-finished
			w.teardownSandbox(false)
			return
		case <-w.loseC:
			w.loseNow()
			<-finished
			return
		case <-w.goneCh:
			w.killAll()
			<-finished
			w.teardownSandbox(true)
			return
		}
	}
	for drained := false; !drained; {
		select {
		case ev := <-w.events:
			w.handle(ev)
		default:
			drained = true
		}
	}
	w.writeStatus(w.a.ctx)
	w.teardownSandbox(true)
	ctx, cancel := context.WithTimeout(w.a.ctx, 30*time.Second)
	defer cancel()
	err := w.a.cs.CoreV1().Pods(w.namespace).Delete(ctx, w.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: &w.uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		if w.a.ctx.Err() == nil {
			w.a.logf("pod %s: confirm deletion: %v", w.key, err)
		}
		return
	}
	w.confirmed = true
	w.a.logf("pod %s: deleted", w.key)
}

// stopContainer stops one container by the deadline: preStop exec hook, then SIGTERM, then SIGKILL.
// A MariaDB server that has not answered yet is given until it does before SIGTERM (a server still
// starting can hang on it), still within the deadline.
func (w *podWorker) stopContainer(c *ctr, deadline time.Time) {
	w.mu.Lock()
	p, env, wd, server, answered := c.proc, c.env, c.workDir, c.server, c.answered
	w.mu.Unlock()
	if c.spec.Lifecycle != nil && c.spec.Lifecycle.PreStop != nil && c.spec.Lifecycle.PreStop.Exec != nil {
		if d := time.Until(deadline); d > 0 {
			res := execIn(w.a.ctx, p.pid, w.cgroupPath(), c.spec.Lifecycle.PreStop.Exec.Command, env, wd, d)
			if res.err != nil || res.exitCode != 0 {
				w.a.logf("pod %s: preStop hook of %s failed: %v %s", w.key, c.spec.Name, res.err, res.output)
			}
		}
	}
	if server {
		for !answered.Load() && time.Now().Before(deadline) && !p.exited() && !p.isFrozen() {
			time.Sleep(50 * time.Millisecond)
		}
	}
	_ = p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Until(deadline)):
		w.a.logf("pod %s: container %s did not stop within the grace period: SIGKILL", w.key, c.spec.Name)
		p.kill()
	}
}

// lose makes the node forget the pod: its processes die, nothing restarts them and its status is
// never written again. The pod object stays as it was.
func (w *podWorker) lose() {
	w.loseOnce.Do(func() { close(w.loseC) })
}

func (w *podWorker) loseNow() {
	w.a.mu.Lock()
	w.a.lost[w.uid] = w.key
	w.a.mu.Unlock()
	w.mu.Lock()
	w.lost = true
	w.mu.Unlock()
	w.killAll()
	w.teardownSandbox(false)
	close(w.lostDone)
	w.a.logf("pod %s: lost (its processes are gone; the pod object stays)", w.key)
}

// pids lists the PIDs of the pod's processes (the cgroup's when there is one).
func (w *podWorker) pids() []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[int]bool{}
	var pids []int
	for _, p := range w.procsLocked() {
		if !seen[p.pid] {
			seen[p.pid] = true
			pids = append(pids, p.pid)
		}
	}
	for _, pid := range cgroupPIDs(w.cgroup) {
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	return pids
}

func (w *podWorker) info() PodInfo {
	w.mu.Lock()
	defer w.mu.Unlock()
	pi := PodInfo{Namespace: w.namespace, Name: w.name, UID: string(w.uid), IP: w.ip, Containers: map[string]int{}, Lost: w.lost, Dir: w.dir}
	for _, c := range w.containers {
		if c.running && c.proc != nil && !c.proc.exited() {
			pi.Containers[c.spec.Name] = c.proc.pid
			if c.proc.isFrozen() {
				pi.Frozen = true
			}
		}
	}
	pi.Cut = w.a.net.isCut(w.key)
	return pi
}

// mysqlctlUser is the USER of mysqlctl's image (Dockerfile, Dockerfile.local): distroless' nonroot.
const mysqlctlUser = 65532

// runAs is the user a container of mysqlctl's image runs as: the container's securityContext,
// else the pod's, else the image's USER; runAsNonRoot refuses root as the kubelet does. (The rig
// applies securityContext to this image only: its emulated mariadb image runs as root.)
func runAs(pod *corev1.Pod, c *corev1.Container) (*identity, error) {
	u := &identity{uid: mysqlctlUser, gid: mysqlctlUser}
	nonRoot := false
	if psc := pod.Spec.SecurityContext; psc != nil {
		u.uid = ptr.Deref(psc.RunAsUser, u.uid)
		u.gid = ptr.Deref(psc.RunAsGroup, u.gid)
		nonRoot = ptr.Deref(psc.RunAsNonRoot, nonRoot)
	}
	if csc := c.SecurityContext; csc != nil {
		u.uid = ptr.Deref(csc.RunAsUser, u.uid)
		u.gid = ptr.Deref(csc.RunAsGroup, u.gid)
		nonRoot = ptr.Deref(csc.RunAsNonRoot, nonRoot)
		u.noNewPrivs = csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation
	}
	if nonRoot && u.uid == 0 {
		return nil, errors.New("container has runAsNonRoot and image will run as root")
	}
	return u, nil
}
