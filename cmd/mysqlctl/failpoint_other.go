//go:build !unix

package main

// stopSelf cannot freeze a process on this platform; the failpoint does nothing.
func stopSelf() {}
