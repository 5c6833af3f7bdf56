package agent

import (
	"net"
	"os"
	"strconv"
	"testing"
)

// TestConnectionsTo finds this process's own established connection to a loopback listener,
// by its ports, and nothing for another address.
func TestConnectionsTo(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr)
	remote := ln.Addr().(*net.TCPAddr)
	conns, err := connectionsTo(os.Getpid(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	want := tcpConn{local: "127.0.0.1", localPort: strconv.Itoa(local.Port), remotePort: strconv.Itoa(remote.Port)}
	found := false
	for _, got := range conns {
		found = found || got == want
	}
	if !found {
		t.Fatalf("connections to 127.0.0.1 %v do not include %v", conns, want)
	}
	if other, err := connectionsTo(os.Getpid(), "127.0.9.9"); err != nil || len(other) != 0 {
		t.Fatalf("connections to 127.0.9.9: %v, %v", other, err)
	}
}
