package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/supervisor"
)

// viewTransitions is how many of a cluster's latest transitions its panel shows.
const viewTransitions = 5

// liveView draws one panel per supervised cluster on a terminal, redrawn every second from the
// clusters' recorded status and the supervisor's own checks and transitions.
type liveView struct {
	c      client.Client
	out    io.Writer
	styles *iostreams.Styles

	mu     sync.Mutex
	panels map[client.ObjectKey]*panelState
}

// panelState is what the supervisor told the view about one cluster.
type panelState struct {
	transitions []supervisor.Transition
	check       failover.Check
}

func newLiveView(c client.Client, out io.Writer, styles *iostreams.Styles) *liveView {
	return &liveView{c: c, out: out, styles: styles, panels: map[client.ObjectKey]*panelState{}}
}

func (v *liveView) panel(key client.ObjectKey) *panelState {
	p := v.panels[key]
	if p == nil {
		p = &panelState{}
		v.panels[key] = p
	}
	return p
}

// print records a transition (the supervisor's Report).
func (v *liveView) print(t supervisor.Transition) {
	if t.Cluster == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.panel(client.ObjectKey{Namespace: t.Namespace, Name: t.Cluster})
	p.transitions = append(p.transitions, t)
	if n := len(p.transitions); n > viewTransitions {
		p.transitions = p.transitions[n-viewTransitions:]
	}
}

// checked records a check of a cluster's primary (the supervisor's Checked).
func (v *liveView) checked(key client.ObjectKey, ch failover.Check) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.panel(key).check = ch
}

// run redraws every second until ctx ends.
func (v *liveView) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		v.draw(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// draw reads every cluster the view knows and redraws the screen.
func (v *liveView) draw(ctx context.Context) {
	v.mu.Lock()
	keys := make([]client.ObjectKey, 0, len(v.panels))
	states := map[client.ObjectKey]panelState{}
	for k, p := range v.panels {
		keys = append(keys, k)
		states[k] = panelState{transitions: append([]supervisor.Transition(nil), p.transitions...), check: p.check}
	}
	v.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	now := time.Now()
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J") // home, clear
	fmt.Fprintf(&b, "%s  %s\n", v.styles.Bold("mysqlctl watch"), v.styles.Faint(now.Format("15:04:05")+"  (Ctrl-C stops; the stage in hand finishes first)"))
	for _, k := range keys {
		c := &v1.MysqlCluster{}
		if err := v.c.Get(ctx, k, c); err != nil {
			c.Namespace, c.Name = k.Namespace, k.Name
		}
		b.WriteString(renderPanel(v.styles, c, states[k], now))
		b.WriteString("\n")
	}
	_, _ = io.WriteString(v.out, b.String())
}

// renderPanel draws one cluster: the HA state and primary, the operation and its stage, the
// supervisor's last check, one row per instance and the latest transitions.
func renderPanel(st *iostreams.Styles, c *v1.MysqlCluster, p panelState, now time.Time) string {
	var b strings.Builder
	ha := "no HA state yet"
	if h := c.Status.HA; h != nil {
		ha = styleHA(st, h.State)
		if h.Since != nil {
			ha += " for " + duration.HumanDuration(now.Sub(h.Since.Time))
		}
	}
	fmt.Fprintf(&b, "%s  %s  primary %s\n", st.Bold(c.Namespace+"/"+c.Name), ha, dash(c.Status.CurrentPrimary))
	op := "none"
	if x := c.Status.Operation; x != nil {
		op = fmt.Sprintf("%s at stage %s", x.Type, x.Stage)
	}
	fmt.Fprintf(&b, "%s %s\n", st.Faint("operation:"), op)
	check := "none yet"
	if ch := p.check; !ch.At.IsZero() {
		what := "writable"
		switch {
		case !ch.Reachable:
			what = "failed: " + ch.Detail
		case !ch.Writable:
			what = "read-only"
		}
		check = fmt.Sprintf("%s ago, %s", now.Sub(ch.At).Round(100*time.Millisecond), what)
	}
	fmt.Fprintf(&b, "%s %s\n\n", st.Faint("last check:"), check)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tROLE\tSTATE\tIO\tSQL\tLAG\tGTID\tSEEN")
	for _, in := range c.Status.Instances {
		lag, seen := "-", "-"
		if in.LagSeconds != nil {
			lag = fmt.Sprintf("%ds", *in.LagSeconds)
		}
		if in.LastSeen != nil {
			seen = duration.HumanDuration(now.Sub(in.LastSeen.Time)) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", in.Name, dash(string(in.Role)), dash(in.Classification), dash(in.IOThread), dash(in.SQLThread), lag, shorten(dash(in.GTIDExecuted), 24), seen)
	}
	_ = tw.Flush()
	if len(p.transitions) > 0 {
		b.WriteString("\n")
	}
	for _, t := range p.transitions {
		what := t.Action
		if t.To != "" {
			what = dash(t.From) + " -> " + t.To
		}
		fmt.Fprintf(&b, "%s %s: %s\n", st.Faint(t.Time.Local().Format("15:04:05")), what, shorten(t.Reason, 100))
	}
	return st.Panel(strings.TrimRight(b.String(), "\n"))
}

func styleHA(st *iostreams.Styles, s v1.HAState) string {
	switch s {
	case v1.HAHealthy:
		return st.Success(string(s))
	case v1.HADegraded:
		return st.Error(string(s))
	}
	return st.Warning(string(s))
}

// shorten cuts s to n characters, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
