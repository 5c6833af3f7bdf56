// Package physical takes and restores a physical backup: a copy of an instance's data directory
// made by the flavor's tool while the server runs (MariaDB's mariadb-backup), streamed as it is
// produced through internal/backup/stream into the bucket, and restored by extracting, preparing
// and moving it into an empty data directory.
//
// It is the part of a backup that runs next to the data (in the backup or restore Job, see
// internal/backup/DESIGN.md): it starts the tool as a child process, so that its exit status, its
// "completed OK!" and the GTID position it prints decide the result, and no shell pipeline stands
// between them. The server's password reaches the tool in its environment (MYSQL_PWD), never in its
// arguments.
package physical

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"filippo.io/age"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
)

// Tool names the programs of a flavor's physical backup.
type Tool struct {
	// Backup takes (--backup), prepares (--prepare) and moves back (--move-back).
	Backup string
	// Extract unpacks the stream (xbstream format) into a directory.
	Extract string
}

// MariaDB is MariaDB's tool, as its server images and Debian's mariadb-backup package install it.
var MariaDB = Tool{Backup: "mariadb-backup", Extract: "mbstream"}

// ObjectName is the name of a physical backup's one object in the backup's directory.
const ObjectName = "data.xbstream.zst"

// TakeOptions say what to back up and where to.
type TakeOptions struct {
	Tool Tool
	// Host, Port and User reach the server (the password is MYSQL_PWD in Env or the process's
	// environment).
	Host string
	Port int
	User string
	// DataDir is the server's data directory, as mounted where the tool runs.
	DataDir string
	// WorkDir is an empty directory for the tool's own files (it writes its checkpoints there).
	WorkDir string
	// Env, when set, is the tool's environment (default: this process's).
	Env []string
	// Store and Key: where the stream is put.
	Store *objectstore.Store
	Key   string
	// Raw, when set, counts the stream's bytes as they are produced (progress).
	Raw *stream.Counter
	// Log, when set, receives the tool's messages as it prints them.
	Log io.Writer
	// Recipients, when set, are the public keys the stream is encrypted to (internal/backup/seal).
	Recipients []age.Recipient
}

// Taken is what a backup produced.
type Taken struct {
	Object backup.Object
	// RawBytes is the size of the stream before compression.
	RawBytes int64
	// GTIDPosition is the server's GTID position the copy is consistent at (empty when the
	// server has written no transaction); BinlogFile and BinlogPos the binary log position.
	GTIDPosition string
	BinlogFile   string
	BinlogPos    uint64
	// ServerVersion is the version the server reported to the tool.
	ServerVersion string
}

// messageTail is how much of the tool's output an error quotes.
const messageTail = 2048

// Take runs the backup tool against the server and streams its output to the store. It returns
// only when the tool said it completed and exited 0, and the object is stored whole; otherwise
// nothing is left under the key (the upload is aborted) and the error quotes the tool's last
// messages.
func Take(ctx context.Context, o TakeOptions) (Taken, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	args := []string{"--backup", "--stream=xbstream",
		"--host=" + o.Host, "--port=" + strconv.Itoa(o.Port), "--user=" + o.User,
		"--datadir=" + o.DataDir, "--target-dir=" + o.WorkDir}
	cmd := exec.CommandContext(ctx, o.Tool.Backup, args...)
	cmd.Env = o.Env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Taken{}, err
	}
	msgs := newMessages(o.Log)
	cmd.Stderr = msgs
	if err := cmd.Start(); err != nil {
		return Taken{}, fmt.Errorf("run %s: %w", o.Tool.Backup, err)
	}
	// The upload reads the stream to its end, or fails and stops reading: then the tool must not
	// block on a full pipe, so it is stopped (cancel) before it is waited for.
	obj, raw, upErr := stream.Upload(ctx, o.Store, o.Key, ObjectName, out, o.Raw, o.Recipients)
	if upErr != nil {
		cancel()
	}
	waitErr := cmd.Wait()
	switch {
	case waitErr != nil && upErr == nil:
		// The tool failed after its stream was stored: the object is not a backup.
		_ = o.Store.Delete(context.WithoutCancel(ctx), o.Key)
		return Taken{}, fmt.Errorf("%s failed (%v): %s", o.Tool.Backup, waitErr, msgs.tail())
	case upErr != nil:
		return Taken{}, fmt.Errorf("upload the backup stream: %w (%s said: %s)", upErr, o.Tool.Backup, msgs.tail())
	case !msgs.completed():
		_ = o.Store.Delete(context.WithoutCancel(ctx), o.Key)
		return Taken{}, fmt.Errorf("%s exited 0 without saying it completed: %s", o.Tool.Backup, msgs.tail())
	}
	t := Taken{Object: obj, RawBytes: raw}
	t.BinlogFile, t.BinlogPos, t.GTIDPosition = msgs.position()
	t.ServerVersion = msgs.serverVersion()
	return t, nil
}

