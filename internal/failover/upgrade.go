package failover

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// ImagePromise is what an image reference promises to run, read from its tag: the product line
// and the version. It is only a promise: the version that counts is the one the server reports
// once it runs (see CheckRunning).
type ImagePromise struct {
	// Ref is the image reference as given.
	Ref string
	// MariaDB is true for the mariadb images, false for mysql and percona-server.
	MariaDB bool
	// Major, Minor and Patch are the tag's numbers; Patch is -1 when the tag names a series
	// (mariadb:10.11, mysql:8.4).
	Major, Minor, Patch int
}

// String returns "MariaDB 11.4" or "MySQL 8.0.37".
func (p ImagePromise) String() string {
	name := "MySQL"
	if p.MariaDB {
		name = "MariaDB"
	}
	if p.Patch < 0 {
		return fmt.Sprintf("%s %d.%d", name, p.Major, p.Minor)
	}
	return fmt.Sprintf("%s %d.%d.%d", name, p.Major, p.Minor, p.Patch)
}

var tagVersion = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?(?:[-_.].*)?$`)

// ParseImage reads the promise of an image reference such as mariadb:11.4,
// registry.example/db/mysql:8.0.37-debian or mysql:8.4@sha256:…. A reference without a version
// tag (latest, a bare digest) promises nothing checkable and is refused: a rollout must know
// before anything restarts whether it moves forward.
func ParseImage(ref string) (ImagePromise, error) {
	p := ImagePromise{Ref: ref, Patch: -1}
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	tag := ""
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, tag = repo[:i], repo[i+1:]
	}
	switch path.Base(repo) {
	case "mariadb":
		p.MariaDB = true
	case "mysql", "mysql-server", "percona-server", "percona":
	default:
		return p, fmt.Errorf("image %s: not a MySQL or MariaDB image (mysql, mysql-server, percona-server or mariadb)", ref)
	}
	m := tagVersion.FindStringSubmatch(tag)
	if m == nil {
		return p, fmt.Errorf("image %s: its tag names no version (use a tag such as %s:%s), so the upgrade rules cannot be checked before a server restarts", ref, path.Base(repo), map[bool]string{true: "11.4", false: "8.4"}[p.MariaDB])
	}
	p.Major, _ = strconv.Atoi(m[1])
	p.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		p.Patch, _ = strconv.Atoi(m[3])
	}
	return p, nil
}

// mysqlLTS are MySQL's long-term-support series in order; an upgrade may not pass over one.
var mysqlLTS = [][2]int{{5, 7}, {8, 0}, {8, 4}, {9, 7}}

// CheckUpgrade says whether a cluster whose servers report from may be rolled to the image
// promise to; "" allows it, anything else is the refusal with its reason. from is the lowest
// version any instance reports.
//
// Rules: no change of product (MariaDB to MySQL or back); no downgrade across a series (within
// one series a patch downgrade is allowed on MySQL 8.4 and later, whose LTS series support it,
// and nowhere else); MySQL 8.0 to 8.4 only from 8.0.37; no MySQL LTS series skipped; MariaDB
// upward only.
func CheckUpgrade(from topology.Flavor, to ImagePromise) string {
	if from.Line == "" {
		return "the servers' version is unknown: no instance answered"
	}
	if from.IsMariaDB() != to.MariaDB {
		return fmt.Sprintf("the servers run %s and image %s is %s: changing between MySQL and MariaDB is not an upgrade (migrate the data with a dump instead)", from, to.Ref, productName(to.MariaDB))
	}
	fv := from.Version
	series := cmpSeries(to.Major, to.Minor, fv.Major, fv.Minor)
	switch {
	case series < 0:
		return fmt.Sprintf("image %s would downgrade the servers from %s to %s: a downgrade across a series is refused (restore a backup taken before the upgrade instead)", to.Ref, from, to)
	case series == 0 && to.Patch >= 0 && to.Patch < fv.Patch:
		if !to.MariaDB && fv.AtLeast(8, 4, 0) {
			return ""
		}
		return fmt.Sprintf("image %s would downgrade the servers from %s to %s: %s is upgraded forward only", to.Ref, from, to, productName(to.MariaDB))
	case series == 0 || to.MariaDB:
		return ""
	}
	// MySQL across series.
	if fv.Major == 8 && fv.Minor == 0 && to.Major == 8 && to.Minor >= 4 && !fv.AtLeast(8, 0, 37) {
		return fmt.Sprintf("MySQL %s cannot be upgraded to %s: the 8.0 to 8.4 upgrade needs 8.0.37 or later; upgrade to the latest 8.0 first (for example mysql:8.0.40)", fv, to)
	}
	for _, lts := range mysqlLTS {
		if cmpSeries(lts[0], lts[1], fv.Major, fv.Minor) > 0 && cmpSeries(lts[0], lts[1], to.Major, to.Minor) < 0 {
			return fmt.Sprintf("MySQL %s to %s would skip the %d.%d LTS series: upgrade to the latest %d.%d first", fv, to, lts[0], lts[1], lts[0], lts[1])
		}
	}
	return ""
}

// CheckRunning says whether a server that restarted on the image keeps the image's promise: ""
// when it does, else why the rollout must stop.
func CheckRunning(name string, runs topology.Flavor, promised ImagePromise) string {
	if runs.Line == "" {
		return name + " has not reported its version yet"
	}
	v := runs.Version
	ok := runs.IsMariaDB() == promised.MariaDB && v.Major == promised.Major && v.Minor == promised.Minor && (promised.Patch < 0 || v.Patch == promised.Patch)
	if ok {
		return ""
	}
	return fmt.Sprintf("%s restarted on image %s but reports %s (%s): the image does not hold the version its tag promises", name, promised.Ref, runs, runs.VersionString)
}

func productName(mariadb bool) string {
	if mariadb {
		return "MariaDB"
	}
	return "MySQL"
}

func cmpSeries(aMajor, aMinor, bMajor, bMinor int) int {
	if aMajor != bMajor {
		return aMajor - bMajor
	}
	return aMinor - bMinor
}

// RollStep is the next step of a rolling restart onto a new pod template.
type RollStep struct {
	// Done: every pod runs the new template.
	Done bool
	// Ordinal is the pod to restart next (the StatefulSet partition is lowered to it), when
	// Handoff is false.
	Ordinal int
	// Handoff: the next pod to restart is the primary's; its role moves first, by switchover,
	// to HandoffTo.
	Handoff   bool
	HandoffTo int
}

// NextRollStep decides the next step of a rollout over ordinals 0..len(updated)-1, where
// updated[k] says pod k already runs the new template and primary is the primary's ordinal.
//
// A StatefulSet partition restarts only a suffix of the ordinals, so pods go highest ordinal
// first. When the next one is the primary, its role moves first: to the highest updated replica,
// so that the primary always runs the newest template once one is proven. When no replica is
// updated yet (the primary holds the highest ordinal), the role moves to ordinal 0 first,
// which then restarts last: that rollout takes two switchovers instead of one.
func NextRollStep(updated []bool, primary int) RollStep {
	k := len(updated) - 1
	for k >= 0 && updated[k] {
		k--
	}
	switch {
	case k < 0:
		return RollStep{Done: true}
	case k != primary:
		return RollStep{Ordinal: k}
	case k < len(updated)-1:
		return RollStep{Handoff: true, HandoffTo: len(updated) - 1}
	case k == 0:
		return RollStep{Ordinal: 0} // a single instance restarts in place: there is no one to hand to
	default:
		return RollStep{Handoff: true, HandoffTo: 0}
	}
}

// CheckUpgradeAll is CheckUpgrade against every instance's version: the target may be below
// none of them (no instance is downgraded) and must be reachable from each (the oldest decides
// the 8.0.37 rule and the LTS steps).
func CheckUpgradeAll(running []topology.Flavor, to ImagePromise) string {
	if len(running) == 0 {
		return CheckUpgrade(topology.Flavor{}, to)
	}
	for _, f := range running {
		if why := CheckUpgrade(f, to); why != "" {
			return why
		}
	}
	return ""
}

// PodRevision is what HoldTemplate knows of one pod: the StatefulSet revision it was made from,
// the image of its database container, and whether that container ever ran (a pod whose image
// never pulled never touched its data).
type PodRevision struct {
	Name, Revision, Image string
	Ran                   bool
}

// HoldTemplate decides whether a changed pod template may be written to a StatefulSet. current
// is the StatefulSet's current revision and
// currentImage its image ("" when unknown). While a rollout is unfinished, a pod that ran an
// image other than the current revision's would come back, if recreated below the new
// partition, at the current revision: an older image over a data directory a newer version may
// have rewritten. Such a change is held until the rollout finishes: the answer names those pods
// ("" when the template may be written). A pod of another revision with the same image (a
// configuration rolled out part-way), or one that never ran, holds nothing.
func HoldTemplate(current, currentImage string, pods []PodRevision) string {
	if current == "" {
		return ""
	}
	var ahead []string
	for _, p := range pods {
		if p.Ran && p.Revision != "" && p.Revision != current && (currentImage == "" || p.Image != currentImage) {
			ahead = append(ahead, p.Name+" ("+p.Image+")")
		}
	}
	if len(ahead) == 0 {
		return ""
	}
	slices.Sort(ahead)
	return fmt.Sprintf("%s already ran an image the StatefulSet's current revision %s does not have (a rollout is unfinished): with a new template, a pod recreated would come back at %s, over data a newer version may have rewritten; the change waits until the rollout finishes ('resume' the upgrade, or 'upgrade' to the image it rolls out)",
		strings.Join(ahead, ", "), current, current)
}

// CheckNotOlder says why a server that restarted reporting runs may not go on ("" when it may):
// ran is the version the instance reported before (recorded in status), and a server is never
// older than what its data directory last ran. A floating tag (mariadb:11.4, mysql:8.0) passes
// the tag's promise whatever patch a node has cached; this check catches the node that ran an
// older build of the same tag.
func CheckNotOlder(name string, ran topology.Flavor, runs topology.Flavor) string {
	if ran.Line == "" || runs.Line == "" || ran.IsMariaDB() != runs.IsMariaDB() {
		return ""
	}
	v := ran.Version
	if runs.Version.AtLeast(v.Major, v.Minor, v.Patch) {
		return ""
	}
	return fmt.Sprintf("%s ran %s before its restart and now reports %s: its node ran an older build for the image's tag (a floating tag and a cached image); pin the tag to a full version, or set the image pull policy to Always, and rebuild or restart it on the right build",
		name, ran.VersionString, runs.VersionString)
}
