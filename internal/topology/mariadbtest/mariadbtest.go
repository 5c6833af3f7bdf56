package mariadbtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Accounts that every server started here has. They are created in the
// template, before binary logging exists, so they carry no GTID and every
// server starts with an empty GTID history.
const (
	// RootUser has ALL PRIVILEGES WITH GRANT OPTION from any host.
	RootUser     = "root"
	RootPassword = "root-test-secret"
	// ReplUser has REPLICATION SLAVE only.
	ReplUser     = "repl"
	ReplPassword = "repl-test-secret"
	// AppUser owns the database AppDatabase and has no administrative
	// privilege (in particular neither SUPER nor READ_ONLY ADMIN), as an
	// application account would; fencing must stop its writes.
	AppUser     = "app"
	AppPassword = "app-test-secret"
	// AppDatabase holds AppTable (id INT AUTO_INCREMENT PRIMARY KEY, v
	// VARCHAR(64)), present on every server.
	AppDatabase = "app"
	AppTable    = "app.t"
)

// Options describe one server. The zero value is valid.
type Options struct {
	// Name appears in failure messages; default "mariadb-<server id>".
	Name string
	// ServerID must be unique among replicating servers; 0 picks the next
	// free one from a process-wide counter.
	ServerID uint32
	// DomainID is gtid_domain_id (default 0, shared by all servers as the
	// project configures them).
	DomainID uint32
	// Host is the loopback address to bind. Empty picks a random free
	// address in 127.64.0.0–127.250.255.255, which keeps clear of the
	// 127.0.x.y addresses the local rig gives to pods.
	Host string
	// Port defaults to 3306.
	Port int
	// Args are extra mariadbd options, for example
	// "--rpl-semi-sync-master-enabled=ON".
	Args []string
	// DataDir, when set, is an existing data directory to run on (a restored
	// backup), used as it is; default a copy of the template.
	DataDir string
	// SkipNetworking runs the server as an image entrypoint runs its temporary
	// init server: no TCP listener, the Unix socket only (DSN and DB use it).
	SkipNetworking bool
	// RootPassword is root's password in DataDir, when it is not RootPassword
	// (readiness and DB log in with it).
	RootPassword string
}

// Server is one running mariadbd.
type Server struct {
	// Name is Options.Name.
	Name string
	// Host and Port are where the server listens (loopback only).
	Host string
	Port int
	// ServerID is the server's server_id.
	ServerID uint32
	// DataDir is the server's copy of the template datadir.
	DataDir string

	cmd     *exec.Cmd
	args    []string      // mariadbd's arguments, for Restart
	done    chan struct{} // closed once the process has been waited for
	waitErr error
	sockDir string
	// socketOnly is Options.SkipNetworking.
	socketOnly bool
	// rootPassword is Options.RootPassword, or RootPassword.
	rootPassword string
	// ownDir is removed after shutdown (shared servers only; Start's
	// directories belong to testing.TB.TempDir).
	ownDir  string
	logPath string
	frozen  atomic.Bool
	stopped atomic.Bool
	dbOnce  sync.Once
	db      *sql.DB
}

var (
	nextServerID atomic.Uint32

	templateOnce sync.Once
	templateDir  string
	templateErr  error

	sharedMu sync.Mutex
	shared   []*Server
)

func init() { nextServerID.Store(100) }

// Available reports why servers cannot be started here, or nil.
func Available() error {
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found in PATH (install the Debian package mariadb-server): %w", bin, err)
		}
	}
	return nil
}

// Main runs the tests of a package and then stops the servers started with
// StartShared and removes the template datadir. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(mariadbtest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	sharedMu.Lock()
	servers := shared
	shared = nil
	sharedMu.Unlock()
	for _, s := range servers {
		if err := s.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "mariadbtest: stopping %s: %v\n", s.Name, err)
			code = max(code, 1)
		}
		_ = os.RemoveAll(s.ownDir)
	}
	if templateDir != "" {
		_ = os.RemoveAll(templateDir)
	}
	return code
}