// messages keeps what the tool prints: its tail for errors, its completion and binlog position.
type messages struct {
	mu   sync.Mutex
	log  io.Writer
	buf  []byte // the tail
	line []byte // the line being printed
	ok   bool
	file string
	pos  uint64
	gtid string
	ver  string
}

func newMessages(log io.Writer) *messages { return &messages{log: log} }

// binlogLine is mariadb-backup's report of the copy's position:
// "MySQL binlog position: filename 'mysql-bin.000002', position '344', GTID of the last change '0-1-2'".
// versionLine is its report of the server's version: "Using server version 10.11.14-MariaDB-log".
var versionLine = regexp.MustCompile(`Using server version (\S+)`)

var binlogLine = regexp.MustCompile(`binlog position: filename '([^']*)', position '([0-9]+)'(?:, GTID of the last change '([^']*)')?`)

func (m *messages) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log != nil {
		_, _ = m.log.Write(p)
	}
	m.buf = append(m.buf, p...)
	if len(m.buf) > 4*messageTail {
		m.buf = append([]byte(nil), m.buf[len(m.buf)-messageTail:]...)
	}
	for _, b := range p {
		if b != '\n' {
			m.line = append(m.line, b)
			continue
		}
		m.parse(string(m.line))
		m.line = m.line[:0]
	}
	return len(p), nil
}

func (m *messages) parse(line string) {
	if strings.HasSuffix(strings.TrimSpace(line), "completed OK!") {
		m.ok = true
	}
	if s := versionLine.FindStringSubmatch(line); s != nil {
		m.ver = s[1]
	}
	if s := binlogLine.FindStringSubmatch(line); s != nil {
		m.file = s[1]
		m.pos, _ = strconv.ParseUint(s[2], 10, 64)
		m.gtid = s[3]
	}
}

func (m *messages) completed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ok
}

func (m *messages) position() (string, uint64, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.file, m.pos, m.gtid
}

func (m *messages) serverVersion() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ver
}

func (m *messages) tail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buf
	if len(b) > messageTail {
		b = b[len(b)-messageTail:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(nothing)"
	}
	return s
}

// readBinlogInfo reads the position a prepared copy records (xtrabackup_binlog_info: "file pos
// gtid").
func readBinlogInfo(dir string) (string, uint64, string, error) {
	f, err := os.Open(dir + "/xtrabackup_binlog_info")
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, "", nil
	}
	if err != nil {
		return "", 0, "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return "", 0, "", sc.Err()
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 2 {
		return "", 0, "", fmt.Errorf("xtrabackup_binlog_info: %q is not a binlog position", sc.Text())
	}
	pos, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("xtrabackup_binlog_info: %q is not a binlog position", sc.Text())
	}
	gtid := ""
	if len(fields) > 2 {
		gtid = fields[2]
	}
	return fields[0], pos, gtid, nil
}
