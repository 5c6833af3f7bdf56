// Package krewinstall tests the release that hack/dist.sh (make dist) builds the way its users
// get it: with krew's own validator and installer, built from the Go module proxy by
// hack/krewcheck/build.sh, offline, into temporary KREW_ROOTs.
package krewinstall

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const repoRoot = "../.."

var allPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// TestDistAllPlatforms runs hack/dist.sh for all four platforms with a stand-in for go that
// writes a one-line script naming its GOOS/GOARCH as each binary (the real cross-builds take
// minutes; TestInstall builds the native one), with DIST_URL_BASE a loopback server over the
// dist directory. dist.sh ends with hack/krewcheck/check.sh. Then krew installs each platform as
// a user's krew does, from the manifest's uri; a second run must give the same archives; and the
// check must fail on broken copies of the release.
func TestDistAllPlatforms(t *testing.T) {
	krew := krewTools(t)
	dist := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	t.Cleanup(srv.Close)
	fakeGo := filepath.Join(t.TempDir(), "go")
	script := `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
printf '#!/bin/sh\necho "kubectl-mysql for %s/%s"\n' "$GOOS" "$GOARCH" >"$out"
`
	if err := os.WriteFile(fakeGo, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	const ver = "v1.2.3-rc.1" // a semantic version: krew's version is the same
	env := []string{"GO=" + fakeGo, "VERSION=" + ver, "DIST_PLATFORMS=", "DIST_HOMEPAGE=", "DIST_URL_BASE=" + srv.URL}
	out := runDist(t, dist, env...)
	if !strings.Contains(out, "krewcheck: "+filepath.Join(dist, "mysql.yaml")+": ok") {
		t.Errorf("hack/dist.sh did not report the check's verdict:\n%s", out)
	}
	want := []string{"checksums.txt", "mysql.yaml"}
	for _, p := range allPlatforms {
		want = append(want, archiveName(ver, p))
	}
	slices.Sort(want)
	if names := dirNames(t, dist); !slices.Equal(names, want) {
		t.Errorf("dist directory holds %v, want %v", names, want)
	}

	manifest := filepath.Join(dist, "mysql.yaml")
	license := readFile(t, filepath.Join(repoRoot, "LICENSE"))
	for _, p := range allPlatforms {
		root := t.TempDir()
		out, err := krewCmd(t, krew, root, p, "install", "--manifest="+manifest).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: kubectl-krew install from %s: %v\n%s", p, srv.URL, err, out)
		}
		store := filepath.Join(root, "store", "mysql", ver)
		if names := dirNames(t, store); !slices.Equal(names, []string{"LICENSE", "README.md", "docs", "kubectl-mysql"}) {
			t.Errorf("%s: krew installed %v", p, names)
		}
		// The manual the README links to (docs/…) is installed beside it, whole.
		for _, doc := range []string{"README.md", "getting-started.md", "reference/exit-codes.md"} {
			if !bytes.Equal(readFile(t, filepath.Join(store, "docs", doc)), readFile(t, filepath.Join(repoRoot, "docs", doc))) {
				t.Errorf("%s: the installed docs/%s is not the repository's", p, doc)
			}
		}
		if !bytes.Equal(readFile(t, filepath.Join(store, "LICENSE")), license) {
			t.Errorf("%s: the installed LICENSE is not the repository's", p)
		}
		// Through the link krew made: the archive of this platform, fetched from its uri.
		got, err := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl-mysql")).Output()
		if err != nil || string(got) != "kubectl-mysql for "+p+"\n" {
			t.Errorf("%s: installed kubectl-mysql printed %q (%v)", p, got, err)
		}
		if p == allPlatforms[0] {
			// krew keeps the manifest as it read it in the receipt: nothing may be lost on the way.
			checkReceipt(t, manifest, filepath.Join(root, "receipts", "mysql.yaml"))
		}
	}

	// Reproducible: the same binaries give the same archives.
	again := t.TempDir()
	runDist(t, again, env...)
	if a, b := readFile(t, filepath.Join(dist, "checksums.txt")), readFile(t, filepath.Join(again, "checksums.txt")); !bytes.Equal(a, b) {
		t.Errorf("a second run gave other archives:\n%s\nthen:\n%s", a, b)
	}

	rendered := string(readFile(t, manifest))
	sum := regexp.MustCompile(`sha256: "([0-9a-f]{64})"`).FindStringSubmatch(rendered)
	if sum == nil {
		t.Fatalf("no sha256 in the rendered manifest:\n%s", rendered)
	}
	for name, tc := range map[string]struct {
		file, old, new, want string
	}{
		"manifest sha256":         {"mysql.yaml", sum[1], flipHex(sum[1]), "checksum does not match, want: " + flipHex(sum[1])},
		"checksums.txt":           {"checksums.txt", sum[1], flipHex(sum[1]), "checksums.txt does not match the archives"},
		"files entry not present": {"mysql.yaml", "from: README.md", "from: CHANGES.md", "no files in the plugin archive matched the glob pattern=CHANGES.md"},
		"no LICENSE installed":    {"mysql.yaml", "    - from: LICENSE\n      to: .\n", "", "installed no LICENSE"},
		"version without v":       {"mysql.yaml", `version: "` + ver + `"`, `version: "1.2.3"`, `version string "1.2.3" not starting with 'v'`},
		"overlapping selectors":   {"mysql.yaml", "os: darwin\n        arch: arm64", "os: linux\n        arch: arm64", "overlapping selectors"},
		"unknown selector key":    {"mysql.yaml", "        arch: amd64\n", "        arch: amd64\n        distro: debian\n", `key "distro" not supported`},
	} {
		broken := t.TempDir()
		for _, n := range want {
			data := readFile(t, filepath.Join(dist, n))
			if n == tc.file {
				if !bytes.Contains(data, []byte(tc.old)) {
					t.Fatalf("%s: %s lacks %q", name, n, tc.old)
				}
				data = bytes.ReplaceAll(data, []byte(tc.old), []byte(tc.new))
			}
			if err := os.WriteFile(filepath.Join(broken, n), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "hack", "krewcheck", "check.sh"), broken)
		out, err := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: check.sh exit %d (%v), output:\n%s\nwant exit 1 and %q", name, code, err, out, tc.want)
		}
	}
}