// Start starts a server that is stopped when the test (or benchmark) ends.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s := start(tb, opts, tb.TempDir())
	tb.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			tb.Errorf("stopping %s: %v", s.Name, err)
		}
	})
	return s
}

// StartShared starts a server that outlives the calling test and is stopped
// by Main, so that several tests of a package can share one topology.
func StartShared(tb testing.TB, opts Options) *Server {
	tb.Helper()
	dir, err := os.MkdirTemp("", "mariadbtest-data-")
	if err != nil {
		tb.Fatal(err)
	}
	started := false
	defer func() {
		if !started {
			_ = os.RemoveAll(dir)
		}
	}()
	s := start(tb, opts, dir)
	started = true
	s.ownDir = dir
	sharedMu.Lock()
	shared = append(shared, s)
	sharedMu.Unlock()
	return s
}

func start(tb testing.TB, opts Options, dir string) *Server {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Fatal(err)
	}
	tpl, err := template()
	if err != nil {
		tb.Fatalf("building the mariadb template datadir: %v", err)
	}
	if opts.ServerID == 0 {
		opts.ServerID = nextServerID.Add(1)
	}
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("mariadb-%d", opts.ServerID)
	}
	if opts.Port == 0 {
		opts.Port = 3306
	}
	// A randomly chosen address can be taken by a server of another test
	// binary between our probe and mariadbd's bind; retry with a new one.
	attempts := 1
	if opts.Host == "" {
		attempts = 5
	}
	var lastErr error
	for attempt := range attempts {
		o := opts
		if o.Host == "" {
			o.Host = freeLoopback(o.Port)
		}
		dataDir := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		s, err := launch(o, tpl, dataDir)
		if err == nil {
			return s
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	tb.Fatalf("starting %s: %v", opts.Name, lastErr)
	return nil
}

var errAddrInUse = errors.New("address already in use")

func launch(o Options, tpl, dataDir string) (*Server, error) {
	if o.DataDir != "" {
		dataDir = o.DataDir
	} else if err := copyDir(tpl, dataDir); err != nil {
		return nil, err
	}
	// Unix socket paths are limited to 107 bytes, so the socket lives in a
	// short directory of its own rather than in the (long) test temp dir.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		return nil, err
	}
	s := &Server{
		Name:     o.Name,
		Host:     o.Host,
		Port:     o.Port,
		ServerID: o.ServerID,
		DataDir:  dataDir,
		done:     make(chan struct{}),
		sockDir:  sockDir,
		logPath:  filepath.Join(dataDir, "mariadbd.err"),

		socketOnly: o.SkipNetworking, rootPassword: o.RootPassword,
	}
	args := append(serverArgs(dataDir, sockDir),
		"--bind-address="+o.Host,
		"--port="+strconv.Itoa(o.Port),
		"--report-host="+o.Host,
		"--log-error="+s.logPath,
		"--server-id="+strconv.FormatUint(uint64(o.ServerID), 10),
		"--gtid-domain-id="+strconv.FormatUint(uint64(o.DomainID), 10),
		"--log-bin=mysql-bin",
		"--relay-log=relay-bin",
		"--log-slave-updates=ON",
		"--gtid-strict-mode=ON",
		"--binlog-format=ROW",
		"--skip-name-resolve",
		"--max-connections=200",
	)
	args = append(args, o.Args...)
	if o.SkipNetworking {
		args = append(args, "--skip-networking")
	}
	s.args = args
	if err := s.spawn(args); err != nil {
		_ = os.RemoveAll(sockDir)
		return nil, err
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		// The server never answered: SIGTERM could hang it, so kill it.
		s.kill()
		_ = os.RemoveAll(sockDir)
		log := s.logTail()
		if strings.Contains(log, "Address already in use") {
			return nil, fmt.Errorf("%w: %s:%d", errAddrInUse, o.Host, o.Port)
		}
		return nil, fmt.Errorf("%w; error log:\n%s", err, log)
	}
	return s, nil
}

