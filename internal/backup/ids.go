package backup

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// ValidateID refuses anything that is not a backup ID. An ID given by a person becomes a
// directory of keys: one of another form ("..", a "/", the start of other IDs) could name
// objects that are not that backup's.
func ValidateID(id string) error {
	if !idPattern.MatchString(id) {
		return outcome.Invalid(fmt.Sprintf("%q is not a backup ID (an ID is the time a backup began and a suffix, such as 20261207T001359Z-k3x9qa)", id))
	}
	return nil
}

// Nearest returns at most n of ids (in order) that a person who typed id most likely meant:
// those that begin with it (an ID typed short), else the ones just before and just after it
// (IDs sort by time, so these are the backups taken closest to the time typed).
func Nearest(ids []string, id string, n int) []string {
	sorted := slices.Sorted(slices.Values(ids))
	var out []string
	for _, x := range sorted {
		if strings.HasPrefix(x, id) {
			out = append(out, x)
		}
	}
	if len(out) > 0 {
		return out[:min(len(out), n)]
	}
	n = min(n, len(sorted))
	i, _ := slices.BinarySearch(sorted, id)
	start := min(max(0, i-(n+1)/2), len(sorted)-n)
	return sorted[start : start+n]
}

// DeleteOrder is the order a backup's objects (names in its directory) are deleted in: the
// manifest first, so that a delete interrupted anywhere leaves an incomplete directory (never
// listed as a backup, and finished by deleting it again), never a backup with objects missing;
// then the others in name order.
func DeleteOrder(names []string) []string {
	out := slices.Sorted(slices.Values(names))
	if i := slices.Index(out, ManifestName); i > 0 {
		out = slices.Concat([]string{ManifestName}, out[:i], out[i+1:])
	}
	return out
}
