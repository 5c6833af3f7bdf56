package topology

import (
	"database/sql/driver"
	"fmt"
	"log/slog"
)

// Secret is a password. Every way of printing it (fmt verbs, %#v, slog,
// JSON) shows "[redacted]"; only the SQL driver sees the value, through
// driver.Valuer, when it interpolates a statement argument.
type Secret string

const redacted = "[redacted]"

// String implements fmt.Stringer.
func (Secret) String() string { return redacted }

// GoString implements fmt.GoStringer, so %#v of a struct holding a Secret
// does not print it either.
func (Secret) GoString() string { return `topology.Secret("` + redacted + `")` }

// Format implements fmt.Formatter for every verb, including %x and %q which
// would otherwise bypass String.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText implements encoding.TextMarshaler (JSON, YAML).
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Value implements driver.Valuer: the one place the real value is released,
// as a statement argument the driver sends to the server.
func (s Secret) Value() (driver.Value, error) { return string(s), nil }

// Reveal returns the password itself, for the few callers that must hand it
// to another API (the driver's connection config).
func (s Secret) Reveal() string { return string(s) }

// Credentials are a MySQL account's user name and password.
type Credentials struct {
	// User is the account name.
	User string
	// Password never prints.
	Password Secret
}