// TestInstall builds the release archive for this machine's platform with hack/dist.sh, installs
// it with `kubectl-krew install --manifest --archive` into a temporary KREW_ROOT, and runs the
// installed plugin: directly, and as `kubectl mysql` when a kubectl is at hand.
func TestInstall(t *testing.T) {
	native := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(allPlatforms, native) {
		t.Skipf("%s is not a release platform", native)
	}
	if testing.Short() {
		t.Skip("builds mysqlctl")
	}
	krew := krewTools(t)
	dist := t.TempDir()
	const ver = "1.0+test" // not a semantic version: exercises dist.sh's krew version rule
	runDist(t, dist, "DIST_PLATFORMS="+native, "VERSION="+ver, "COMMIT=test", "DATE=2000-01-01T00:00:00Z",
		"GO=", "DIST_LDFLAGS=", "DIST_HOMEPAGE=", "DIST_URL_BASE=")
	manifest := filepath.Join(dist, "mysql.yaml")
	archive := archiveName(ver, native)
	rendered := string(readFile(t, manifest))
	for _, want := range []string{`version: "v0.0.0-dev-1-0-test"`, `uri: "https://github.com/mysqlctl/mysqlctl/releases/download/1.0+test/` + archive + `"`} {
		if !strings.Contains(rendered, want) {
			t.Errorf("rendered manifest lacks %s:\n%s", want, rendered)
		}
	}

	root := t.TempDir()
	out, err := krewCmd(t, krew, root, "", "install", "--manifest="+manifest, "--archive="+filepath.Join(dist, archive)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Installed plugin: mysql") {
		t.Fatalf("kubectl-krew install: %v\n%s", err, out)
	}
	version, err := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "kubectl-mysql"), "version").Output()
	if err != nil {
		t.Fatalf("kubectl-mysql version: %v", err)
	}
	for _, line := range []string{"version\t" + ver + "\n", "commit\ttest\n", "built\t2000-01-01T00:00:00Z\n", "platform\t" + native + "\n"} {
		if !strings.Contains(string(version), line) {
			t.Errorf("kubectl-mysql version printed:\n%s\nwant a line %q", version, line)
		}
	}

	kubectl := findKubectl()
	if kubectl == "" {
		t.Log("no kubectl on PATH or in the control-plane cache: `kubectl mysql` not tried")
		return
	}
	// kubectl finds the plugin through the link krew made in $KREW_ROOT/bin.
	viaKubectl := exec.CommandContext(t.Context(), kubectl, "mysql", "version")
	viaKubectl.Env = append(os.Environ(), "PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := viaKubectl.Output()
	if err != nil || !bytes.Equal(got, version) {
		t.Errorf("%s mysql version: %v, printed:\n%s\nwant what kubectl-mysql version printed:\n%s", kubectl, err, got, version)
	}
}

