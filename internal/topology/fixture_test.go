package topology

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// vertical is a parsed `mysql … \G` recording: rows plus the column order.
type vertical struct {
	cols []string
	rows []Row
}

var verticalKey = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*):(?: (.*))?$`)

// readVertical parses a recording made with the mysql client's \G output:
// "***… N. row …***" separators, "Column: value" lines, NULL printed as NULL
// (dropped here, the package's NULL convention), and values that span
// several lines (GTID sets) continued on lines that do not look like
// "Column:". Lines starting with '#' are comments.
func readVertical(t testing.TB, name string) vertical {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var v vertical
	var cur Row
	last := ""
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "#"), strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "*"):
			cur = Row{}
			v.rows = append(v.rows, cur)
			last = ""
			continue
		}
		if cur == nil {
			t.Fatalf("%s: data before the first row separator: %q", name, line)
		}
		if m := verticalKey.FindStringSubmatch(line); m != nil {
			last = m[1]
			if !seen[last] {
				seen[last] = true
				v.cols = append(v.cols, last)
			}
			if m[2] != "NULL" {
				cur[last] = strings.TrimRight(m[2], " ")
			}
			continue
		}
		if last == "" {
			t.Fatalf("%s: continuation line without a column: %q", name, line)
		}
		cur[last] += "\n" + line
	}
	return v
}

// fakeServer is a database/sql driver that answers recorded results for the
// exact statements a dialect sends, and records every statement. Any
// statement without a recording fails, which is what pins the MySQL flavors'
// statements in tests that cannot run a real MySQL.
type fakeServer struct {
	t       testing.TB
	mu      sync.Mutex
	results map[string]vertical
	errs    map[string]error
	log     []string
}

func newFakeServer(t testing.TB) *fakeServer {
	return &fakeServer{t: t, results: map[string]vertical{}, errs: map[string]error{}}
}

func (f *fakeServer) on(query string, v vertical) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.results[query] = v
}

func (f *fakeServer) onFixture(query, file string) { f.on(query, readVertical(f.t, file)) }

// onRow records a one-row result from alternating column/value pairs; the
// value nil stands for NULL.
func (f *fakeServer) onRow(query string, kv ...any) {
	var v vertical
	row := Row{}
	for i := 0; i < len(kv); i += 2 {
		col := kv[i].(string)
		v.cols = append(v.cols, col)
		if kv[i+1] != nil {
			row[col] = fmt.Sprint(kv[i+1])
		}
	}
	v.rows = []Row{row}
	f.on(query, v)
}

func (f *fakeServer) onEmpty(query string, cols ...string) { f.on(query, vertical{cols: cols}) }

func (f *fakeServer) fail(query string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[query] = err
}

func (f *fakeServer) statements() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *fakeServer) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = nil
}

func (f *fakeServer) db() *sql.DB { return sql.OpenDB(fakeConnector{f}) }

func (f *fakeServer) record(query string, args []driver.NamedValue) (vertical, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	entry := query
	if len(args) > 0 {
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = fmt.Sprintf("%v", a.Value)
		}
		entry += " [" + strings.Join(parts, ", ") + "]"
	}
	f.log = append(f.log, entry)
	if err, ok := f.errs[query]; ok {
		return vertical{}, err
	}
	v, ok := f.results[query]
	if !ok && !strings.HasPrefix(query, "SELECT") && !strings.HasPrefix(query, "SHOW") {
		return vertical{}, nil // statements without a result set succeed
	}
	if !ok {
		return vertical{}, fmt.Errorf("fake server: unexpected query %q", query)
	}
	return v, nil
}

type fakeConnector struct{ f *fakeServer }

func (c fakeConnector) Connect(context.Context) (driver.Conn, error) { return fakeConn(c), nil }
func (c fakeConnector) Driver() driver.Driver                        { return nil }

type fakeConn struct{ f *fakeServer }

func (c fakeConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("fake server: prepared statements are not used")
}
func (c fakeConn) Close() error              { return nil }
func (c fakeConn) Begin() (driver.Tx, error) { return nil, errors.New("fake server: no transactions") }

func (c fakeConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	v, err := c.f.record(query, args)
	if err != nil {
		return nil, err
	}
	return &fakeRows{v: v}, nil
}

func (c fakeConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if _, err := c.f.record(query, args); err != nil {
		return nil, err
	}
	return driver.RowsAffected(0), nil
}

type fakeRows struct {
	v vertical
	i int
}

func (r *fakeRows) Columns() []string { return r.v.cols }
func (r *fakeRows) Close() error      { return nil }
func (r *fakeRows) Next(dest []driver.Value) error {
	if r.i >= len(r.v.rows) {
		return io.EOF
	}
	row := r.v.rows[r.i]
	r.i++
	for i, c := range r.v.cols {
		if v, ok := row[c]; ok {
			dest[i] = []byte(v)
		} else {
			dest[i] = nil
		}
	}
	return nil
}
