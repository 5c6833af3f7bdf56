package topology

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// DefaultPort is the MySQL port every pod listens on.
const DefaultPort = 3306

// Target is one MySQL instance as the orchestration sees it: a pod, with
// whatever address information the chosen Dialer needs.
type Target struct {
	// Name identifies the instance in errors and is the key of a
	// StaticDialer's map (usually the pod name).
	Name string
	// Namespace and Pod locate the pod for port forwarding.
	Namespace string
	// Pod is the pod's name.
	Pod string
	// Host is the pod IP (or any resolvable name) for direct dialing.
	Host string
	// Port defaults to DefaultPort.
	Port int
}

// server names the server t reaches as user, process-wide (Instance.Server).
func (t Target) server(user string) string {
	return fmt.Sprintf("%s/%s/%s/%s@%s:%d", t.Namespace, t.Pod, t.Name, user, t.Host, t.port())
}

func (t Target) port() int {
	if t.Port == 0 {
		return DefaultPort
	}
	return t.Port
}

// Dialer opens a network connection to a target's MySQL port. It is the only
// thing that differs between running inside the cluster (pod IPs reachable),
// outside it (port forwarding through the API server) and tests (an explicit
// address map). Implementations honour ctx's deadline.
type Dialer interface {
	// DialContext connects to t's MySQL port.
	DialContext(ctx context.Context, t Target) (net.Conn, error)
}

// dialError carries the dialer's failure kind through the driver, which
// returns dial errors unchanged.
type dialError struct {
	target string
	kind   ErrorKind
	err    error
}

func (e *dialError) Error() string        { return "dial " + e.target + ": " + e.err.Error() }
func (e *dialError) Unwrap() error        { return e.err }
func (e *dialError) ErrorKind() ErrorKind { return e.kind }

func newDialError(t Target, err error) error {
	return &dialError{target: t.Name, kind: KindOf(err), err: err}
}

// DirectDialer dials the target's Host (the pod IP) directly: for the
// in-cluster watch Deployment and for the local rig, where pods get loopback
// addresses.
type DirectDialer struct {
	// Timeout bounds the TCP handshake when ctx has no earlier deadline
	// (default 5s).
	Timeout time.Duration
}

var _ Dialer = DirectDialer{}

// DialContext implements Dialer.
func (d DirectDialer) DialContext(ctx context.Context, t Target) (net.Conn, error) {
	if t.Host == "" {
		return nil, &dialError{target: t.Name, kind: ErrorOther, err: errors.New("no host (pod IP) known")}
	}
	return dialTCP(ctx, t, net.JoinHostPort(t.Host, strconv.Itoa(t.port())), d.Timeout)
}

// StaticDialer maps target names to fixed addresses: for tests, for a
// cluster reached through explicit tunnels, and for debugging.
type StaticDialer struct {
	// Addrs maps Target.Name (or "namespace/pod") to "host:port".
	Addrs map[string]string
	// Timeout bounds the TCP handshake (default 5s).
	Timeout time.Duration
}

var _ Dialer = StaticDialer{}

// DialContext implements Dialer.
func (d StaticDialer) DialContext(ctx context.Context, t Target) (net.Conn, error) {
	addr, ok := d.Addrs[t.Name]
	if !ok && t.Namespace != "" {
		addr, ok = d.Addrs[t.Namespace+"/"+t.Pod]
	}
	if !ok {
		return nil, &dialError{target: t.Name, kind: ErrorOther, err: errors.New("no static address configured")}
	}
	return dialTCP(ctx, t, addr, d.Timeout)
}

func dialTCP(ctx context.Context, t Target, addr string, timeout time.Duration) (net.Conn, error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	nd := net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, newDialError(t, err)
	}
	return c, nil
}

// ConnectOptions say how to reach and log in to instances.
type ConnectOptions struct {
	// Dialer decides how the network connection is made.
	Dialer Dialer
	// Credentials are the account the pool logs in with.
	Credentials Credentials
	// ConnectTimeout bounds dialing plus the MySQL handshake (default 5s).
	ConnectTimeout time.Duration
	// MaxOpenConns bounds the pool (default 4: observation, one action and
	// a kill at once are enough, and a port-forward stream is not free).
	MaxOpenConns int
	// Logger receives the driver's own log lines, with secrets removed
	// (default: discarded).
	Logger *slog.Logger
}

// Open returns a connection pool to one target that dials through
// opts.Dialer. No DSN string is ever built, so no DSN (and no password)
// can end up in a log line or an error message.
func Open(t Target, opts ConnectOptions) (*sql.DB, error) {
	if opts.Dialer == nil {
		return nil, errors.New("no dialer")
	}
	cfg := mysql.NewConfig()
	cfg.User = opts.Credentials.User
	cfg.Passwd = opts.Credentials.Password.Reveal()
	// Net and Addr only label the connection for the driver; DialFunc
	// decides where it really goes.
	cfg.Net = "mysqlctl"
	cfg.Addr = t.Name
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return opts.Dialer.DialContext(ctx, t)
	}
	cfg.Timeout = opts.ConnectTimeout
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	// Statements such as CHANGE MASTER cannot be prepared; the driver
	// quotes arguments itself, honouring NO_BACKSLASH_ESCAPES.
	cfg.InterpolateParams = true
	cfg.Logger = driverLogger{log: opts.Logger, secrets: []string{opts.Credentials.Password.Reveal()}}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, sanitize(err, []string{cfg.Passwd}))
	}
	db := sql.OpenDB(connector)
	maxOpen := opts.MaxOpenConns
	if maxOpen <= 0 {
		maxOpen = 4
	}
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(min(2, maxOpen))
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// Connect opens a pool to t and wraps it in an Instance that closes it.
func Connect(t Target, opts ConnectOptions) (*Instance, error) {
	db, err := Open(t, opts)
	if err != nil {
		return nil, err
	}
	i := NewInstance(t.Name, db, opts.Credentials.Password.Reveal())
	i.closer = db.Close
	i.Server = t.server(opts.Credentials.User)
	return i, nil
}

// driverLogger forwards go-sql-driver's log lines without secrets.
type driverLogger struct {
	log     *slog.Logger
	secrets []string
}

func (l driverLogger) Print(v ...any) {
	if l.log == nil {
		return
	}
	l.log.Warn(redact(strings.TrimSpace(fmt.Sprint(v...)), l.secrets), "component", "mysql-driver")
}
