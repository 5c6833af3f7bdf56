package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

const (
	repoRoot     = "../.."
	templateFile = repoRoot + "/plugins/mysql.yaml"
)

// TestTemplate checks the committed krew manifest template statically: all four platforms,
// bin kubectl-mysql, and the placeholders hack/dist.sh fills.
func TestTemplate(t *testing.T) {
	data, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	// Independently of checkTemplate: the four platforms, each with bin kubectl-mysql.
	var p plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, pl := range p.Spec.Platforms {
		key := pl.Selector.MatchLabels["os"] + "/" + pl.Selector.MatchLabels["arch"]
		listed = append(listed, key)
		if pl.Bin != "kubectl-mysql" {
			t.Errorf("%s: bin %q, want kubectl-mysql", key, pl.Bin)
		}
	}
	slices.Sort(listed)
	if want := []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}; !slices.Equal(listed, want) {
		t.Errorf("template platforms %v, want %v", listed, want)
	}

	probs, err := checkTemplate(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Error(p)
	}

	// The check fails where it should.
	text := string(data)
	last := strings.LastIndex(text, "\n  - selector:")
	for name, tc := range map[string]struct{ text, want string }{
		"wrong bin":        {strings.Replace(text, "bin: kubectl-mysql", "bin: mysqlctl", 1), `platform linux/amd64: bin is "mysqlctl"`},
		"missing platform": {text[:last+1], "platform darwin/arm64 is missing"},
		"no arch label":    {strings.Replace(text, "        arch: arm64\n", "", 1), "platform 1: selector.matchLabels needs os and arch"},
		"sha256 not a placeholder": {
			strings.Replace(text, `"@SHA256_darwin_amd64@"`, `"`+strings.Repeat("a", 64)+`"`, 1),
			`platform darwin/amd64: sha256 is "aaaa`,
		},
		"unknown field": {strings.Replace(text, "    bin: kubectl-mysql", "    binary: kubectl-mysql", 1), `json: unknown field "binary"`},
	} {
		file := filepath.Join(t.TempDir(), "mysql.yaml")
		if err := os.WriteFile(file, []byte(tc.text), 0o644); err != nil {
			t.Fatal(err)
		}
		probs, err := checkTemplate(file)
		if err != nil {
			probs = append(probs, err.Error())
		}
		if !containsProblem(probs, tc.want) {
			t.Errorf("%s: problems %q, want one containing %q", name, probs, tc.want)
		}
	}
}

func TestKrewVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":              "v1.2.3",
		"v1.2.3-4-gabc-dirty": "v1.2.3-4-gabc-dirty",
		"v1.2.3+meta":         "v1.2.3+meta",
		"v1.0.0-01":           "v0.0.0-dev-v1-0-0-01",
		"v1.0.0-rc.1":         "v1.0.0-rc.1",
		"1777c92":             "v0.0.0-dev-1777c92",
		"1777c92-dirty":       "v0.0.0-dev-1777c92-dirty",
		"0123456":             "v0.0.0-dev-0123456",
		"dev":                 "v0.0.0-dev-dev",
		"v1.2":                "v0.0.0-dev-v1-2",
		"v01.2.3":             "v0.0.0-dev-v01-2-3",
		"1.0+test":            "v0.0.0-dev-1-0-test",
	} {
		got := krewVersion(in)
		if got != want {
			t.Errorf("krewVersion(%q) = %q, want %q", in, got, want)
		}
		if _, err := version.ParseSemantic(got); err != nil {
			t.Errorf("krewVersion(%q) = %q: %v", in, got, err)
		}
	}
}

