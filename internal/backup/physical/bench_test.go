package physical_test

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/physical"
	"github.com/mysqlctl/mysqlctl/internal/backup/seal"
	"github.com/mysqlctl/mysqlctl/internal/backup/stream"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/topology/mariadbtest"
)

// benchRounds is how many rounds a benchmark here measures (MYSQLCTL_BENCH_ROUNDS, default 10).
func benchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("MYSQLCTL_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 10
}

// benchSizesMB are the data sizes the throughput benchmark runs at (MYSQLCTL_BENCH_BACKUP_MB, a
// comma-separated list; default 256: set "1024,5120" for the 1 GB and 5 GB figures).
func benchSizesMB() []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("MYSQLCTL_BENCH_BACKUP_MB"), ",") {
		if n, err := strconv.Atoi(f); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		out = []int{256}
	}
	return out
}

// benchArgs give a bench server room for its data: the template's 16 MB buffer pool and 4 MB
// redo log would make the fill, not the backup, what is measured.
var benchArgs = []string{"--innodb-buffer-pool-size=256M", "--innodb-log-file-size=256M"}

// fill adds about mb MB of rows (hex text: compressible about as much as typical row data) to
// app.big on s, in transactions of 100,000 rows.
func fill(b *testing.B, s *mariadbtest.Server, mb int) {
	b.Helper()
	s.Exec(b, "CREATE TABLE app.big (id INT PRIMARY KEY, v VARCHAR(300)) ENGINE=InnoDB")
	rows := mb << 20 / 360 // ~256 bytes of value, ~100 of row and index overhead
	for at := 0; at < rows; at += 100000 {
		s.Exec(b, fmt.Sprintf("INSERT INTO app.big SELECT seq, CONCAT(SHA2(seq, 512), SHA2(seq + %d, 512)) FROM app.seq_%d_to_%d", rows, at+1, min(at+100000, rows)))
	}
}

// tarDir streams a tar of dir: the raw copy a backup is compared with. A file that grows while
// it is read is cut at the size its header says; one that shrinks is padded.
func tarDir(dir string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o640, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			n, err := io.Copy(tw, io.LimitReader(f, info.Size()))
			if err != nil {
				return err
			}
			_, err = io.CopyN(tw, zeros{}, info.Size()-n)
			return err
		})
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// untar writes the files of a tar stream under dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / (1 << 20) / d.Seconds() }

