package physical

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
)

// Files a restore keeps in the data directory so that a restore run again (its Job's pod
// restarted, the operation resumed) finishes or starts over, and never mistakes another's data for
// its own.
const (
	// restoringMark is written before anything else: the directory's contents are this restore's.
	restoringMark = ".mysqlctl-restoring"
	// restoredMark is written once the data is in place; it holds the GTID position.
	restoredMark = ".mysqlctl-restored"
	// stagingDir, inside the data directory (the same file system, so moving back is a rename),
	// holds the extracted copy while it is prepared.
	stagingDir = ".mysqlctl-restore"
)

// RestoreOptions say which backup object goes into which data directory.
type RestoreOptions struct {
	Tool  Tool
	Store *objectstore.Store
	// Key and Object: the object and its manifest entry (checked as it is read).
	Key    string
	Object backup.Object
	// BackupID is recorded with the restored data: a restore of another backup into a directory
	// this one was restored into is refused.
	BackupID string
	// DataDir is the new instance's empty data directory (lost+found may be there).
	DataDir string
	// UseMemory is the prepare's buffer pool (mariadb-backup --use-memory), default the tool's.
	UseMemory string
	// Raw, when set, counts the decompressed bytes as they are extracted, and Read the object's
	// bytes as they are downloaded (progress: Read of Object.Size is how far the restore is).
	Raw, Read *stream.Counter
	// Log, when set, receives the tools' messages.
	Log io.Writer
	// Identities open an encrypted object (internal/backup/seal); none: the object is not.
	Identities seal.Identities
}

// Restored is what a restore put in place.
type Restored struct {
	// GTIDPosition the data is consistent at: the new primary's GTID history continues from it.
	GTIDPosition string `json:"gtidPosition"`
	BinlogFile   string `json:"binlogFile,omitempty"`
	BinlogPos    uint64 `json:"binlogPos,omitempty"`
	// Again is set when the data directory already held this backup, restored by an earlier run.
	Again bool `json:"again,omitempty"`
}

// Restore extracts, prepares and moves the backup into o.DataDir. The directory must be empty,
// or hold an earlier, interrupted or finished, run of the same restore: an interrupted run is
// wiped and started over, a finished one is returned as it is. A damaged object is refused with
// its key named (backup.ErrDamaged) and leaves nothing a server would start on.
func Restore(ctx context.Context, o RestoreOptions) (Restored, error) {
	if r, done, err := o.resumeOrClear(); err != nil || done {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(o.DataDir, restoringMark), []byte(o.BackupID+"\n"), 0o640); err != nil {
		return Restored{}, err
	}
	staging := filepath.Join(o.DataDir, stagingDir)
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return Restored{}, err
	}
	if err := o.extract(ctx, staging); err != nil {
		return Restored{}, err
	}
	prepare := []string{"--prepare", "--target-dir=" + staging}
	if o.UseMemory != "" {
		prepare = append(prepare, "--use-memory="+o.UseMemory)
	}
	if err := o.run(ctx, o.Tool.Backup, prepare...); err != nil {
		return Restored{}, err
	}
	var r Restored
	var err error
	// The position is in the staging directory, which moving back empties: read it first.
	if r.BinlogFile, r.BinlogPos, r.GTIDPosition, err = readBinlogInfo(staging); err != nil {
		return Restored{}, err
	}
	if err := o.run(ctx, o.Tool.Backup, "--move-back", "--force-non-empty-directories",
		"--target-dir="+staging, "--datadir="+o.DataDir); err != nil {
		return Restored{}, err
	}
	if err := os.RemoveAll(staging); err != nil {
		return Restored{}, err
	}
	if err := os.WriteFile(filepath.Join(o.DataDir, restoredMark), []byte(o.BackupID+"\n"+r.GTIDPosition+"\n"+r.BinlogFile+"\n"), 0o640); err != nil {
		return Restored{}, err
	}
	return r, os.Remove(filepath.Join(o.DataDir, restoringMark))
}

// resumeOrClear looks at what the data directory holds: nothing (go on), this restore finished
// (done), this restore interrupted (wiped, go on), or anything else (refused).
func (o RestoreOptions) resumeOrClear() (Restored, bool, error) {
	entries, err := os.ReadDir(o.DataDir)
	if err != nil {
		return Restored{}, false, fmt.Errorf("the data directory: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(o.DataDir, restoredMark)); err == nil {
		lines := strings.Split(string(b), "\n")
		if lines[0] != o.BackupID {
			return Restored{}, false, fmt.Errorf("%s already holds backup %s, restored earlier: restore %s into an empty volume", o.DataDir, lines[0], o.BackupID)
		}
		r := Restored{Again: true}
		if len(lines) > 2 {
			r.GTIDPosition, r.BinlogFile = lines[1], lines[2]
		}
		return r, true, nil
	}
	mark, err := os.ReadFile(filepath.Join(o.DataDir, restoringMark))
	ours := err == nil && strings.TrimSpace(string(mark)) == o.BackupID
	var others []string
	for _, e := range entries {
		if e.Name() != "lost+found" {
			others = append(others, e.Name())
		}
	}
	if len(others) == 0 {
		return Restored{}, false, nil
	}
	if !ours {
		if len(others) > 3 {
			others = append(others[:3], "…")
		}
		return Restored{}, false, fmt.Errorf("%s is not empty (%s): a restore goes into a new, empty volume only", o.DataDir, strings.Join(others, ", "))
	}
	// An earlier run of this restore stopped part way: start over.
	for _, name := range others {
		if err := os.RemoveAll(filepath.Join(o.DataDir, name)); err != nil {
			return Restored{}, false, err
		}
	}
	return Restored{}, false, nil
}

// extract downloads the object, checking it, into the extractor.
func (o RestoreOptions) extract(ctx context.Context, dir string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Tool.Extract, "-x", "-C", dir)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	msgs := newMessages(o.Log)
	cmd.Stdout, cmd.Stderr = msgs, msgs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", o.Tool.Extract, err)
	}
	_, dlErr := stream.DownloadCounted(ctx, o.Store, o.Key, o.Object, countingWriter{in, o.Raw}, o.Read, o.Identities)
	if dlErr != nil {
		// What was extracted must not be used: stop the extractor, the caller's directory is
		// wiped by the next run (the restoring mark stays).
		cancel()
	}
	_ = in.Close()
	waitErr := cmd.Wait()
	switch {
	case dlErr != nil:
		return dlErr
	case waitErr != nil:
		return fmt.Errorf("%s failed (%v): %s", o.Tool.Extract, waitErr, msgs.tail())
	}
	return nil
}

// run runs one of the tool's steps, quoting its last messages when it fails.
func (o RestoreOptions) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	msgs := newMessages(o.Log)
	cmd.Stdout, cmd.Stderr = msgs, msgs
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("run %s: %w", name, err)
		}
		return fmt.Errorf("%s %s failed (%v): %s", name, args[0], err, msgs.tail())
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	c *stream.Counter
}

func (cw countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.c.Add(int64(n))
	return n, err
}
