package gtid

import (
	"fmt"
	"strings"
)

// ParseError reports where and why a GTID text could not be parsed. It quotes
// a short excerpt around the offending offset because GTID sets printed by a
// server can be kilobytes long, and a message that repeats all of it is
// unreadable in a status field or a log line.
type ParseError struct {
	// What names the grammar that was expected ("MySQL GTID set",
	// "MariaDB GTID position", ...).
	What string
	// Input is the complete text that failed to parse.
	Input string
	// Offset is the byte offset in Input at which parsing stopped.
	Offset int
	// Reason says what was wrong at Offset.
	Reason string
}

// Error implements error.
func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid %s at offset %d (%s): %s", e.What, e.Offset, excerpt(e.Input, e.Offset), e.Reason)
}

// excerpt quotes up to 20 bytes before and after offset, marking the offset
// with "⟨here⟩" so that the reader sees exactly which character was refused.
func excerpt(s string, offset int) string {
	const span = 20
	if offset > len(s) {
		offset = len(s)
	}
	start := max(offset-span, 0)
	end := min(offset+span, len(s))
	var b strings.Builder
	b.WriteByte('"')
	if start > 0 {
		b.WriteString("…")
	}
	b.WriteString(escape(s[start:offset]))
	b.WriteString("⟨here⟩")
	b.WriteString(escape(s[offset:end]))
	if end < len(s) {
		b.WriteString("…")
	}
	b.WriteByte('"')
	return b.String()
}

// escape keeps control characters (servers print newlines inside GTID sets)
// visible in a one-line message.
func escape(s string) string {
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// DivergedError is returned when two MariaDB positions cannot be combined
// because the same domain holds two different transactions with the same
// sequence number: the histories diverged and no single position covers both.
type DivergedError struct {
	// Ours and Theirs are the two conflicting GTIDs.
	Ours, Theirs MariaDBGTID
}

// Error implements error.
func (e *DivergedError) Error() string {
	return fmt.Sprintf("GTID histories diverged in domain %d: %s and %s share sequence number %d", e.Ours.Domain, e.Ours, e.Theirs, e.Ours.Seq)
}