// krewTools builds (once, cached) krew's tools with hack/krewcheck/build.sh and returns their
// directory.
func krewTools(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(repoRoot, "hack", "krewcheck", "build.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/krewcheck/build.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// krewCmd runs kubectl-krew on a KREW_ROOT of its own, as platform ("os/arch", or "" for this
// machine's), with nothing fetched but what the manifest's uri names.
func krewCmd(t *testing.T, krew, root, platform string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), filepath.Join(krew, "kubectl-krew"), args...)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_NO_UPGRADE_CHECK=1",
		"PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if platform != "" {
		goos, goarch, _ := strings.Cut(platform, "/")
		cmd.Env = append(cmd.Env, "KREW_OS="+goos, "KREW_ARCH="+goarch)
	}
	return cmd
}

// runDist runs hack/dist.sh into dir with the environment given on top of this one's.
func runDist(t *testing.T, dir string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", "hack/dist.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(append(os.Environ(), "DIST_DIR="+dir), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/dist.sh: %v\n%s", err, out)
	}
	return string(out)
}

// checkReceipt compares the receipt krew stored with the manifest it installed from: a field
// krew does not know (a misspelt one) would be missing from the receipt.
func checkReceipt(t *testing.T, manifest, receipt string) {
	t.Helper()
	var m, r map[string]any
	if err := yaml.Unmarshal(readFile(t, manifest), &m); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(readFile(t, receipt), &r); err != nil {
		t.Fatal(err)
	}
	delete(r, "status")
	if md, ok := r["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	if !reflect.DeepEqual(m, r) {
		t.Errorf("krew's receipt differs from the manifest it installed (a field krew does not know?)\nmanifest: %v\nreceipt:  %v", m, r)
	}
}

// findKubectl looks for the kubectl that hack/build-controlplane.sh builds (in
// MYSQLCTL_CONTROLPLANE_BIN, which make test sets, or in its cache), then on PATH.
func findKubectl() string {
	dirs := []string{os.Getenv("MYSQLCTL_CONTROLPLANE_BIN")}
	if cache, err := os.UserCacheDir(); err == nil {
		found, _ := filepath.Glob(filepath.Join(cache, "mysqlctl", "controlplane", "*"))
		dirs = append(dirs, found...)
	}
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, "kubectl")); d != "" && err == nil && st.Mode()&0o111 != 0 {
			return filepath.Join(d, "kubectl")
		}
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	return ""
}

func archiveName(ver, platform string) string {
	return "mysqlctl_" + ver + "_" + strings.Replace(platform, "/", "_", 1) + ".tar.gz"
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// flipHex changes the first hex digit of s to another one.
func flipHex(s string) string {
	c := byte('0')
	if s[0] == '0' {
		c = '1'
	}
	return string(c) + s[1:]
}
