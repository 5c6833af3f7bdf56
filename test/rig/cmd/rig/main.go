// Command rig runs the local rig in the background and injects faults into it.
//
//	rig up      [--dir DIR] [--crds] [--s3]      start control plane + node agent (+ object store) in the background
//	rig down    [--dir DIR] [--keep-dir]         stop everything the rig started (by PID)
//	rig status  [--dir DIR]                      the rig and its pods (kubectl get pods -o wide style)
//	rig env     [--dir DIR]                      print `export KUBECONFIG=…`
//	rig apply   [--dir DIR] [-n NS] -f FILE      server-side apply a manifest (-f mariadb: the plain
//	                                             MariaDB StatefulSet the rig's tests use)
//	rig wait    [--dir DIR] [-n NS] -l SELECTOR --count N [--timeout D]   wait for Ready pods
//	rig addrs   [--dir DIR] [-n NS] SERVICE [--port NAME]   ready endpoints (ip:port), never a cluster IP
//	rig exec    [--dir DIR] [-n NS] [-c C] POD -- COMMAND…  run a command in a container
//	rig logs    [--dir DIR] [-n NS] [-c C] POD   a container's output (all starts)
//	rig kill|freeze|thaw|cut|restore|lose [--dir DIR] [-n NS] [-c C] POD
//	rig wipe-pvc [--dir DIR] [-n NS] CLAIM
//
// DIR defaults to $MYSQLCTL_RIG_DIR, else /tmp/mysqlctl-rig. The rig needs root, mariadb-server
// (and iptables for cut), and the control-plane binaries (MYSQLCTL_CONTROLPLANE_BIN, else
// hack/build-controlplane.sh is run from the repository the working directory is in).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// exitUsage is the exit code of a command line that cannot be understood.
const exitUsage = 2

// usageError marks a command-line mistake: the usage is printed and the exit code is 2.
type usageError struct{ msg string }

// Error returns the message.
func (e usageError) Error() string { return e.msg }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type command struct {
	name, args, short string
	run               func(c *cli, args []string) error
}

var commands = []command{
	{"up", "[--crds] [--s3] [--foreground] [--timeout D]", "start a rig in the background", cmdUp},
	{"down", "[--keep-dir] [--timeout D]", "stop the rig and everything it started", cmdDown},
	{"status", "", "show the rig and its pods", cmdStatus},
	{"env", "", "print the shell commands that point kubectl at the rig", cmdEnv},
	{"apply", "[-n NS] -f FILE|mariadb", "server-side apply a manifest", cmdApply},
	{"wait", "[-n NS] -l SELECTOR --count N [--timeout D]", "wait until pods are Ready", cmdWait},
	{"pods", "[-n NS | -A]", "list pods (kubectl get pods -o wide style)", cmdPods},
	{"addrs", "[-n NS] [--port NAME] SERVICE", "print a Service's ready endpoints (ip:port)", cmdAddrs},
	{"exec", "[-n NS] [-c CONTAINER] POD -- COMMAND...", "run a command in a container", cmdExec},
	{"logs", "[-n NS] [-c CONTAINER] POD", "print a container's output", cmdLogs},
	{"kill", "[-n NS] [-c CONTAINER] POD", "kill -9 the pod's server (it is restarted)", cmdFault},
	{"freeze", "[-n NS] [-c CONTAINER] POD", "SIGSTOP the pod's server", cmdFault},
	{"thaw", "[-n NS] [-c CONTAINER] POD", "SIGCONT a frozen server", cmdFault},
	{"cut", "[-n NS] POD", "cut the pod's network (packets dropped)", cmdFault},
	{"restore", "[-n NS] POD", "restore a cut pod's network", cmdFault},
	{"lose", "[-n NS] POD", "make the node forget the pod (the object stays)", cmdFault},
	{"wipe-pvc", "[-n NS] CLAIM", "delete the data of a PersistentVolumeClaim", cmdWipe},
	{"serve", "", "", cmdServe}, // run by up: the rig's own process
}

// cli carries the streams and the parsed common flags.
type cli struct {
	out, errOut io.Writer
	name        string
	dir         string
	namespace   string
	container   string
}

func usage(w io.Writer) {
	_, _ = fmt.Fprintf(w, "Usage: rig COMMAND [--dir DIR] [flags]\n\nRuns the mysqlctl local rig (a real control plane and a process-backed node) in the background.\n\nCommands:\n")
	for _, c := range commands {
		if c.short != "" {
			_, _ = fmt.Fprintf(w, "  %-9s %-48s %s\n", c.name, c.args, c.short)
		}
	}
	_, _ = fmt.Fprintf(w, "\nDIR defaults to $MYSQLCTL_RIG_DIR, else /tmp/mysqlctl-rig.\n")
}

func run(args []string, out, errOut io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(out)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(&cli{out: out, errOut: errOut, name: c.name}, args[1:])
		var ue usageError
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			_, _ = fmt.Fprintf(out, "Usage: rig %s [--dir DIR] %s\n", c.name, c.args)
			return 0
		case errors.As(err, &ue):
			_, _ = fmt.Fprintf(errOut, "rig %s: %v\nUsage: rig %s [--dir DIR] %s\n", c.name, err, c.name, c.args)
			return exitUsage
		default:
			_, _ = fmt.Fprintf(errOut, "rig %s: %v\n", c.name, err)
			return 1
		}
	}
	_, _ = fmt.Fprintf(errOut, "rig: unknown command %q\n", args[0])
	usage(errOut)
	return exitUsage
}

// flags returns a flag set with the common flags: --dir, and -n / -c when withPod.
func (c *cli) flags(withPod bool) *flag.FlagSet {
	fs := flag.NewFlagSet("rig "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := os.Getenv("MYSQLCTL_RIG_DIR")
	if def == "" {
		def = "/tmp/mysqlctl-rig"
	}
	fs.StringVar(&c.dir, "dir", def, "work directory of the rig")
	if withPod {
		fs.StringVar(&c.namespace, "n", "default", "namespace")
		fs.StringVar(&c.namespace, "namespace", "default", "namespace")
		fs.StringVar(&c.container, "c", "", "container (default: the MariaDB container)")
		fs.StringVar(&c.container, "container", "", "container")
	}
	return fs
}

// parse parses flags that may come before or after the positional arguments; everything after
// "--" is returned separately.
func parse(fs *flag.FlagSet, args []string) (positional, rest []string, err error) {
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, nil, err
			}
			return nil, nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, rest, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// onePositional checks that exactly one positional argument (named what) was given.
func onePositional(pos []string, what string) (string, error) {
	if len(pos) != 1 {
		return "", usageError{fmt.Sprintf("want exactly one %s, got %q", what, strings.Join(pos, " "))}
	}
	return pos[0], nil
}
