package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/iostreams"
)

// TestHelpRendersAndExamplesParse renders every command's help as mysqlctl and as kubectl
// mysql: no formatting debris ("%!"), and every example line is a command line of this program
// whose command exists and whose flags parse.
func TestHelpRendersAndExamplesParse(t *testing.T) {
	for _, argv0 := range []string{"mysqlctl", "kubectl-mysql"} {
		ios, _, _, _ := iostreams.Test()
		f := newFactory(ios, argv0, func(string) string { return "" })
		root := NewCmdRoot(f)
		var walk func(c *cobra.Command)
		walk = func(c *cobra.Command) {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			var path []string
			for p := c; p.HasParent(); p = p.Parent() {
				path = append([]string{p.Name()}, path...)
			}
			r := runCommand(t, runOpts{argv0: argv0}, append(path, "--help")...)
			if r.code != 0 || strings.Contains(r.stdout, "%!") {
				t.Errorf("%s %v --help: exit %d\n%s", argv0, path, r.code, r.stdout)
			}
			for _, line := range strings.Split(c.Example, "\n") {
				l := strings.TrimSpace(line)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if err := parseCommandLine(root, f.DisplayName, l); err != nil {
					t.Errorf("%s: example %q: %v", c.CommandPath(), l, err)
				}
			}
		}
		walk(root)
	}
}

// parseCommandLine checks that line runs program (mysqlctl or kubectl mysql, possibly as
// bin/mysqlctl) with a command of root whose flags and arguments parse. Anything after a
// shell operator is ignored.
func parseCommandLine(root *cobra.Command, program, line string) error {
	return parseLine(root, program, line, true)
}

// parseLine is parseCommandLine; withArgs false checks the command and flags only (a command
// named in prose, without its arguments).
func parseLine(root *cobra.Command, program, line string, withArgs bool) error {
	i := strings.Index(line, program+" ")
	if i < 0 {
		return fmt.Errorf("does not run %s", program)
	}
	rest := line[i+len(program):]
	if j := strings.IndexAny(rest, ")|><;&#`"); j >= 0 {
		rest = rest[:j]
	}
	args := shellFields(rest)
	found, flags, err := root.Find(args)
	if err != nil || found == root {
		return fmt.Errorf("names no command: %v", err)
	}
	if err := found.ParseFlags(flags); err != nil {
		return err
	}
	if withArgs && found.Args != nil {
		return found.Args(found, found.Flags().Args())
	}
	return nil
}

// shellFields splits s into words as a POSIX shell would for plain words and single- or
// double-quoted strings (no escapes or expansions: example lines need none).
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// inlineCmd finds inline code that runs the program.
var inlineCmd = regexp.MustCompile("`((?:bin/)?mysqlctl [^`]*|kubectl mysql [^`]*)`")

// suggested is a command line a document suggests; withArgs when it is a whole line (a code
// block), not inline code that names a command and its flags.
type suggested struct {
	line     string
	withArgs bool
}

// suggestedIn finds the command lines of a Markdown document: lines of code blocks are whole
// command lines; inline code names a command and flags.
func suggestedIn(markdown string) []suggested {
	var out []suggested
	inBlock := false
	for _, l := range strings.Split(markdown, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			t = strings.TrimPrefix(t, "$ ")
			if strings.HasPrefix(t, "mysqlctl ") || strings.HasPrefix(t, "bin/mysqlctl ") || strings.HasPrefix(t, "kubectl mysql ") {
				out = append(out, suggested{t, true})
			}
			continue
		}
		for _, m := range inlineCmd.FindAllStringSubmatch(l, -1) {
			if !strings.Contains(m[1], "…") {
				out = append(out, suggested{m[1], false})
			}
		}
	}
	return out
}

// TestSuggestedCommandLinesParse: every command line the README, the docs and `make demo`
// suggest is a command of this program whose flags and arguments parse.
func TestSuggestedCommandLinesParse(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	root := NewCmdRoot(newFactory(ios, "mysqlctl", func(string) string { return "" }))
	found := map[string][]suggested{}
	// Every page of the manual, docs/reference/ and any other subdirectory included.
	var docs []string
	err := filepath.WalkDir("../../docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found[strings.TrimPrefix(f, "../../")] = suggestedIn(string(b))
	}
	demo, err := os.ReadFile("../../hack/demo.sh")
	if err != nil {
		t.Fatal(err)
	}
	suggestion := regexp.MustCompile(`(?m)^\s*(?:has \w+ && )?(?:try|step) "(bin/mysqlctl [^"]*)"`)
	for _, m := range suggestion.FindAllStringSubmatch(string(demo), -1) {
		found["hack/demo.sh"] = append(found["hack/demo.sh"], suggested{m[1], true})
	}
	if len(found["README.md"]) < 10 || len(found["hack/demo.sh"]) < 4 {
		t.Fatalf("found too few command lines to check: %d in README.md, %d in hack/demo.sh", len(found["README.md"]), len(found["hack/demo.sh"]))
	}
	for file, ls := range found {
		t.Logf("%s: %d command lines", file, len(ls))
		for _, sg := range ls {
			l := sg.line
			if strings.HasPrefix(l, "kubectl mysql") {
				l = "mysqlctl" + strings.TrimPrefix(l, "kubectl mysql")
			}
			if err := parseLine(root, "mysqlctl", l, sg.withArgs); err != nil {
				t.Errorf("%s suggests %q: %v", file, sg.line, err)
			}
		}
	}
}
