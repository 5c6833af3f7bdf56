package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mysqlctl/mysqlctl/test/rig"
	"github.com/mysqlctl/mysqlctl/test/rig/internal/agent"
)

// clients returns the rig's state and admin clients.
func clients(c *cli) (*rig.State, *rest.Config, kubernetes.Interface, error) {
	st, err := runningState(c.dir)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.WarningHandler = rest.NoWarnings{}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	return st, cfg, cs, nil
}

func cmdApply(c *cli, args []string) error {
	fs := c.flags(true)
	file := fs.String("f", "", "manifest file, - for standard input, or mariadb for the plain MariaDB StatefulSet")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *file == "" {
		return usageError{"apply takes -f FILE and no arguments"}
	}
	var data []byte
	switch *file {
	case "mariadb":
		data = rig.MariaDBManifest
	case "-":
		data, err = io.ReadAll(os.Stdin)
	default:
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	_, cfg, _, err := clients(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rig.Apply(ctx, cfg, c.namespace, data); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(c.errOut, "applied %s to namespace %s\n", *file, c.namespace)
	return nil
}

func cmdWait(c *cli, args []string) error {
	fs := c.flags(true)
	sel := fs.String("l", "", "label selector")
	count := fs.Int("count", 0, "number of pods (0: all matching, at least one)")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *sel == "" {
		return usageError{"wait takes -l SELECTOR and no arguments"}
	}
	st, _, cs, err := clients(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	pods, err := rig.WaitPods(ctx, cs, c.namespace, *sel, *count)
	if err != nil {
		_ = listPods(c, st, c.namespace, false)
		return err
	}
	_, _ = fmt.Fprintf(c.errOut, "%d pods Ready after %s\n", len(pods), time.Since(start).Round(100*time.Millisecond))
	return nil
}

func cmdPods(c *cli, args []string) error {
	fs := c.flags(true)
	all := fs.Bool("A", false, "all namespaces")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{"pods takes no arguments"}
	}
	st, err := runningState(c.dir)
	if err != nil {
		return err
	}
	ns := c.namespace
	if *all {
		ns = ""
	}
	return listPods(c, st, ns, *all)
}

// listPods prints pods like `kubectl get pods -o wide` (namespace "" for all).
func listPods(c *cli, st *rig.State, namespace string, withNS bool) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	sort.Slice(pods.Items, func(i, j int) bool {
		a, b := pods.Items[i], pods.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	tw := tabwriter.NewWriter(c.out, 0, 8, 3, ' ', 0)
	if withNS {
		_, _ = fmt.Fprint(tw, "NAMESPACE\t")
	}
	_, _ = fmt.Fprintln(tw, "NAME\tREADY\tSTATUS\tRESTARTS\tAGE\tIP\tNODE")
	for i := range pods.Items {
		p := &pods.Items[i]
		ready, restarts := 0, int32(0)
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				ready++
			}
			restarts += s.RestartCount
		}
		if withNS {
			_, _ = fmt.Fprintf(tw, "%s\t", p.Namespace)
		}
		ip, node := p.Status.PodIP, p.Spec.NodeName
		if ip == "" {
			ip = "<none>"
		}
		if node == "" {
			node = "<none>"
		}
		_, _ = fmt.Fprintf(tw, "%s\t%d/%d\t%s\t%d\t%s\t%s\t%s\n", p.Name, ready, len(p.Spec.Containers), podStatus(p), restarts,
			age(p.CreationTimestamp.Time), ip, node)
	}
	if len(pods.Items) == 0 {
		_, _ = fmt.Fprintln(c.errOut, "no pods")
	}
	return tw.Flush()
}

// podStatus is the STATUS column of kubectl get pods (a simplified printPod).
func podStatus(p *corev1.Pod) string {
	reason := string(p.Status.Phase)
	if p.Status.Reason != "" {
		reason = p.Status.Reason
	}
	for i, s := range p.Status.InitContainerStatuses {
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			continue
		case s.State.Terminated != nil:
			reason = "Init:" + s.State.Terminated.Reason
		case s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + s.State.Waiting.Reason
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
		return reason
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil && s.State.Waiting.Reason != "":
			reason = s.State.Waiting.Reason
		case s.State.Terminated != nil && s.State.Terminated.Reason != "":
			reason = s.State.Terminated.Reason
		}
	}
	if p.DeletionTimestamp != nil {
		reason = "Terminating"
	}
	return reason
}