// serverArgs are the options shared by the template bootstrap and every
// server: small memory, no performance_schema, relaxed durability (test data
// need not survive a host crash), and paths inside the test's directories.
func serverArgs(dataDir, sockDir string) []string {
	return []string{
		"--no-defaults",
		"--user=root",
		"--datadir=" + dataDir,
		"--socket=" + filepath.Join(sockDir, "s"),
		"--pid-file=" + filepath.Join(sockDir, "pid"),
		"--tmpdir=" + sockDir,
		"--innodb-buffer-pool-size=16M",
		"--innodb-log-file-size=4M",
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
		"--sync-binlog=0",
		"--performance-schema=OFF",
		"--skip-host-cache",
	}
}

func (s *Server) spawn(args []string) error {
	out, err := os.Create(filepath.Join(s.DataDir, "mariadbd.out"))
	if err != nil {
		return err
	}
	cmd := exec.Command("mariadbd", args...)
	cmd.Stdout = out
	cmd.Stderr = out
	// If the test binary dies, the kernel kills the server instead of
	// leaving it bound to a loopback address.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("starting mariadbd: %w", err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		_ = out.Close()
		close(s.done)
	}()
	return nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	db, err := sql.Open("mysql", s.DSN(RootUser, s.root()))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("mariadbd exited before answering: %w", s.waitErr)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd did not answer within %s: %w", timeout, err)
		}
	}
}

// root is root's password on this server.
func (s *Server) root() string {
	if s.rootPassword != "" {
		return s.rootPassword
	}
	return RootPassword
}

// Socket is the path of the server's Unix socket.
func (s *Server) Socket() string { return filepath.Join(s.sockDir, "s") }

// Addr returns "host:port".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// DSN returns a go-sql-driver DSN for user. It interpolates parameters on the
// client (statements such as CHANGE MASTER cannot be prepared) and bounds
// every network step, so a wedged server fails a test instead of hanging it.
func (s *Server) DSN(user, password string) string {
	cfg := mysql.NewConfig()
	cfg.User = user
	cfg.Passwd = password
	cfg.Net, cfg.Addr = "tcp", s.Addr()
	if s.socketOnly {
		cfg.Net, cfg.Addr = "unix", s.Socket()
	}
	cfg.InterpolateParams = true
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = 60 * time.Second
	cfg.WriteTimeout = 30 * time.Second
	return cfg.FormatDSN()
}

// DB returns a root connection pool, closed when the server stops.
func (s *Server) DB(tb testing.TB) *sql.DB {
	tb.Helper()
	s.dbOnce.Do(func() { s.db = s.OpenDB(tb, RootUser, s.root()) })
	return s.db
}

// OpenDB opens a pool for user whose driver log lines are discarded: tests
// kill sessions on purpose, and the driver would log each broken one.
func (s *Server) OpenDB(tb testing.TB, user, password string) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(s.DSN(user, password))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Logger = &mysql.NopLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return sql.OpenDB(connector)
}

// Exec runs statements as root and fails the test on the first error.
func (s *Server) Exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	db := s.DB(tb)
	for _, q := range stmts {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := db.ExecContext(ctx, q)
		cancel()
		if err != nil {
			tb.Fatalf("%s: %s: %v", s.Name, q, err)
		}
	}
}

// QueryString runs a one-value query as root; NULL is returned as "NULL".
func (s *Server) QueryString(tb testing.TB, q string, args ...any) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var v sql.NullString
	if err := s.DB(tb).QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
		tb.Fatalf("%s: %s: %v", s.Name, q, err)
	}
	if !v.Valid {
		return "NULL"
	}
	return v.String
}

// ReplicateFrom points s at source with GTID auto-positioning
// (MASTER_USE_GTID=slave_pos) using the repl account, starts both threads and
// waits until s has applied everything source had at that moment.
func (s *Server) ReplicateFrom(tb testing.TB, source *Server) {
	tb.Helper()
	s.Exec(tb,
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			source.Host, source.Port, ReplUser, ReplPassword),
		"START SLAVE",
	)
	s.CatchUp(tb, source)
}

