// Package outcome names the kinds of failure that decide a command's exit code.
//
// Domain packages wrap these sentinels (fmt.Errorf("…: %w", outcome.ErrUnsafe)) so that the
// command layer can map any error to its documented exit code in one place with errors.Is,
// without the domain code knowing about exit codes or the CLI.
package outcome

import "errors"

var (
	// ErrTimedOut means a wait ended before the awaited state was reached (exit code 3).
	ErrTimedOut = errors.New("timed out")
	// ErrUnsafe means a step could not be proven safe and was not taken (exit code 4).
	ErrUnsafe = errors.New("refused as unsafe")
	// ErrHeld means another actor holds the cluster (exit code 5).
	ErrHeld = errors.New("held by another actor")
)
