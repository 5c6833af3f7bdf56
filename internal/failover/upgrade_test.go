package failover

import (
	"strings"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

func flavorOf(t *testing.T, version, comment string) topology.Flavor {
	t.Helper()
	f, err := topology.DetectFlavor(version, comment)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseImage(t *testing.T) {
	for ref, want := range map[string]string{
		"mariadb:10.11":                           "MariaDB 10.11",
		"mariadb:11.4.3":                          "MariaDB 11.4.3",
		"docker.io/library/mariadb:11.4-noble":    "MariaDB 11.4",
		"mysql:8.0.37":                            "MySQL 8.0.37",
		"registry:5000/db/mysql:8.4.2-oracle":     "MySQL 8.4.2",
		"percona/percona-server:8.0.36@sha256:ab": "MySQL 8.0.36",
	} {
		p, err := ParseImage(ref)
		if err != nil || p.String() != want {
			t.Errorf("ParseImage(%q) = %v, %v; want %s", ref, p, err, want)
		}
	}
	for _, ref := range []string{"mariadb", "mariadb:latest", "mysql@sha256:abcd", "postgres:16", "registry:5000/mariadb"} {
		if _, err := ParseImage(ref); err == nil {
			t.Errorf("ParseImage(%q) accepted an image without a checkable version", ref)
		}
	}
}

func TestCheckUpgrade(t *testing.T) {
	maria := func(v string) topology.Flavor { return flavorOf(t, v+"-MariaDB", "mariadb.org binary distribution") }
	mysql := func(v string) topology.Flavor { return flavorOf(t, v, "MySQL Community Server - GPL") }
	cases := []struct {
		from   topology.Flavor
		image  string
		refuse string // "" allows; else a word the refusal contains
	}{
		{maria("10.11.19"), "mariadb:10.11", ""},
		{maria("10.11.19"), "mariadb:10.11.19", ""},
		{maria("10.11.19"), "mariadb:11.4", ""},
		{maria("10.11.19"), "mariadb:10.6", "downgrade"},
		{maria("11.4.2"), "mariadb:10.11", "downgrade"},
		{maria("10.11.19"), "mariadb:10.11.6", "forward only"},
		{maria("10.11.19"), "mysql:8.0.37", "MySQL and MariaDB"},
		{mysql("8.0.36"), "mariadb:11.4", "MySQL and MariaDB"},
		{mysql("8.0.36"), "mysql:8.0.40", ""},
		{mysql("8.0.36"), "mysql:8.4", "8.0.37"},
		{mysql("8.0.37"), "mysql:8.4", ""},
		{mysql("8.0.40"), "mysql:8.4.3", ""},
		{mysql("8.0.40"), "mysql:9.1", "8.4 LTS"},
		{mysql("5.7.44"), "mysql:8.4", "8.0 LTS"},
		{mysql("5.7.44"), "mysql:8.0.40", ""},
		{mysql("8.4.3"), "mysql:8.0.40", "downgrade"},
		{mysql("8.4.3"), "mysql:8.4.1", ""},
		{mysql("8.0.40"), "mysql:8.0.36", "forward only"},
		{mysql("8.2.0"), "mysql:8.4", ""},
		{topology.Flavor{}, "mariadb:11.4", "unknown"},
	}
	for _, c := range cases {
		to, err := ParseImage(c.image)
		if err != nil {
			t.Fatal(err)
		}
		got := CheckUpgrade(c.from, to)
		switch {
		case c.refuse == "" && got != "":
			t.Errorf("%s -> %s refused: %s", c.from, c.image, got)
		case c.refuse != "" && !strings.Contains(got, c.refuse):
			t.Errorf("%s -> %s = %q, want a refusal naming %q", c.from, c.image, got, c.refuse)
		}
	}
}

func TestCheckRunning(t *testing.T) {
	p, _ := ParseImage("mariadb:11.4")
	if why := CheckRunning("db-2", flavorOf(t, "11.4.5-MariaDB", ""), p); why != "" {
		t.Fatal(why)
	}
	for _, v := range []string{"10.11.19-MariaDB", "11.8.1-MariaDB"} {
		if why := CheckRunning("db-2", flavorOf(t, v, ""), p); !strings.Contains(why, "db-2") || !strings.Contains(why, v) {
			t.Errorf("%s on %s: %q", v, p.Ref, why)
		}
	}
	if why := CheckRunning("db-2", topology.Flavor{}, p); why == "" {
		t.Error("a server that reported nothing kept the promise")
	}
	exact, _ := ParseImage("mysql:8.0.37")
	if why := CheckRunning("db-0", flavorOf(t, "8.0.36", "MySQL Community Server - GPL"), exact); why == "" {
		t.Error("8.0.36 kept the promise of mysql:8.0.37")
	}
}

func TestNextRollStep(t *testing.T) {
	cases := []struct {
		updated []bool
		primary int
		want    RollStep
	}{
		{[]bool{false, false, false}, 0, RollStep{Ordinal: 2}},
		{[]bool{false, false, true}, 0, RollStep{Ordinal: 1}},
		{[]bool{false, true, true}, 0, RollStep{Handoff: true, HandoffTo: 2}},
		{[]bool{false, true, true}, 2, RollStep{Ordinal: 0}},
		{[]bool{true, true, true}, 2, RollStep{Done: true}},
		{[]bool{false, false, false}, 1, RollStep{Ordinal: 2}},
		{[]bool{false, false, true}, 1, RollStep{Handoff: true, HandoffTo: 2}},
		{[]bool{false, false, false}, 2, RollStep{Handoff: true, HandoffTo: 0}},
		{[]bool{false, false, true}, 0, RollStep{Ordinal: 1}}, // after that first handoff
		{[]bool{false}, 0, RollStep{Ordinal: 0}},
		{[]bool{true, false, true}, 0, RollStep{Ordinal: 1}},
	}
	for _, c := range cases {
		if got := NextRollStep(c.updated, c.primary); got != c.want {
			t.Errorf("NextRollStep(%v, primary %d) = %+v, want %+v", c.updated, c.primary, got, c.want)
		}
	}
	// Walking a whole rollout from every primary position: every pod is restarted exactly once,
	// never while it is the primary (but for a single instance), with at most two handoffs.
	for n := 1; n <= 5; n++ {
		for p := range n {
			updated, primary, handoffs, restarts := make([]bool, n), p, 0, 0
			for step := NextRollStep(updated, primary); !step.Done; step = NextRollStep(updated, primary) {
				if step.Handoff {
					handoffs++
					primary = step.HandoffTo
					continue
				}
				if step.Ordinal == primary && n > 1 {
					t.Fatalf("n=%d primary %d: restarted the primary %d", n, p, primary)
				}
				if updated[step.Ordinal] {
					t.Fatalf("n=%d primary %d: restarted %d twice", n, p, step.Ordinal)
				}
				updated[step.Ordinal] = true
				restarts++
				if restarts > n || handoffs > 2 {
					t.Fatalf("n=%d primary %d: %d restarts, %d handoffs", n, p, restarts, handoffs)
				}
			}
			if restarts != n {
				t.Fatalf("n=%d primary %d: %d restarts", n, p, restarts)
			}
		}
	}
}

func TestCheckUpgradeAllRefusesDowngradingAnyInstance(t *testing.T) {
	maria := func(v string) topology.Flavor { return flavorOf(t, v+"-MariaDB", "") }
	mysql := func(v string) topology.Flavor { return flavorOf(t, v, "MySQL Community Server - GPL") }
	for _, c := range []struct {
		running []topology.Flavor
		image   string
		ok      bool
	}{
		{[]topology.Flavor{maria("11.4.2"), maria("10.11.9")}, "mariadb:10.11", false}, // 11.4 would go back
		{[]topology.Flavor{maria("11.4.2"), maria("10.11.9")}, "mariadb:11.2", false},
		{[]topology.Flavor{maria("11.4.2"), maria("10.11.9")}, "mariadb:11.4", true},
		{[]topology.Flavor{mysql("8.4.3"), mysql("8.0.40")}, "mysql:8.0.40", false},
		{[]topology.Flavor{mysql("8.0.36"), mysql("8.0.40")}, "mysql:8.4", false}, // the oldest is below 8.0.37
		{[]topology.Flavor{mysql("8.0.37"), mysql("8.0.40")}, "mysql:8.4", true},
		{nil, "mysql:8.4", false},
	} {
		p, _ := ParseImage(c.image)
		if why := CheckUpgradeAll(c.running, p); (why == "") != c.ok {
			t.Errorf("%v -> %s: %q, want allowed %v", c.running, c.image, why, c.ok)
		}
	}
}

func TestHoldTemplate(t *testing.T) {
	at := func(name, rev, image string, ran bool) PodRevision { return PodRevision{name, rev, image, ran} }
	for _, tc := range []struct {
		name    string
		current string
		pods    []PodRevision
		held    bool
	}{
		{"every pod at the current revision", "r1", []PodRevision{at("a-0", "r1", "m:10", true), at("a-1", "r1", "m:10", true)}, false},
		{"a pod that ran a newer image", "r1", []PodRevision{at("a-0", "r1", "m:10", true), at("a-2", "r2", "m:11", true)}, true},
		{"a pod whose new image never ran", "r1", []PodRevision{at("a-0", "r1", "m:10", true), at("a-2", "r2", "m:11.99", false)}, false},
		{"a configuration rolled out part-way", "r1", []PodRevision{at("a-0", "r1", "m:10", true), at("a-2", "r2", "m:10", true)}, false},
		{"a pod whose revision is not known yet", "r1", []PodRevision{at("a-0", "r1", "m:10", true), at("a-1", "", "m:10", true)}, false},
		{"no StatefulSet status yet", "", []PodRevision{at("a-2", "r2", "m:11", true)}, false},
	} {
		why := HoldTemplate(tc.current, "m:10", tc.pods)
		if (why != "") != tc.held {
			t.Errorf("%s: %q, want held %v", tc.name, why, tc.held)
		}
		if tc.held && !strings.Contains(why, "a-2") {
			t.Errorf("%s: %q does not name the pod ahead", tc.name, why)
		}
	}
	// The current revision's image unknown: any pod of another revision that ran holds.
	if why := HoldTemplate("r1", "", []PodRevision{at("a-2", "r2", "m:10", true)}); why == "" {
		t.Errorf("with the current image unknown, a pod of another revision that ran did not hold")
	}
}

func TestCheckNotOlder(t *testing.T) {
	flavor := func(v string) topology.Flavor {
		t.Helper()
		f, err := topology.DetectFlavor(v, "")
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		ran, runs string
		refused   bool
	}{
		{"11.4.5-MariaDB", "11.4.2-MariaDB", true}, // a node's cached build of mariadb:11.4
		{"11.4.5-MariaDB", "11.4.5-MariaDB", false},
		{"10.11.19-MariaDB", "11.4.0-MariaDB", false},
		{"8.0.40", "8.0.36", true},
		{"8.0.36", "8.4.3", false},
	} {
		why := CheckNotOlder("db-1", flavor(tc.ran), flavor(tc.runs))
		if (why != "") != tc.refused {
			t.Errorf("ran %s, runs %s: %q, want refused %v", tc.ran, tc.runs, why, tc.refused)
		}
	}
	if why := CheckNotOlder("db-1", topology.Flavor{}, flavor("10.11.1-MariaDB")); why != "" {
		t.Errorf("no recorded version: %q", why)
	}
}
