// Command etcd is etcd's own server main, built from the Go module proxy so the
// test control plane needs nothing from a release site.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
