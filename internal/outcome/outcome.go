// Package outcome names the kinds of failure that decide a command's exit code.
//
// Domain packages wrap these sentinels (fmt.Errorf("…: %w", outcome.ErrUnsafe)) so that the
// command layer can map any error to its documented exit code in one place with errors.Is,
// without the domain code knowing about exit codes or the CLI.
package outcome

import "errors"

var (
	// ErrInvalid means a value was refused by validation: the CRD's schema and rules (checked
	// on this machine or by the API server), like a bad flag (exit code 2).
	ErrInvalid = errors.New("invalid")
	// ErrTimedOut means a wait ended before the awaited state was reached (exit code 3).
	ErrTimedOut = errors.New("timed out")
	// ErrUnsafe means a step could not be proven safe and was not taken (exit code 4).
	ErrUnsafe = errors.New("refused as unsafe")
	// ErrHeld means another actor holds the cluster (exit code 5).
	ErrHeld = errors.New("held by another actor")
	// ErrConfig means a path mysqlctl needs is refused by the environment's configuration, not
	// by a server: the API server refused to port-forward (RBAC, or it cannot reach the pod's
	// node). Retrying changes nothing until a person fixes it (exit code 6).
	ErrConfig = errors.New("refused by configuration")
)

// kindError is an error with its own message that is also one of the sentinels above.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// Invalid returns an error with message msg that is ErrInvalid (the sentinel's own text is not
// added: msg already says what is invalid).
func Invalid(msg string) error { return &kindError{msg: msg, kind: ErrInvalid} }
