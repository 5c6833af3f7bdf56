package image

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// testVersion is stamped into the binary, so the version printed inside the image proves which
// binary the image holds.
const testVersion = "v0.0.0-image-test"

// buildah runs buildah with the test's own storage (CONTAINERS_STORAGE_CONF) and returns stdout.
func buildah(t *testing.T, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "buildah", args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("buildah %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// storageEnv is the environment of buildah runs that keep their images and containers under
// dir: vfs needs no overlay mounts, so it works wherever buildah does (also inside containers).
func storageEnv(t *testing.T, dir string) []string {
	t.Helper()
	conf := filepath.Join(dir, "storage.conf")
	text := "[storage]\ndriver = \"vfs\"\n" +
		"graphroot = \"" + filepath.Join(dir, "graph") + "\"\n" +
		"runroot = \"" + filepath.Join(dir, "run") + "\"\n"
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "CONTAINERS_STORAGE_CONF="+conf, "BUILDAH_ISOLATION=chroot")
}

// deploymentImage is the image manifests/watch/deployment.yaml runs.
func deploymentImage(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "manifests", "watch", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(b, &d); err != nil {
		t.Fatal(err)
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", n)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// TestImage builds the image as `make image` does (hack/image.sh with the Makefile's default
// name) from a static binary, checks its configuration, and runs the image's entrypoint with
// `version` and `watch --help` in a container of it (buildah run, chroot isolation: no network,
// no OCI runtime needed).
func TestImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("building and running images with buildah needs root here")
	}
	if _, err := exec.LookPath("buildah"); err != nil {
		t.Fatal("buildah not found: apt-get install -y --no-install-recommends buildah")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	// The name: the Makefile's default IMAGE is the Deployment's image.
	want := deploymentImage(t, root)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE\s*\?=\s*(\S+)\s*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no default IMAGE")
	}
	if string(m[1]) != want {
		t.Errorf("make image builds %s, manifests/watch/deployment.yaml runs %s", m[1], want)
	}

	// The static binary, as `make build` makes it.
	dir := t.TempDir()
	bin := filepath.Join(dir, "mysqlctl")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+testVersion, "-o", bin, "./cmd/mysqlctl")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	env := storageEnv(t, dir)
	t.Cleanup(func() {
		// Containers first, then images: nothing of the test's storage stays mounted or in use.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, args := range [][]string{{"rm", "--all"}, {"rmi", "--all", "--force"}} {
			cmd := exec.CommandContext(ctx, "buildah", args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Logf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
	script := exec.CommandContext(ctx, filepath.Join(root, "hack", "image.sh"))
	script.Dir = root
	script.Env = append(env, "BIN="+bin, "VERSION="+testVersion)
	var out, errOut bytes.Buffer
	script.Stdout, script.Stderr = &out, &errOut
	began := time.Now()
	if err := script.Run(); err != nil {
		t.Fatalf("hack/image.sh: %v\n%s%s", err, out.String(), errOut.String())
	}
	t.Logf("hack/image.sh built the image in %s", time.Since(began).Round(time.Millisecond))
	id := strings.TrimSpace(out.String())

	// The Deployment's image name resolves to the image just built.
	var info struct {
		FromImageID string
		OCIv1       struct {
			Config struct {
				Entrypoint []string
				Cmd        []string
				User       string
				Labels     map[string]string
			} `json:"config"`
			RootFS struct {
				DiffIDs []string `json:"diff_ids"`
			} `json:"rootfs"`
		}
	}
	if err := json.Unmarshal([]byte(buildah(t, ctx, env, "inspect", "--type", "image", want)), &info); err != nil {
		t.Fatal(err)
	}
	if info.FromImageID != id {
		t.Errorf("%s is image %s, hack/image.sh built %s", want, info.FromImageID, id)
	}
	cfg := info.OCIv1.Config
	if strings.Join(cfg.Entrypoint, " ") != "/mysqlctl" || len(cfg.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q: want [/mysqlctl] and no cmd", cfg.Entrypoint, cfg.Cmd)
	}
	if cfg.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (the Deployment's runAsUser and runAsGroup)", cfg.User)
	}
	if v := cfg.Labels["org.opencontainers.image.version"]; v != testVersion {
		t.Errorf("version label %q, want %q", v, testVersion)
	}
	if n := len(info.OCIv1.RootFS.DiffIDs); n != 1 {
		t.Errorf("the image has %d layers, want 1 (an empty base and one layer of files)", n)
	}

	// The entrypoint runs inside a container of the image, as its user.
	ctr := strings.TrimSpace(buildah(t, ctx, env, "from", "--pull=never", "--quiet", want))
	// Nothing else is in it: the binary and its licence (listed before a run adds mount points).
	rootfs := strings.TrimSpace(buildah(t, ctx, env, "mount", ctr))
	entries, err := os.ReadDir(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "LICENSE mysqlctl" {
		t.Errorf("the image holds %q, want only LICENSE and mysqlctl", got)
	}
	buildah(t, ctx, env, "umount", ctr)
	run := func(args ...string) string {
		argv := append(append([]string{"run", "--isolation", "chroot", "--user", cfg.User, ctr, "--"}, cfg.Entrypoint...), args...)
		return buildah(t, ctx, env, argv...)
	}
	version := run("version")
	t.Logf("mysqlctl version in the image:\n%s", version)
	for _, re := range []string{`(?m)^version\t` + regexp.QuoteMeta(testVersion) + `$`, `(?m)^platform\tlinux/`} {
		if !regexp.MustCompile(re).MatchString(version) {
			t.Errorf("version output does not match %s:\n%s", re, version)
		}
	}
	help := run("watch", "--help")
	for _, want := range []string{"Usage:", "watch [NAME", "--leader-elect", "--leader-elect-namespace", "--metrics-addr", "--all-namespaces"} {
		if !strings.Contains(help, want) {
			t.Errorf("watch --help in the image lacks %q:\n%s", want, help)
		}
	}
}