// TestDist runs hack/dist.sh for the native platform into a temporary directory (it ends with
// the krewcheck command), checks the result here too, then corrupts copies and expects the
// check to say so.
func TestDist(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mysqlctl")
	}
	native := runtime.GOOS + "/" + runtime.GOARCH
	if !slices.Contains(allPlatforms, native) {
		t.Skipf("%s is not a release platform", native)
	}
	const ver = "1.0+test" // not a semantic version: exercises dist.sh's krew version rule
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "bash", "hack/dist.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "DIST_DIR="+dir, "DIST_PLATFORMS="+native, "VERSION="+ver,
		"COMMIT=test", "DATE=2000-01-01T00:00:00Z", "DIST_LDFLAGS=", "DIST_HOMEPAGE=", "DIST_URL_BASE=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/dist.sh: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "krewcheck: "+filepath.Join(dir, "mysql.yaml")+": ok") {
		t.Errorf("hack/dist.sh did not report krewcheck's verdict:\n%s", out)
	}
	goos, goarch, _ := strings.Cut(native, "/")
	archive := archiveName(ver, goos, goarch)
	if entries, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	} else {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if want := []string{"checksums.txt", "mysql.yaml", archive}; !slices.Equal(names, want) {
			t.Errorf("dist directory holds %v, want %v", names, want)
		}
	}

	// In process, with all four platforms expected and one built: the only problems are the
	// three missing platforms. (This checks the archive in full; under -race that is slow, so the
	// corrupted copies below go through the krewcheck command instead.)
	manifest := filepath.Join(dir, "mysql.yaml")
	probs, err := checkDist(manifest, dir, ver, allPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, p := range allPlatforms {
		if p != native {
			missing = append(missing, "platform "+p+" is missing")
		}
	}
	slices.Sort(probs)
	slices.Sort(missing)
	if !slices.Equal(probs, missing) {
		t.Errorf("all platforms expected: problems %q, want exactly %q", probs, missing)
	}
	rendered, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`version: "v0.0.0-dev-1-0-test"`, `uri: "https://github.com/mysqlctl/mysqlctl/releases/download/1.0+test/` + archive + `"`} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("rendered manifest lacks %s:\n%s", want, rendered)
		}
	}

	// Another version than the archives' (in process: the archive is not found, so not read).
	probs, err = checkDist(manifest, dir, "v9.9.9", []string{native})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`spec.version is "v0.0.0-dev-1-0-test", want "v9.9.9"`, "does not end with /" + archiveName("v9.9.9", goos, goarch)} {
		if !containsProblem(probs, want) {
			t.Errorf("other version: problems %q, want one containing %q", probs, want)
		}
	}

	bin := filepath.Join(t.TempDir(), "krewcheck")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./hack/krewcheck")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./hack/krewcheck: %v\n%s", err, out)
	}
	// krewcheck must exit 1 and print exactly the one problem wanted.
	expectOne := func(what, manifest, want string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, "-manifest", manifest, "-dist", dir, "-version", ver, "-platforms", native)
		out, _ := cmd.CombinedOutput()
		line := "krewcheck: " + manifest + ": " + want + "\n"
		if code := cmd.ProcessState.ExitCode(); code != 1 || string(out) != line {
			t.Errorf("%s: krewcheck exit %d, output:\n%s\nwant exit 1 and only:\n%s", what, code, out, line)
		}
	}

	// A corrupted sha256 in a copy of the manifest.
	m := regexp.MustCompile(`sha256: "([0-9a-f]{64})"`).FindSubmatch(rendered)
	if m == nil {
		t.Fatalf("no sha256 in the rendered manifest:\n%s", rendered)
	}
	good := string(m[1])
	bad := flipHex(good)
	badManifest := filepath.Join(t.TempDir(), "mysql.yaml")
	if err := os.WriteFile(badManifest, bytes.Replace(rendered, m[1], []byte(bad), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	expectOne("corrupted sha256 in the manifest", badManifest,
		"platform "+native+": sha256 is "+bad+", but "+archive+" has sha256 "+good)

	// A checksums.txt that disagrees with the archive (the manifest is right).
	sums, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checksums.txt"), bytes.Replace(sums, []byte(good), []byte(bad), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	expectOne("corrupted checksums.txt", manifest,
		"platform "+native+": checksums.txt has "+bad+" for "+archive+", the archive has "+good)
}

func containsProblem(probs []string, want string) bool {
	return slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, want) })
}

// flipHex changes the first hex digit of s to another one.
func flipHex(s string) string {
	c := byte('0')
	if s[0] == '0' {
		c = '1'
	}
	return string(c) + s[1:]
}