func age(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	default:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
}

func cmdAddrs(c *cli, args []string) error {
	fs := c.flags(true)
	port := fs.String("port", "", "Service port name (default: the first)")
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	svc, err := onePositional(pos, "SERVICE")
	if err != nil {
		return err
	}
	_, _, cs, err := clients(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, err := rig.ServiceAddrs(ctx, cs, c.namespace, svc, *port)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		_, _ = fmt.Fprintln(c.out, a)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("service %s/%s has no ready endpoints", c.namespace, svc)
	}
	return nil
}

func cmdExec(c *cli, args []string) error {
	fs := c.flags(true)
	timeout := fs.Duration("timeout", time.Minute, "kill the command after this long")
	pos, command, err := parse(fs, args)
	if err != nil {
		return err
	}
	pod, err := onePositional(pos, "POD")
	if err != nil {
		return err
	}
	if len(command) == 0 {
		return usageError{"give the command after --"}
	}
	st, err := runningState(c.dir)
	if err != nil {
		return err
	}
	res, err := agent.NewClient(st.Socket).Exec(context.Background(), c.namespace, pod, c.container, command, *timeout)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprint(c.out, res.Output)
	if res.ExitCode != 0 {
		return fmt.Errorf("command exited with code %d", res.ExitCode)
	}
	return nil
}

func cmdLogs(c *cli, args []string) error {
	fs := c.flags(true)
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	pod, err := onePositional(pos, "POD")
	if err != nil {
		return err
	}
	st, err := runningState(c.dir)
	if err != nil {
		return err
	}
	pods, err := agent.NewClient(st.Socket).Pods(context.Background())
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Namespace != c.namespace || p.Name != pod || p.Dir == "" {
			continue
		}
		name := c.container
		if name == "" {
			entries, _ := os.ReadDir(filepath.Join(p.Dir, "logs"))
			var names []string
			for _, e := range entries {
				names = append(names, strings.TrimSuffix(e.Name(), ".log"))
			}
			var running []string
			for _, n := range names {
				if _, ok := p.Containers[n]; ok {
					running = append(running, n)
				}
			}
			switch {
			case contains(names, "mariadb"):
				name = "mariadb"
			case len(names) == 1:
				name = names[0]
			case len(running) == 1:
				// As kubectl logs does: the one app container, not the finished init containers.
				name = running[0]
			default:
				return usageError{fmt.Sprintf("pod %s has several containers (%s): choose one with -c", pod, strings.Join(names, ", "))}
			}
		}
		data, err := os.ReadFile(filepath.Join(p.Dir, "logs", name+".log"))
		if err != nil {
			return err
		}
		_, err = c.out.Write(data)
		return err
	}
	return fmt.Errorf("pod %s/%s does not run on the rig's node", c.namespace, pod)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cmdFault(c *cli, args []string) error {
	fs := c.flags(true)
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	pod, err := onePositional(pos, "POD")
	if err != nil {
		return err
	}
	st, err := runningState(c.dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := agent.NewClient(st.Socket).Inject(ctx, agent.Fault(c.name), c.namespace, pod, c.container); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(c.errOut, "%s: %s/%s\n", c.name, c.namespace, pod)
	return nil
}

func cmdWipe(c *cli, args []string) error {
	fs := c.flags(true)
	pos, _, err := parse(fs, args)
	if err != nil {
		return err
	}
	claim, err := onePositional(pos, "CLAIM")
	if err != nil {
		return err
	}
	st, err := runningState(c.dir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := agent.NewClient(st.Socket).WipeClaim(ctx, c.namespace, claim); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(c.errOut, "wiped the data of %s/%s\n", c.namespace, claim)
	return nil
}
