package main

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestParseFlagsAfterArguments(t *testing.T) {
	c := &cli{name: "exec"}
	fs := c.flags(true)
	timeout := fs.Duration("timeout", 0, "")
	pos, rest, err := parse(fs, []string{"demo-0", "-n", "db", "--timeout", "5s", "-c", "mysql", "--", "sh", "-c", "echo -n hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pos, []string{"demo-0"}) || c.namespace != "db" || c.container != "mysql" || timeout.String() != "5s" {
		t.Errorf("positional %q namespace %q container %q timeout %s", pos, c.namespace, c.container, timeout)
	}
	if !reflect.DeepEqual(rest, []string{"sh", "-c", "echo -n hi"}) {
		t.Errorf("command after -- = %q", rest)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"nosuch"},
		{"kill"},
		{"kill", "a", "b"},
		{"up", "--bogus"},
		{},
	} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != exitUsage {
			t.Errorf("rig %s: exit %d, want %d (stderr %q)", strings.Join(args, " "), code, exitUsage, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"kill", "-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "Usage: rig kill") {
		t.Errorf("rig kill -h: exit %d, output %q", code, out.String())
	}
}
