package cmdutil

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// ExitCode is the process exit status. Scripts rely on these values; they never change meaning.
type ExitCode int

// Exit codes.
const (
	// ExitOK means the command did what was asked.
	ExitOK ExitCode = 0
	// ExitFailed means the command failed.
	ExitFailed ExitCode = 1
	// ExitUsage means the command line was wrong (unknown flag, bad value, missing argument).
	ExitUsage ExitCode = 2
	// ExitTimedOut means a --wait or --timeout ran out before the awaited state.
	ExitTimedOut ExitCode = 3
	// ExitUnsafe means mysqlctl refused a step it could not prove safe.
	ExitUnsafe ExitCode = 4
	// ExitHeld means another actor holds the cluster.
	ExitHeld ExitCode = 5
	// ExitConfig means the environment's configuration refuses a path mysqlctl needs, so no
	// retry can succeed: the API server refused to port-forward to a pod (RBAC forbids create
	// on pods/portforward, or the API server cannot reach the pod's node). The message says
	// what to grant or change; an operation stopped before its first change recorded nothing.
	ExitConfig ExitCode = 6
)

// ExitCodeFor maps an error to its exit code. It is the only place that does.
func ExitCodeFor(err error) ExitCode {
	var flagErr *FlagError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &flagErr), errors.Is(err, outcome.ErrInvalid):
		return ExitUsage
	case errors.Is(err, outcome.ErrConfig):
		// Before the other kinds: a refused path is what a person must fix, whatever the
		// operation made of it.
		return ExitConfig
	case errors.Is(err, outcome.ErrHeld):
		return ExitHeld
	case errors.Is(err, outcome.ErrUnsafe):
		return ExitUnsafe
	case errors.Is(err, outcome.ErrTimedOut), errors.Is(err, context.DeadlineExceeded):
		return ExitTimedOut
	}
	return ExitFailed
}

// FlagError is a usage error: the command prints its usage line with it and exits with ExitUsage.
type FlagError struct{ Err error }

func (e *FlagError) Error() string { return e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// FlagErrorf returns a FlagError with a formatted message.
func FlagErrorf(format string, args ...any) error {
	return &FlagError{Err: fmtErrorf(format, args...)}
}

// NoArgs is a cobra.PositionalArgs that refuses any argument with a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return FlagErrorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])
	}
	return nil
}

// ExactArgs returns a cobra.PositionalArgs that wants exactly n arguments, described by what.
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return FlagErrorf("%s needs %s", cmd.CommandPath(), what)
		}
		return nil
	}
}
