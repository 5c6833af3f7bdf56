package physical

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ResetOptions say which restored data directory gets which root password.
type ResetOptions struct {
	// Server is the server binary (default: mariadbd, found on PATH or in /usr/sbin).
	Server string
	// DataDir is the restored data directory; nothing else may run on it.
	DataDir string
	// Password is root's new password.
	Password string
	// StartTimeout bounds the temporary server's start (default 2 minutes: crash recovery of
	// a large prepared backup may take a while).
	StartTimeout time.Duration
	// Log, when set, receives the temporary server's messages when it fails.
	Log io.Writer
}

// ResetRootPassword sets the password of every root account (root@'%', root@localhost, ...) in a
// restored data directory whose old passwords are not known: the restore of a backup from a
// bucket alone, its cluster's Secret gone with its namespace. It starts the server on the
// directory for the length of the change only, with no network (a socket in a private
// directory), no privilege checks, no replication started (a backup taken on a replica remembers
// its source) and no binary log (the change is not part of the cluster's history), and shuts it
// down cleanly. Run again on data it already changed, it sets the same password again.
func ResetRootPassword(ctx context.Context, o ResetOptions) (err error) {
	if o.Password == "" {
		return errors.New("no new root password given")
	}
	server, err := serverBinary(o.Server)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "mysqlctl-reset-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "mysqld.sock")
	args := []string{"--no-defaults", "--datadir=" + o.DataDir, "--socket=" + sock, "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--skip-networking", "--skip-grant-tables", "--skip-slave-start", "--log-error=" + filepath.Join(dir, "error.log")}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root") // the files stay the Job's user's, as the restore made them
	}
	cmd := exec.Command(server, args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s on the restored data: %w", server, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if err != nil {
			_ = cmd.Process.Kill()
			<-exited
			err = fmt.Errorf("%w%s", err, serverLog(filepath.Join(dir, "error.log"), o.Log))
		}
	}()
	db, err := openSocket(sock)
	if err != nil {
		return err
	}
	defer db.Close()
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if err := waitServer(ctx, db, exited, timeout); err != nil {
		return err
	}
	if err := setRootPassword(ctx, db, o.Password); err != nil {
		return err
	}
	// A clean shutdown: the server that starts next finds nothing to recover.
	if _, err := db.ExecContext(ctx, "SHUTDOWN"); err != nil {
		return fmt.Errorf("shut the temporary server down: %w", err)
	}
	select {
	case werr := <-exited:
		if werr != nil {
			exited <- werr // for the deferred cleanup
			return fmt.Errorf("the temporary server ended with %v", werr)
		}
		return nil
	case <-time.After(timeout):
		return errors.New("the temporary server did not shut down within " + timeout.String())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setRootPassword loads the grant tables (skipped at start) and sets every root account's password.
func setRootPassword(ctx context.Context, db *sql.DB, password string) error {
	if _, err := db.ExecContext(ctx, "FLUSH PRIVILEGES"); err != nil {
		return fmt.Errorf("load the restored accounts: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT Host FROM mysql.user WHERE User = 'root' AND is_role = 'N'")
	if err != nil {
		return fmt.Errorf("read the restored root accounts: %w", err)
	}
	var hosts []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			_ = rows.Close()
			return err
		}
		hosts = append(hosts, h)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	if len(hosts) == 0 {
		return errors.New("the restored data has no root account: its password cannot be set")
	}
	for _, h := range hosts {
		// The values are sent quoted by the driver (interpolateParams); the error names the
		// account, never the password.
		if _, err := db.ExecContext(ctx, "ALTER USER 'root'@? IDENTIFIED BY ?", h, password); err != nil {
			return fmt.Errorf("set the password of root@%s: %v", h, mysqlCode(err))
		}
	}
	return nil
}

// mysqlCode is a server error by its number and message (never the statement's values).
func mysqlCode(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Sprintf("error %d: %s", me.Number, me.Message)
	}
	return err.Error()
}

// openSocket is a pool on the temporary server's socket: with the grant tables skipped, any
// user is let in with no password.
func openSocket(sock string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", sock
	cfg.InterpolateParams = true
	cfg.Timeout = 5 * time.Second
	// The server this pool reaches is shut down through it: the driver's lines about the
	// connection it then loses are noise.
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

// waitServer waits until the temporary server answers, or ends.
func waitServer(ctx context.Context, db *sql.DB, exited chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := db.PingContext(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case werr := <-exited:
			exited <- werr // for the deferred cleanup
			return fmt.Errorf("the temporary server on the restored data ended at start (%v)", werr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the temporary server on the restored data did not answer within %s: %v", timeout, err)
		}
	}
}

// serverBinary is the server to start: the one named, else mariadbd on PATH or in /usr/sbin.
func serverBinary(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if p, err := exec.LookPath("mariadbd"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/mariadbd", "/usr/bin/mariadbd"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("mariadbd is not on PATH nor in /usr/sbin: the server image's own server is needed to set the restored root password")
}

// serverLog is the end of the temporary server's error log, for an error message (empty when
// there is none), also copied to w.
func serverLog(path string, w io.Writer) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if w != nil {
		_, _ = w.Write(b)
	}
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return "; the server's log ends: " + string(b)
}
