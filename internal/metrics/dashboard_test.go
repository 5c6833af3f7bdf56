package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaMacros are the dashboard's variables and Grafana's own macros, replaced by what
// Prometheus would receive for "All" and a five-minute step.
var grafanaMacros = strings.NewReplacer("$__rate_interval", "5m", "$__range", "6h", "$namespace", ".*", "$cluster", ".*")

// TestGrafanaDashboard: the shipped dashboard parses, every panel queries the dashboard's
// Prometheus datasource, every query (and every variable's label_values) parses with Prometheus'
// own parser and names only metrics mysqlctl exports, every per-cluster selector follows the
// namespace and cluster variables, and the panels cover HA state, failovers and their duration,
// check latency and replication lag.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "monitoring", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name, Type string
				Query      any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID         int    `json:"id"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) < 10 {
		t.Fatalf("dashboard uid %q, title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}
	names := exported(t)
	promql := parser.NewParser(parser.Options{})
	used := map[string]bool{}
	check := func(where, expr string, perCluster bool) {
		e, err := promql.ParseExpr(grafanaMacros.Replace(expr))
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			return
		}
		selectors := 0
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			selectors++
			used[vs.Name] = true
			if !names[vs.Name] {
				t.Errorf("%s uses %s, which mysqlctl does not export", where, vs.Name)
			}
			if perCluster && vs.Name != "mysqlctl_leader" && (!matches(vs, "namespace") || !matches(vs, "cluster")) {
				t.Errorf("%s: %s does not follow the namespace and cluster variables", where, vs.Name)
			}
			return nil
		})
		if selectors == 0 {
			t.Errorf("%s: %q selects no metric", where, expr)
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q queries datasource %q, not the dashboard's variable", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr, true)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+), *([a-z_]+)\)$`)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q)
			continue
		}
		check("variable "+v.Name, m[1], false)
	}
	for _, want := range []string{"datasource", "namespace", "cluster"} {
		if !slices.Contains(vars, want) {
			t.Errorf("no %s variable", want)
		}
	}
	for _, want := range []string{"mysqlctl_cluster_ha_state", "mysqlctl_failovers_total", "mysqlctl_operation_duration_seconds_bucket",
		"mysqlctl_failover_decision_seconds_bucket", "mysqlctl_check_duration_seconds_bucket", "mysqlctl_replication_lag_seconds"} {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// matches reports whether the selector restricts the label with a regular-expression matcher
// (the dashboard's variables are multi-valued).
func matches(vs *parser.VectorSelector, label string) bool {
	return slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool { return m.Name == label && m.Type == labels.MatchRegexp })
}

// TestAlertRulesPromtool runs the alert rules' unit tests (manifests/monitoring/rules_test.yaml)
// with Prometheus' own promtool, on synthetic series: each alert fires when its text says, and
// every alert has a test.
func TestAlertRulesPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is needed (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	dir := filepath.Join("..", "..", "manifests", "monitoring")
	cmd := exec.CommandContext(t.Context(), promtool, "test", "rules", "rules_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	rules, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(dir, "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1) {
		if !strings.Contains(string(tests), "alertname: "+m[1]+"\n") {
			t.Errorf("rules_test.yaml does not test %s", m[1])
		}
	}
}
