package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// Retention is spec.backup.retention as a rule: which complete backups go.
type Retention struct {
	// KeepLast keeps at most this many complete backups, the newest (0: no limit by count).
	KeepLast int
	// MaxAge removes complete backups whose copy finished longer ago than this (0: no limit).
	MaxAge time.Duration
	// MinKeep keeps the newest this many complete backups whatever the other two say (at least 1).
	MinKeep int
}

// RetentionOf is the cluster's retention rule; false when spec.backup.retention sets none (every
// backup is kept until deleted by hand).
func RetentionOf(c *v1.MysqlCluster) (Retention, bool) {
	if c.Spec.Backup == nil || c.Spec.Backup.Retention == nil {
		return Retention{}, false
	}
	r := c.Spec.Backup.Retention
	out := Retention{KeepLast: int(r.KeepLast), MinKeep: max(int(r.MinKeep), 1)}
	if r.MaxAge != nil {
		out.MaxAge = r.MaxAge.Duration
	}
	return out, out.KeepLast > 0 || out.MaxAge > 0
}

// String says the rule in words, for messages.
func (r Retention) String() string {
	var parts []string
	if r.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("the newest %d", r.KeepLast))
	}
	if r.MaxAge > 0 {
		parts = append(parts, "those finished within "+r.MaxAge.String())
	}
	return fmt.Sprintf("keep %s, and at least the newest %d", strings.Join(parts, " and "), r.MinKeep)
}

// Expired is a backup directory a retention rule removes, and why.
type Expired struct {
	Entry  Entry  `json:"entry"`
	Reason string `json:"reason"`
}

// Expire decides which of the entries (judged, see Entry.Judge) the rule removes at now:
//   - a complete backup past the newest KeepLast, or finished longer ago than MaxAge, unless it is
//     one of the newest MinKeep complete backups;
//   - an incomplete directory older than the newest complete or running backup (when one is
//     complete): backups never run at once, so a copy that began before the newest one began has
//     ended, without its manifest (it failed or was aborted), and never completes.
//
// A running, damaged, failed, unreadable or foreign directory is never removed here: the first is
// being written, a person looks at the next three, and the last is another cluster's.
func Expire(entries []Entry, r Retention, now time.Time) []Expired {
	complete := make([]Entry, 0, len(entries))
	for _, e := range entries {
		if e.State == Complete && e.Manifest != nil {
			complete = append(complete, e)
		}
	}
	// Newest first: IDs sort by the time the backup began.
	slices.SortFunc(complete, func(a, b Entry) int { return strings.Compare(b.ID, a.ID) })
	minKeep := max(r.MinKeep, 1)
	var out []Expired
	for i, e := range complete {
		if i < minKeep {
			continue
		}
		age := now.Sub(e.Manifest.FinishedAt)
		switch {
		case r.KeepLast > 0 && i >= r.KeepLast:
			out = append(out, Expired{Entry: e, Reason: fmt.Sprintf("older than the newest %d complete backups (keepLast)", r.KeepLast)})
		case r.MaxAge > 0 && age > r.MaxAge:
			out = append(out, Expired{Entry: e, Reason: fmt.Sprintf("finished %s ago, more than maxAge %s", age.Round(time.Minute), r.MaxAge)})
		}
	}
	if len(complete) > 0 {
		newest, what := complete[0].ID, "newest complete backup"
		for _, e := range entries {
			if e.State == Running && e.ID > newest {
				newest, what = e.ID, "running backup"
			}
		}
		for _, e := range entries {
			if e.State == Incomplete && e.ID < newest {
				out = append(out, Expired{Entry: e, Reason: fmt.Sprintf("incomplete, and older than the %s %s (a copy that failed or was aborted)", what, newest)})
			}
		}
	}
	slices.SortFunc(out, func(a, b Expired) int { return strings.Compare(a.Entry.ID, b.Entry.ID) })
	return out
}

// ReadJudged reads the cluster's backups in st (the one status.backup.running names marked so),
// each judged against the cluster (Entry.Judge), newest first.
func ReadJudged(ctx context.Context, st Store, c *v1.MysqlCluster) ([]Entry, error) {
	running := ""
	if b := c.Status.Backup; b != nil && b.Running != nil {
		running = b.Running.ID
	}
	entries, err := Read(ctx, st, c.Namespace, c.Name, running)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		entries[i] = entries[i].Judge(c)
	}
	return entries, nil
}

// Expiring reads the cluster's backups in st and returns those the rule expires at now.
func Expiring(ctx context.Context, st Store, c *v1.MysqlCluster, r Retention, now time.Time) ([]Expired, error) {
	entries, err := ReadJudged(ctx, st, c)
	if err != nil {
		return nil, err
	}
	return Expire(entries, r, now), nil
}

// DeleteExpired deletes the backups given (as Expiring returned them: a person may have been
// shown that list and confirmed it, so nothing else is deleted), oldest first, each as Delete
// deletes one (the manifest first: a prune interrupted leaves incomplete directories, which
// the next prune removes). With an error it returns those deleted before it.
func DeleteExpired(ctx context.Context, st Store, c *v1.MysqlCluster, expired []Expired, now time.Time) ([]Expired, error) {
	for i, e := range expired {
		if _, err := Delete(ctx, st, c.Namespace, c.Name, e.Entry, now); err != nil {
			return expired[:i], err
		}
	}
	return expired, nil
}
