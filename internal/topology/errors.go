package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// ErrorKind is the coarse reason an instance could not be observed or a
// statement failed. Failure detection treats the kinds differently: a refused
// connection is a stopped server, a timeout may be a network partition, an
// authentication failure is a configuration problem that no failover fixes.
type ErrorKind string

const (
	// ErrorRefused: nothing listens at the address (server down, pod gone).
	ErrorRefused ErrorKind = "refused"
	// ErrorTimeout: no answer in time (partition, frozen server, overload).
	ErrorTimeout ErrorKind = "timeout"
	// ErrorAuth: the server answered and refused the credentials or host.
	ErrorAuth ErrorKind = "auth"
	// ErrorOther: anything else (port-forward failure, SQL error, …).
	ErrorOther ErrorKind = "other"
	// ErrorConfig: the path to the server is refused by the environment's
	// configuration (see ConfigError): it says nothing about the server, and
	// no retry helps until a person changes the configuration.
	ErrorConfig ErrorKind = "config"
)

// MySQL and MariaDB error numbers this package interprets.
// https://dev.mysql.com/doc/mysql-errors/8.4/en/server-error-reference.html
const (
	erDBAccessDenied        = 1044
	erAccessDenied          = 1045
	erHostNotPrivileged     = 1130
	erPasswordNotAllowed    = 1131
	erNotSupportedAuthMode  = 1251
	erAccessDeniedNoPasswd  = 1698
	erSpecificAccessDenied  = 1227
	erNoSuchThread          = 1094
	erUnknownSystemVariable = 1193
	erNoBinaryLogging       = 1381
	erPluginInstalled       = 1125 // ER_UDF_EXISTS / plugin already installed
	erCannotUser            = 1396
	erOptionPreventsStmt    = 1290 // --read-only / --super-read-only
	erInvalidRole           = 1959 // MariaDB: SET ROLE of a role not granted (or missing)
	erBadDB                 = 1049 // unknown database
	erNoSuchTable           = 1146
	erLockWaitTimeout       = 1205
	erTableAccessDenied     = 1142
)

// KindOf classifies an error from dialing, the driver or a statement.
func KindOf(err error) ErrorKind {
	if err == nil {
		return ""
	}
	var se *SQLError
	if errors.As(err, &se) {
		return se.kind()
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return (&SQLError{Number: me.Number}).kind()
	}
	var ke interface{ ErrorKind() ErrorKind }
	if errors.As(err, &ke) {
		return ke.ErrorKind()
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return ErrorRefused
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrorTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrorTimeout
	}
	return ErrorOther
}

// SQLError is a server error with any secret removed from its message. It
// replaces *mysql.MySQLError in errors returned by this package because a
// server's syntax error can quote the statement, password included.
type SQLError struct {
	// Number is the server's error number (1045, 1290, …).
	Number uint16
	// SQLState is the five-character SQLSTATE, when the server sent one.
	SQLState string
	// Message is the server's message with secrets replaced.
	Message string
}

// Error implements error.
func (e *SQLError) Error() string {
	if e.SQLState != "" {
		return fmt.Sprintf("Error %d (%s): %s", e.Number, e.SQLState, e.Message)
	}
	return fmt.Sprintf("Error %d: %s", e.Number, e.Message)
}

func (e *SQLError) kind() ErrorKind {
	switch e.Number {
	case erAccessDenied, erDBAccessDenied, erHostNotPrivileged, erPasswordNotAllowed, erNotSupportedAuthMode, erAccessDeniedNoPasswd:
		return ErrorAuth
	default:
		return ErrorOther
	}
}

// OpError is an error of one operation on one instance. Its message names the
// instance and the operation, never the statement text or a DSN.
type OpError struct {
	// Instance names the instance.
	Instance string
	// Op names the operation ("fence", "re-point", …).
	Op string
	// Kind classifies the failure.
	Kind ErrorKind
	// Err is the sanitized cause.
	Err error
}

// Error implements error.
func (e *OpError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Instance, e.Op, e.Err)
}

// Unwrap returns the (already sanitized) cause.
func (e *OpError) Unwrap() error { return e.Err }

// ErrorKind returns the error's kind.
func (e *OpError) ErrorKind() ErrorKind { return e.Kind }

// redactedError stands in for an error whose message contained a secret. The
// original is dropped, not wrapped, so no caller can reach the secret through
// errors.Unwrap; its kind and timeout nature are kept.
type redactedError struct {
	msg     string
	kind    ErrorKind
	timeout bool
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) ErrorKind() ErrorKind { return e.kind }
func (e *redactedError) Timeout() bool        { return e.timeout }
func (e *redactedError) Is(target error) bool {
	return e.timeout && target == context.DeadlineExceeded
}

// sanitize returns err with every secret removed from its message. Server
// errors become *SQLError. Errors whose text contains no secret keep their
// chain so that errors.Is/As keep working for callers.
func sanitize(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		se := &SQLError{Number: me.Number, Message: redact(me.Message, secrets)}
		if me.SQLState != [5]byte{} {
			se.SQLState = string(me.SQLState[:])
		}
		return se
	}
	msg := err.Error()
	if clean := redact(msg, secrets); clean != msg {
		kind := KindOf(err)
		return &redactedError{msg: clean, kind: kind, timeout: kind == ErrorTimeout}
	}
	return err
}

func redact(s string, secrets []string) string {
	for _, secret := range secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, redacted)
		}
	}
	return s
}

func sqlErrorNumber(err error) uint16 {
	var se *SQLError
	if errors.As(err, &se) {
		return se.Number
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// ConfigError is a dial that cannot work until a person changes the
// configuration: the API server answered the port-forward upgrade with a
// refusal that no retry changes (RBAC forbids it, or the API server cannot
// reach the pod's node by its name or certificate). It is not evidence about
// the server behind the path: a supervisor must not count it as a failed
// check, and an operation stops at once instead of waiting for the member.
//
// Its message is one line naming the pod, what was refused and what to do;
// it carries no secret (the text is the API server's, which never sees the
// MySQL credentials). It is outcome.ErrConfig for errors.Is.
type ConfigError struct {
	// Target is the pod, as namespace/name.
	Target string
	// Status is the HTTP status of the refusal (403, 500, …).
	Status int
	// Reason is what the API server (or the kubelet behind it) said, on one
	// line and shortened.
	Reason string
	// Fix says what a person can do about it.
	Fix string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("the API server refused to port-forward to %s (HTTP %d: %s): %s", e.Target, e.Status, e.Reason, e.Fix)
}

// ErrorKind implements the kind interface KindOf reads.
func (e *ConfigError) ErrorKind() ErrorKind { return ErrorConfig }

// Is makes a ConfigError outcome.ErrConfig, whose exit code the command
// layer documents.
func (e *ConfigError) Is(target error) bool { return target == outcome.ErrConfig }

// AsConfigError returns the ConfigError in err's chain, or nil.
func AsConfigError(err error) *ConfigError {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}