// CatchUp waits (up to 30 s) until s has applied source's current
// gtid_binlog_pos.
func (s *Server) CatchUp(tb testing.TB, source *Server) {
	tb.Helper()
	pos := source.QueryString(tb, "SELECT @@global.gtid_binlog_pos")
	if got := s.QueryString(tb, "SELECT MASTER_GTID_WAIT(?, 30)", pos); got != "0" {
		tb.Fatalf("%s did not reach %s's position %q within 30s (MASTER_GTID_WAIT=%s); replica status: %s",
			s.Name, source.Name, pos, got, s.replicaErrors(tb))
	}
}

func (s *Server) replicaErrors(tb testing.TB) string {
	rows, err := s.DB(tb).Query("SHOW SLAVE STATUS") //nolint:rowserrcheck // diagnostic text only: any error shows in the result
	if err != nil {
		return err.Error()
	}
	defer func() { _ = rows.Close() }()
	cols, _ := rows.Columns()
	if !rows.Next() {
		return "not a replica"
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return err.Error()
	}
	var parts []string
	for i, c := range cols {
		switch c {
		case "Slave_IO_Running", "Slave_SQL_Running", "Last_IO_Error", "Last_SQL_Error", "Gtid_IO_Pos":
			parts = append(parts, c+"="+vals[i].String)
		}
	}
	return strings.Join(parts, " ")
}

// Freeze stops the process with SIGSTOP: its socket keeps accepting TCP
// connections (the kernel completes the handshake) but nothing answers, which
// is what a hung server or a half-open network path looks like. Thaw undoes
// it; the cleanup thaws a frozen server before stopping it.
func (s *Server) Freeze(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatal(err)
	}
	s.frozen.Store(true)
}

// Thaw resumes a frozen server with SIGCONT.
func (s *Server) Thaw(tb testing.TB) {
	tb.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		tb.Fatal(err)
	}
	s.frozen.Store(false)
}

// Kill ends the server with SIGKILL, as a crashed or OOM-killed pod, and
// waits for the process.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.kill()
	s.stopped.Store(true)
}

// Restart kills the server with SIGKILL, as a crashed pod, and starts it
// again on the same data directory, address and options (InnoDB recovers
// what was committed). Connections of pools opened before reconnect.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.kill()
	s.done = make(chan struct{})
	if err := s.spawn(s.args); err != nil {
		s.stopped.Store(true)
		tb.Fatalf("restarting %s: %v", s.Name, err)
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.kill()
		s.stopped.Store(true)
		tb.Fatalf("restarting %s: %v; error log:\n%s", s.Name, err, s.logTail())
	}
}

func (s *Server) kill() {
	if s.frozen.Load() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// shutdown stops a server that has answered: SIGTERM (a clean InnoDB
// shutdown), then SIGKILL if it has not exited within 30 seconds.
func (s *Server) shutdown() error {
	defer func() { _ = os.RemoveAll(s.sockDir) }()
	if s.db != nil {
		_ = s.db.Close()
	}
	if s.stopped.Swap(true) {
		<-s.done
		return nil
	}
	if s.frozen.Load() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
		return errors.New("did not exit within 30s of SIGTERM; killed")
	}
}

// ErrorLog returns the server's error log, for failure messages.
func (s *Server) ErrorLog() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

func (s *Server) logTail() string {
	out, _ := os.ReadFile(filepath.Join(s.DataDir, "mariadbd.out"))
	log := s.ErrorLog() + string(out)
	if len(log) > 4000 {
		log = log[len(log)-4000:]
	}
	return log
}

// freeLoopback picks a random loopback address whose port is free right now.
func freeLoopback(port int) string {
	for {
		host := fmt.Sprintf("127.%d.%d.%d", 64+rand.IntN(187), rand.IntN(256), 1+rand.IntN(254))
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return host
	}
}

// template builds, once per test binary, a datadir with the test accounts.
func template() (string, error) {
	templateOnce.Do(func() {
		templateDir, templateErr = buildTemplate()
	})
	return filepath.Join(templateDir, "data"), templateErr
}

