package main

import (
	"os"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// env is the package's one real control plane (etcd + kube-apiserver, CRDs loaded).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{ControllerManager: true})) }
