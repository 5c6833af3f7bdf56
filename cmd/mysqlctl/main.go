// Command mysqlctl creates and operates MySQL primary/replica clusters on Kubernetes. The same
// binary installed as kubectl-mysql is the kubectl plugin `kubectl mysql`.
package main

import "os"

func main() { os.Exit(int(run())) }