func buildTemplate() (string, error) {
	dir, err := os.MkdirTemp("", "mariadbtest-tpl-")
	if err != nil {
		return "", err
	}
	dataDir := filepath.Join(dir, "data")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Its own tmpdir: the bootstrap server's temporary tables otherwise live
	// in the shared /tmp, where another process's cleanup can remove them
	// mid-install (seen as "Unknown table 'mysql.tmp_user_sys'").
	installTmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(installTmp, 0o700); err != nil {
		return dir, err
	}
	install := exec.CommandContext(ctx, "mariadb-install-db",
		"--no-defaults", "--user=root", "--datadir="+dataDir, "--tmpdir="+installTmp,
		"--auth-root-authentication-method=normal", "--skip-test-db",
		"--innodb-log-file-size=4M", "--innodb-buffer-pool-size=16M")
	if out, err := install.CombinedOutput(); err != nil {
		return dir, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	// Start the fresh datadir without networking or binary logs, create the
	// accounts over the Unix socket, and shut it down cleanly.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		return dir, err
	}
	defer func() { _ = os.RemoveAll(sockDir) }()
	s := &Server{Name: "template", DataDir: dataDir, done: make(chan struct{}), logPath: filepath.Join(dataDir, "mariadbd.err")}
	args := append(serverArgs(dataDir, sockDir), "--skip-networking", "--log-error="+s.logPath, "--skip-log-bin")
	if err := s.spawn(args); err != nil {
		return dir, err
	}
	cfg := mysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "unix"
	cfg.Addr = filepath.Join(sockDir, "s")
	cfg.Timeout = 5 * time.Second
	// SHUTDOWN closes the connection under the driver, which would log a
	// harmless "broken pipe".
	cfg.Logger = &mysql.NopLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		s.kill()
		return dir, err
	}
	db := sql.OpenDB(connector)
	defer func() { _ = db.Close() }()
	var ready bool
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		if err := db.PingContext(ctx); err == nil {
			ready = true
			break
		}
		select {
		case <-s.done:
			return dir, fmt.Errorf("template server exited: %w\n%s", s.waitErr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !ready {
		s.kill()
		return dir, fmt.Errorf("template server did not answer\n%s", s.logTail())
	}
	setup := []string{
		// Only root@localhost (the Unix socket) and root@'%' remain, so the
		// test password is what decides every TCP login.
		"DROP USER IF EXISTS 'root'@'127.0.0.1', 'root'@'::1', ''@'localhost'",
		"CREATE USER 'root'@'%' IDENTIFIED BY '" + RootPassword + "'",
		"GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION",
		"CREATE USER 'repl'@'%' IDENTIFIED BY '" + ReplPassword + "'",
		"GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
		"CREATE DATABASE " + AppDatabase,
		"CREATE TABLE " + AppTable + " (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64))",
		"CREATE USER 'app'@'%' IDENTIFIED BY '" + AppPassword + "'",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON " + AppDatabase + ".* TO 'app'@'%'",
		// Last, as this session's own account: over the socket too, the password decides.
		"ALTER USER 'root'@'localhost' IDENTIFIED BY '" + RootPassword + "'",
	}
	// The host name entry depends on the machine's name.
	if host, err := os.Hostname(); err == nil {
		setup = append([]string{"DROP USER IF EXISTS 'root'@'" + strings.ReplaceAll(host, "'", "") + "'"}, setup...)
	}
	for _, q := range setup {
		if _, err := db.ExecContext(ctx, q); err != nil {
			s.kill()
			return dir, fmt.Errorf("template setup %q: %w", q, err)
		}
	}
	if _, err := db.ExecContext(ctx, "SHUTDOWN"); err != nil {
		s.kill()
		return dir, fmt.Errorf("template shutdown: %w", err)
	}
	select {
	case <-s.done:
	case <-ctx.Done():
		s.kill()
		return dir, errors.New("template server did not shut down")
	}
	_ = os.Remove(filepath.Join(dataDir, "mariadbd.out"))
	_ = os.Remove(s.logPath)
	return dir, nil
}

// copyDir copies the template datadir (regular files and directories only).
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o660)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
