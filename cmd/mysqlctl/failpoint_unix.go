//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// stopSelf freezes this process until it receives SIGCONT (failpoints only). A signal a process
// sends itself may stop its other threads before the calling one, so the caller waits for the
// SIGCONT: it returns only after the process really was stopped and continued.
func stopSelf() {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}
