//go:build unix

package main

import (
	"os"
	"syscall"
)

// stopSelf freezes this process until it receives SIGCONT (failpoints only).
func stopSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGSTOP) }
