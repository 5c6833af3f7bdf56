package agent

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

//go:embed image
var imageFS embed.FS

// Image paths inside a container of the emulated mariadb image.
const (
	imageBinDir  = "/usr/local/bin" // docker-entrypoint.sh, healthcheck.sh
	imageEtcDir  = "/etc/mysql"     // my.cnf, mariadb.conf.d/, conf.d/, rig.conf.d/
	imageRunDir  = "/run/mysqld"    // the server's socket and pid file
	imageDataDir = "/var/lib/mysql" // VOLUME in the image: an anonymous volume unless mounted
	// defaultPath is the PATH of the official images.
	defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// image is the on-disk form of the emulated mariadb image for one rig.
type image struct {
	binDir   string // host directory mounted at /usr/local/bin
	etcDir   string // host directory copied into each pod and mounted at /etc/mysql
	template string // datadir template the entrypoint copies
	version  string // the host's mariadbd version, reported as the image ID
}

// emulated tells how the agent runs a container image.
type emulated int

const (
	// imageMariaDB is the official mariadb image (docker.io/library/mariadb and mirrors).
	imageMariaDB emulated = iota + 1
	// imageHostCommand is any other image whose container has a command: it runs with the host's
	// binaries (busybox, bash, debian and the like, used for shell-script init containers).
	imageHostCommand
	// imageMysqlctl is mysqlctl's own image (`make image`: the static binary at /mysqlctl, its
	// entrypoint, on an empty base): the binary the rig was given (Config.MysqlctlBinary) is
	// mounted at /mysqlctl.
	imageMysqlctl
)

// mysqlctlEntrypoint is the entrypoint of mysqlctl's image (Dockerfile, Dockerfile.local).
const mysqlctlEntrypoint = "/mysqlctl"

// classifyImage returns how a container can run, or an error naming why it cannot.
func classifyImage(imageRef string, command []string) (emulated, error) {
	repo := imageRef
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	name := path.Base(repo)
	switch {
	case name == "mariadb":
		return imageMariaDB, nil
	case name == "mysqlctl":
		return imageMysqlctl, nil
	case len(command) > 0:
		return imageHostCommand, nil
	case name == "mysql" || name == "mysql-server" || name == "percona-server":
		return 0, fmt.Errorf("image %s: the rig runs MariaDB only (Oracle MySQL is not installable here)", imageRef)
	default:
		return 0, fmt.Errorf("image %s has no command the rig can run: give the container a command (the rig runs it with the host's binaries)", imageRef)
	}
}

// reportedVersion is the version a server of image ref reports when its tag names another
// version than the host's mariadbd: the rig runs one MariaDB build for every tag, and makes the
// server report the tag's version (mariadbd --version=…) so that version rules can be tested.
// mariadb:11.4 reports 11.4.0-MariaDB-rig, mariadb:11.4.2 reports 11.4.2-MariaDB-rig; a tag of the
// host's series (mariadb:10.11 on a 10.11.19 host), or of its exact version, or without a version
// reports the host's own version ("").
func reportedVersion(ref, host string) string {
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	i := strings.LastIndex(repo, ":")
	if i <= strings.LastIndex(repo, "/") {
		return ""
	}
	m := regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`).FindStringSubmatch(repo[i+1:])
	h := regexp.MustCompile(`^(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(host)
	if m == nil || h == nil {
		return ""
	}
	if m[1] == h[1] && m[2] == h[2] && (m[3] == "" || m[3] == h[3]) {
		return ""
	}
	patch := m[3]
	if patch == "" {
		patch = "0"
	}
	return m[1] + "." + m[2] + "." + patch + "-MariaDB-rig"
}

// prepareImage writes the emulated image's files under dir and makes sure the datadir template exists
// (built once per mariadbd version under cacheDir and reused by later rigs).
func prepareImage(ctx context.Context, dir, cacheDir string) (*image, error) {
	for _, bin := range []string{"mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin", "mariadb-backup", "mbstream", "nsenter", "mount"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found (apt-get install mariadb-server mariadb-backup util-linux): %w", bin, err)
		}
	}
	out, err := exec.CommandContext(ctx, "mariadbd", "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("mariadbd --version: %w", err)
	}
	version := "unknown"
	if m := regexp.MustCompile(`Ver\s+(\S+)`).FindSubmatch(out); m != nil {
		version = string(m[1])
	}
	img := &image{
		binDir:  filepath.Join(dir, "image", "bin"),
		etcDir:  filepath.Join(dir, "image", "etc-mysql"),
		version: version,
	}
	img.template, err = ensureTemplate(ctx, cacheDir, version)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{img.binDir, filepath.Join(img.etcDir, "conf.d"), filepath.Join(img.etcDir, "rig.conf.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	err = fs.WalkDir(imageFS, "image", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := imageFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "image/")
		var target string
		mode := os.FileMode(0o644)
		if strings.HasSuffix(rel, ".sh") {
			target = filepath.Join(img.binDir, rel)
			mode = 0o755
			data = []byte(strings.ReplaceAll(string(data), "@RIG_TEMPLATE_DATADIR@", img.template))
		} else {
			target = filepath.Join(img.etcDir, rel)
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, mode)
	})
	if err != nil {
		return nil, err
	}
	return img, nil
}

// ensureTemplate returns a datadir that mariadb-install-db initialised, building it when missing.
// It is built into a temporary directory and renamed into place, so concurrent rigs never see a
// partial template.
func ensureTemplate(ctx context.Context, cacheDir, version string) (string, error) {
	safe := regexp.MustCompile(`[^A-Za-z0-9._-]`).ReplaceAllString(version, "_")
	final := filepath.Join(cacheDir, "mariadb-template-"+safe)
	if _, err := os.Stat(filepath.Join(final, "mysql")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cacheDir, ".template-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	data := filepath.Join(tmp, "data")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-log-bin",
		"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=16M")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	// The accounts mariadb-install-db made for this host's name are dropped by the entrypoint.
	host, _ := os.Hostname()
	if err := os.WriteFile(filepath.Join(data, ".rig-template-host"), []byte(host), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(data, final); err != nil {
		if _, statErr := os.Stat(filepath.Join(final, "mysql")); statErr == nil {
			return final, nil // another rig won the race
		}
		return "", err
	}
	return final, nil
}

// podEtc copies the image's /etc/mysql into a pod and writes the rig's one override: the server
// binds the pod's own address (the image binds every address, which here would be the host's).
func (img *image) podEtc(dst, podIP string) error {
	err := filepath.WalkDir(img.etcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(img.etcDir, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return err
	}
	conf := fmt.Sprintf("# Written by the mysqlctl rig's node agent: the one setting the rig changes.\n"+
		"[mariadbd]\nbind-address = %s\nuser = root\n", podIP)
	return os.WriteFile(filepath.Join(dst, "rig.conf.d", "99-rig-node.cnf"), []byte(conf), 0o644)
}

// serverArgv tells whether argv starts a MariaDB server (directly or through the entrypoint) and
// returns it with --bind-address appended, so that arguments cannot rebind the server elsewhere.
func serverArgv(argv []string, podIP string) []string {
	if len(argv) == 0 {
		return argv
	}
	i := 0
	if path.Base(argv[0]) == "docker-entrypoint.sh" {
		i = 1
		if len(argv) > 1 && strings.HasPrefix(argv[1], "-") {
			return append(append([]string(nil), argv...), "--bind-address="+podIP)
		}
	}
	if i < len(argv) {
		switch path.Base(argv[i]) {
		case "mariadbd", "mysqld":
			return append(append([]string(nil), argv...), "--bind-address="+podIP)
		}
	}
	return argv
}

// mysqlctlArgv is the command line of a container of mysqlctl's image, whose binary is mounted
// at the image's path /mysqlctl. A listener the arguments put on every address
// (--metrics-addr=:9090, as a pod's process may) is bound to the pod's address instead: pods here
// share the host's network, and nothing of the rig listens outside 127.0.0.0/8. That is the one
// argument the rig changes, as it does for mariadbd.
func mysqlctlArgv(argv []string, podIP string) []string {
	out := make([]string, 0, len(argv))
	for i, a := range argv {
		if v, ok := strings.CutPrefix(a, "--metrics-addr="); ok {
			a = "--metrics-addr=" + podAddress(v, podIP)
		} else if i > 0 && argv[i-1] == "--metrics-addr" {
			a = podAddress(a, podIP)
		}
		out = append(out, a)
	}
	return out
}

// podAddress turns ":PORT", "0.0.0.0:PORT" and "[::]:PORT" into podIP:PORT.
func podAddress(addr, podIP string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return net.JoinHostPort(podIP, port)
	}
	return addr
}