// BenchmarkBackupThroughput measures, at each size of MYSQLCTL_BENCH_BACKUP_MB over
// MYSQLCTL_BENCH_ROUNDS rounds on the same data and bucket: a physical backup (mariadb-backup
// streamed, zstd, multipart) against the raw baseline of a tar of the same data directory through
// the same compressor and upload; a restore (download, extract, prepare, move into place)
// against the raw download and unpack. It reports p50/p95 of each, the throughput ratios of their
// p50s (goals: backup >= 0.8, restore >= 0.5) and the bytes stored.
func BenchmarkBackupThroughput(b *testing.B) {
	tools(b)
	for _, mb := range benchSizesMB() {
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			src := mariadbtest.Start(b, mariadbtest.Options{Args: benchArgs})
			src.Exec(b,
				"CREATE USER '"+backupUser+"'@'%' IDENTIFIED BY '"+backupPassword+"'",
				"GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO '"+backupUser+"'@'%'")
			fill(b, src, mb)
			_, st := store(b)
			ctx := context.Background()
			to, ids := benchEncryption(b)
			for i := 0; i < b.N; i++ {
				var bk, rawBk, rs, rawRs []time.Duration
				var dataBytes, stored, rawStored int64
				for r := range benchRounds() {
					key := fmt.Sprintf("n%d/r%d/", i, r)
					o := takeOptions(src, st, b)
					o.Key = key + physical.ObjectName
					o.Recipients = to
					began := time.Now()
					taken, err := physical.Take(ctx, o)
					if err != nil {
						b.Fatalf("backup: %v", err)
					}
					bk = append(bk, time.Since(began))
					dataBytes, stored = taken.RawBytes, taken.Object.Size
					_ = os.RemoveAll(o.WorkDir)

					began = time.Now()
					rawObj, _, err := stream.Upload(ctx, st, key+"raw.tar.zst", "raw.tar.zst", tarDir(src.DataDir), nil, nil)
					if err != nil {
						b.Fatalf("raw upload: %v", err)
					}
					rawBk = append(rawBk, time.Since(began))
					rawStored = rawObj.Size

					dir := b.TempDir()
					began = time.Now()
					if _, err := physical.Restore(ctx, physical.RestoreOptions{Tool: physical.MariaDB, Store: st, Key: o.Key, Object: taken.Object,
						BackupID: key, DataDir: dir, UseMemory: "256M", Identities: ids}); err != nil {
						b.Fatalf("restore: %v", err)
					}
					rs = append(rs, time.Since(began))
					_ = os.RemoveAll(dir)

					dir = b.TempDir()
					began = time.Now()
					if err := rawRestore(ctx, st, key+"raw.tar.zst", rawObj, dir); err != nil {
						b.Fatalf("raw restore: %v", err)
					}
					rawRs = append(rawRs, time.Since(began))
					_ = os.RemoveAll(dir)
					deleteUnder(ctx, b, st, key)
				}
				report := func(name string, ds []time.Duration) {
					b.ReportMetric(float64(pct(ds, 0.5).Milliseconds()), name+"-p50-ms")
					b.ReportMetric(float64(pct(ds, 0.95).Milliseconds()), name+"-p95-ms")
				}
				report("backup", bk)
				report("raw-backup", rawBk)
				report("restore", rs)
				report("raw-restore", rawRs)
				b.ReportMetric(pct(rawBk, 0.5).Seconds()/pct(bk, 0.5).Seconds(), "backup-ratio")
				b.ReportMetric(pct(rawRs, 0.5).Seconds()/pct(rs, 0.5).Seconds(), "restore-ratio")
				b.ReportMetric(float64(stored), "stored-bytes")
				b.Logf("%d MB of rows, a %d-byte stream stored as %d (raw tar stored as %d); over %d rounds: backup p50 %s (%.0f MB/s) p95 %s, raw %s p95 %s; restore p50 %s p95 %s, raw %s p95 %s",
					mb, dataBytes, stored, rawStored, len(bk), pct(bk, 0.5).Round(time.Millisecond), mbps(dataBytes, pct(bk, 0.5)), pct(bk, 0.95).Round(time.Millisecond),
					pct(rawBk, 0.5).Round(time.Millisecond), pct(rawBk, 0.95).Round(time.Millisecond),
					pct(rs, 0.5).Round(time.Millisecond), pct(rs, 0.95).Round(time.Millisecond), pct(rawRs, 0.5).Round(time.Millisecond), pct(rawRs, 0.95).Round(time.Millisecond))
			}
		})
	}
}

// benchEncryption is, with MYSQLCTL_BENCH_ENCRYPT=1, a new age key to encrypt the backups to and
// its identity to restore them with (what encryption costs, against a run without it).
func benchEncryption(b *testing.B) ([]age.Recipient, seal.Identities) {
	if os.Getenv("MYSQLCTL_BENCH_ENCRYPT") != "1" {
		return nil, seal.Identities{}
	}
	k, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	ids, err := seal.ParseIdentities(k.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Log("backups encrypted to " + k.Recipient().String())
	return []age.Recipient{k.Recipient()}, ids
}

// rawRestore is the restore baseline: the raw tar downloaded, decompressed and unpacked.
func rawRestore(ctx context.Context, st *objectstore.Store, key string, obj backup.Object, dir string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- untar(pr, dir) }()
	_, err := stream.Download(ctx, st, key, obj, pw)
	pw.CloseWithError(err)
	if uerr := <-done; err == nil {
		err = uerr
	}
	return err
}

