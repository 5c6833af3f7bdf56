// Command krewcheck checks the krew plugin manifest against the release archives that
// hack/dist.sh (make dist) built: the platforms, their selectors, bin and files, every sha256
// against the archive and checksums.txt, every uri and the version. With -template it checks the
// committed template plugins/mysql.yaml instead. It prints every problem and exits 1 if any.
//
//	go run ./hack/krewcheck -dist dist -version "$(git describe --tags --always --dirty)"
//	go run ./hack/krewcheck -template plugins/mysql.yaml
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

const (
	apiVersion = "krew.googlecontainertools.github.com/v1alpha2"
	pluginName = "mysql"
	binName    = "kubectl-mysql"
)

// allPlatforms are the platforms the template lists and make dist builds.
var allPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// plugin is the part of krew's Plugin type this project uses; unknown fields are errors.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector *struct {
		MatchLabels      map[string]string `json:"matchLabels"`
		MatchExpressions []any             `json:"matchExpressions"`
	} `json:"selector"`
	URI    string `json:"uri"`
	Sha256 string `json:"sha256"`
	Bin    string `json:"bin"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
}

// problems collects what is wrong; a check reports every problem it finds, not only the first.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

func main() {
	distDir := flag.String("dist", "dist", "directory with the archives and checksums.txt")
	manifest := flag.String("manifest", "", "rendered manifest (default: <dist>/mysql.yaml)")
	ver := flag.String("version", "", "the archives' version (make's VERSION); required with -dist")
	plats := flag.String("platforms", strings.Join(allPlatforms, " "), "space-separated os/arch the manifest must list exactly")
	template := flag.String("template", "", "check this manifest template instead of a dist directory")
	flag.Parse()

	var name string
	var probs problems
	var err error
	if *template != "" {
		name = *template
		probs, err = checkTemplate(*template)
	} else {
		if *ver == "" {
			fmt.Fprintln(os.Stderr, "krewcheck: -version is required")
			os.Exit(2)
		}
		if *manifest == "" {
			*manifest = filepath.Join(*distDir, "mysql.yaml")
		}
		name = *manifest
		probs, err = checkDist(*manifest, *distDir, *ver, strings.Fields(*plats))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "krewcheck: %s: %v\n", name, err)
		os.Exit(1)
	}
	if len(probs) > 0 {
		for _, p := range probs {
			fmt.Fprintf(os.Stderr, "krewcheck: %s: %s\n", name, p)
		}
		os.Exit(1)
	}
	if *template != "" {
		fmt.Printf("krewcheck: %s: ok (%s)\n", name, strings.Join(allPlatforms, " "))
	} else {
		fmt.Printf("krewcheck: %s: ok, matches the archives and checksums.txt in %s (%s)\n", name, *distDir, strings.Join(strings.Fields(*plats), " "))
	}
}

// krewVersion is the manifest's spec.version for an archive version; hack/dist.sh applies the
// same rule: a semantic version with a leading v stays, anything else becomes v0.0.0-dev-<version>
// with every character other than letters, digits and '-' replaced by '-'.
func krewVersion(v string) string {
	if semverRE.MatchString(v) {
		return v
	}
	return "v0.0.0-dev-" + strings.Map(func(r rune) rune {
		if r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, v)
}

var (
	semverRE = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	sha256RE = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

func archiveName(ver, goos, goarch string) string {
	return fmt.Sprintf("mysqlctl_%s_%s_%s.tar.gz", ver, goos, goarch)
}

func load(file string) (*plugin, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var p plugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// checkCommon checks what the template and a rendered manifest share and returns the
// platforms by "os/arch".
func checkCommon(p *plugin, want []string, probs *problems) map[string]platform {
	if p.APIVersion != apiVersion {
		probs.add("apiVersion is %q, want %q", p.APIVersion, apiVersion)
	}
	if p.Kind != "Plugin" {
		probs.add("kind is %q, want Plugin", p.Kind)
	}
	if p.Metadata.Name != pluginName {
		probs.add("metadata.name is %q, want %q", p.Metadata.Name, pluginName)
	}
	for field, v := range map[string]string{"version": p.Spec.Version, "homepage": p.Spec.Homepage, "shortDescription": p.Spec.ShortDescription, "description": p.Spec.Description, "caveats": p.Spec.Caveats} {
		if strings.TrimSpace(v) == "" {
			probs.add("spec.%s is empty", field)
		}
	}
	got := map[string]platform{}
	for i, pl := range p.Spec.Platforms {
		if pl.Selector == nil || len(pl.Selector.MatchLabels) == 0 {
			probs.add("platform %d has no selector.matchLabels", i)
			continue
		}
		labels := pl.Selector.MatchLabels
		goos, goarch := labels["os"], labels["arch"]
		if goos == "" || goarch == "" {
			probs.add("platform %d: selector.matchLabels needs os and arch, has %v", i, labels)
			continue
		}
		if len(labels) != 2 || len(pl.Selector.MatchExpressions) > 0 {
			probs.add("platform %s/%s: the selector may only match os and arch, has %v", goos, goarch, labels)
		}
		key := goos + "/" + goarch
		if _, dup := got[key]; dup {
			probs.add("platform %s is listed twice", key)
		}
		got[key] = pl
		if pl.Bin != binName {
			probs.add("platform %s: bin is %q, want %q", key, pl.Bin, binName)
		}
		if len(pl.Files) == 0 {
			probs.add("platform %s: files is empty", key)
		}
		installsBin := false
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				probs.add("platform %s: a files entry lacks from or to (%q -> %q)", key, f.From, f.To)
			}
			if path.Base(f.From) == binName && (f.To == "." || f.To == "./" || f.To == binName) {
				installsBin = true
			}
		}
		if !installsBin {
			probs.add("platform %s: no files entry installs %s, the bin", key, binName)
		}
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			probs.add("platform %s is missing", w)
		}
	}
	for k := range got {
		if !slices.Contains(want, k) {
			probs.add("platform %s is not expected (want exactly %s)", k, strings.Join(want, " "))
		}
	}
	return got
}

// checkTemplate checks the committed template: all four platforms, and the placeholders that
// hack/dist.sh fills exactly where it fills them.
func checkTemplate(file string) (problems, error) {
	p, err := load(file)
	if err != nil {
		return nil, err
	}
	var probs problems
	got := checkCommon(p, allPlatforms, &probs)
	if p.Spec.Version != "@KREW_VERSION@" {
		probs.add("spec.version is %q, want the placeholder @KREW_VERSION@", p.Spec.Version)
	}
	if p.Spec.Homepage != "@HOMEPAGE@" {
		probs.add("spec.homepage is %q, want the placeholder @HOMEPAGE@", p.Spec.Homepage)
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		pl := got[key]
		goos, goarch, _ := strings.Cut(key, "/")
		if want := "@URL_BASE@/" + archiveName("@VERSION@", goos, goarch); pl.URI != want {
			probs.add("platform %s: uri is %q, want %q", key, pl.URI, want)
		}
		if want := "@SHA256_" + goos + "_" + goarch + "@"; pl.Sha256 != want {
			probs.add("platform %s: sha256 is %q, want %q", key, pl.Sha256, want)
		}
	}
	return probs, nil
}

// checkDist checks a rendered manifest against the archives and checksums.txt in distDir.
func checkDist(manifest, distDir, ver string, want []string) (problems, error) {
	p, err := load(manifest)
	if err != nil {
		return nil, err
	}
	sums, err := readChecksums(filepath.Join(distDir, "checksums.txt"))
	if err != nil {
		return nil, err
	}
	var probs problems
	got := checkCommon(p, want, &probs)

	if wantV := krewVersion(ver); p.Spec.Version != wantV {
		probs.add("spec.version is %q, want %q (for version %q)", p.Spec.Version, wantV, ver)
	}
	if !strings.HasPrefix(p.Spec.Version, "v") {
		probs.add("spec.version %q does not start with v", p.Spec.Version)
	} else if _, err := version.ParseSemantic(p.Spec.Version); err != nil {
		probs.add("spec.version: %v", err)
	}
	if err := checkURL(p.Spec.Homepage); err != nil {
		probs.add("spec.homepage: %v", err)
	}

	wantSums := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		pl := got[key]
		goos, goarch, _ := strings.Cut(key, "/")
		name := archiveName(ver, goos, goarch)
		wantSums[name] = true
		if err := checkURL(pl.URI); err != nil {
			probs.add("platform %s: uri: %v", key, err)
		}
		if !strings.HasSuffix(pl.URI, "/"+name) {
			probs.add("platform %s: uri %q does not end with /%s", key, pl.URI, name)
		}
		if !sha256RE.MatchString(pl.Sha256) {
			probs.add("platform %s: sha256 %q is not 64 lower-case hex digits", key, pl.Sha256)
		}
		data, err := os.ReadFile(filepath.Join(distDir, name))
		if err != nil {
			probs.add("platform %s: archive: %v", key, err)
			continue
		}
		sum := sha256.Sum256(data)
		actual := hex.EncodeToString(sum[:])
		if pl.Sha256 != actual {
			probs.add("platform %s: sha256 is %s, but %s has sha256 %s", key, pl.Sha256, name, actual)
		}
		switch listed, ok := sums[name]; {
		case !ok:
			probs.add("platform %s: %s is not in checksums.txt", key, name)
		case listed != actual:
			probs.add("platform %s: checksums.txt has %s for %s, the archive has %s", key, listed, name, actual)
		}
		checkArchive(key, name, data, pl, &probs)
	}
	for name := range sums {
		if !wantSums[name] {
			probs.add("checksums.txt lists %s, which is not an expected archive", name)
		}
	}
	return probs, nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return nil
}

// readChecksums reads sha256sum output: "<sha256>  <name>" (or " *<name>") per line.
func readChecksums(file string) (map[string]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), " ")
		name = strings.TrimPrefix(strings.TrimPrefix(name, " "), "*")
		if !ok || !sha256RE.MatchString(sum) || name == "" || strings.ContainsAny(name, "/ ") {
			return nil, fmt.Errorf("%s:%d: not a sha256sum line: %q", file, n, sc.Text())
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", file, n, name)
		}
		sums[name] = sum
	}
	return sums, sc.Err()
}

// checkArchive checks that krew can extract the archive (regular files and directories only,
// relative paths without ..), that every files entry matches something in it, that the bin is
// an executable for the platform, that mysqlctl is the same program, and that the headers carry
// nothing that changes from one build to the next (times, owners, entry order).
func checkArchive(key, name string, data []byte, pl platform, probs *problems) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		probs.add("platform %s: %s: %v", key, name, err)
		return
	}
	type entry struct {
		mode int64
		data []byte
	}
	if gz.Name != "" || !gz.ModTime.IsZero() {
		probs.add("platform %s: %s: the gzip header records name %q and time %v (not reproducible: gzip -n)", key, name, gz.Name, gz.ModTime)
	}
	entries := map[string]entry{}
	prev := ""
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			probs.add("platform %s: %s: %v", key, name, err)
			return
		}
		n := strings.TrimPrefix(hdr.Name, "./")
		if hdr.ModTime.Unix() != 0 || hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			probs.add("platform %s: %s: entry %q has mtime %d, owner %d:%d (%q:%q); want 0, 0:0 and no names (not reproducible)", key, name, hdr.Name, hdr.ModTime.Unix(), hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		if hdr.Name < prev {
			probs.add("platform %s: %s: entry %q comes after %q (not in byte order: not reproducible)", key, name, hdr.Name, prev)
		}
		prev = hdr.Name
		if strings.Contains(n, "..") || strings.HasPrefix(n, "/") {
			probs.add("platform %s: %s: krew refuses the entry %q", key, name, hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			entries[strings.TrimSuffix(n, "/")] = entry{mode: hdr.Mode}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				probs.add("platform %s: %s: %s: %v", key, name, hdr.Name, err)
				return
			}
			entries[n] = entry{mode: hdr.Mode, data: b}
		default:
			probs.add("platform %s: %s: entry %q has tar type %q, krew extracts only files and directories", key, name, hdr.Name, hdr.Typeflag)
		}
	}
	for _, f := range pl.Files {
		from := strings.TrimPrefix(f.From, "./")
		matched := false
		for n := range entries {
			if ok, _ := path.Match(from, n); ok {
				matched = true
				break
			}
		}
		if !matched {
			probs.add("platform %s: files entry %q is not in %s", key, f.From, name)
		}
	}
	for n := range entries {
		if n != binName && n != "mysqlctl" && n != "README.md" && n != "LICENSE" {
			probs.add("platform %s: %s has an unexpected entry %q", key, name, n)
		}
	}
	bin, ok := entries[binName]
	if !ok {
		probs.add("platform %s: %s has no %s", key, name, binName)
		return
	}
	if bin.mode&0o111 != 0o111 {
		probs.add("platform %s: %s: %s has mode %o, not executable", key, name, binName, bin.mode)
	}
	if cli, ok := entries["mysqlctl"]; !ok {
		probs.add("platform %s: %s has no mysqlctl", key, name)
	} else if !bytes.Equal(cli.data, bin.data) || cli.mode != bin.mode {
		probs.add("platform %s: %s: mysqlctl and %s differ", key, name, binName)
	}
	if _, ok := entries["README.md"]; !ok {
		probs.add("platform %s: %s has no README.md", key, name)
	}
	if got := binaryPlatform(bin.data); got != key {
		probs.add("platform %s: %s: %s is a %s executable", key, name, binName, got)
	}
}

// binaryPlatform names the os/arch an executable was built for, as far as its header tells.
func binaryPlatform(b []byte) string {
	if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Machine {
		case elf.EM_X86_64:
			return "linux/amd64"
		case elf.EM_AARCH64:
			return "linux/arm64"
		}
		return "ELF " + f.Machine.String()
	}
	if f, err := macho.NewFile(bytes.NewReader(b)); err == nil {
		switch f.Cpu {
		case macho.CpuAmd64:
			return "darwin/amd64"
		case macho.CpuArm64:
			return "darwin/arm64"
		}
		return "Mach-O " + f.Cpu.String()
	}
	return "unknown"
}
