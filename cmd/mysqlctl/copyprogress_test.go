package main

import "testing"

func TestAgentProgressLine(t *testing.T) {
	tests := []struct {
		p    agentProgress
		want string
	}{
		{agentProgress{Stage: "backup"}, "0 B copied"},
		{agentProgress{Stage: "backup", Bytes: 300 << 20, Done: 300 << 20, Total: 1200 << 20, Seconds: 10},
			"300.0 MiB copied in 10s, 30.0 MiB/s, about 25% done, 30s left"},
		{agentProgress{Stage: "restore", Bytes: 512 << 20, Done: 100 << 20, Total: 400 << 20, Seconds: 20},
			"512.0 MiB copied in 20s, 25.6 MiB/s, about 25% done, 1m0s left"},
		// A total overtaken (the stream is larger than the data directory's estimate) or unknown.
		{agentProgress{Stage: "backup", Bytes: 2 << 30, Done: 2 << 30, Total: 1 << 30, Seconds: 4}, "2.0 GiB copied in 4s, 512.0 MiB/s"},
		{agentProgress{Stage: "backup", Bytes: 1 << 20, Seconds: 2}, "1.0 MiB copied in 2s, 512.0 KiB/s"},
	}
	for _, tt := range tests {
		if got := tt.p.line(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.p, got, tt.want)
		}
	}
}