// BenchmarkBackupWriteLatency measures what a backup taken from a replica costs the primary's
// writers: single-row commits on a semi-sync primary (each waits for the replica's
// acknowledgement), timed while the replica is backed up and, in the same round, for as long
// without a backup. It reports the p50 and p99 commit latency of both, pooled over the rounds,
// and the ratio of the p99s (goal <= 1.1).
func BenchmarkBackupWriteLatency(b *testing.B) {
	tools(b)
	mb := benchSizesMB()[0]
	p := mariadbtest.Start(b, mariadbtest.Options{Name: "bench-p", Args: benchArgs})
	r := mariadbtest.Start(b, mariadbtest.Options{Name: "bench-r", Args: append([]string{"--rpl-semi-sync-slave-enabled=ON", "--read-only=ON"}, benchArgs...)})
	p.Exec(b,
		"CREATE USER '"+backupUser+"'@'%' IDENTIFIED BY '"+backupPassword+"'",
		"GRANT RELOAD, PROCESS, BINLOG MONITOR, SLAVE MONITOR ON *.* TO '"+backupUser+"'@'%'")
	fill(b, p, mb)
	r.ReplicateFrom(b, p)
	// Semi-sync once the replica has everything: each commit then waits for its acknowledgement.
	p.Exec(b, "SET GLOBAL rpl_semi_sync_master_timeout = 600000", "SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'",
		"SET GLOBAL rpl_semi_sync_master_enabled = ON")
	r.Exec(b, "STOP SLAVE IO_THREAD", "START SLAVE IO_THREAD")
	for deadline := time.Now().Add(30 * time.Second); p.QueryString(b, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS'") != "1"; {
		if time.Now().After(deadline) {
			b.Fatal("the replica did not connect as a semi-sync replica")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, st := store(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		var during, without []time.Duration
		for round := range benchRounds() {
			o := takeOptions(r, st, b)
			o.Key = fmt.Sprintf("w%d/r%d/%s", i, round, physical.ObjectName)
			var took time.Duration
			during = append(during, timedWrites(b, p, func() {
				began := time.Now()
				if _, err := physical.Take(ctx, o); err != nil {
					b.Fatalf("backup of the replica: %v", err)
				}
				took = time.Since(began)
			})...)
			without = append(without, timedWrites(b, p, func() { time.Sleep(took) })...)
			_ = os.RemoveAll(o.WorkDir)
			deleteUnder(ctx, b, st, fmt.Sprintf("w%d/r%d/", i, round))
		}
		b.ReportMetric(float64(pct(without, 0.5).Microseconds()), "p50-us")
		b.ReportMetric(float64(pct(without, 0.99).Microseconds()), "p99-us")
		b.ReportMetric(float64(pct(during, 0.5).Microseconds()), "p50-during-backup-us")
		b.ReportMetric(float64(pct(during, 0.99).Microseconds()), "p99-during-backup-us")
		b.ReportMetric(pct(during, 0.99).Seconds()/pct(without, 0.99).Seconds(), "p99-ratio")
		b.Logf("%d MB replica backed up %d times: %d commits during the backups p50 %s p99 %s; %d commits without p50 %s p99 %s",
			mb, benchRounds(), len(during), pct(during, 0.5), pct(during, 0.99), len(without), pct(without, 0.5), pct(without, 0.99))
	}
}

// timedWrites commits single rows on s, one at a time, while work runs, and returns each
// commit's latency.
func timedWrites(b *testing.B, s *mariadbtest.Server, work func()) []time.Duration {
	db := s.DB(b)
	stop := make(chan struct{})
	var lat []time.Duration
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			began := time.Now()
			if _, err := db.Exec("INSERT INTO app.t (v) VALUES ('bench')"); err != nil {
				b.Errorf("write: %v", err)
				return
			}
			lat = append(lat, time.Since(began))
		}
	}()
	work()
	close(stop)
	wg.Wait()
	if len(lat) == 0 {
		b.Fatal("no write was timed")
	}
	return lat
}

// deleteUnder removes a round's objects, so that the bucket's directory does not grow over the
// rounds.
func deleteUnder(ctx context.Context, b *testing.B, st *objectstore.Store, prefix string) {
	objs, err := st.List(ctx, prefix)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		if err := st.Delete(ctx, o.Key); err != nil {
			b.Fatal(err)
		}
	}
}
