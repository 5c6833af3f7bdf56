package supervisor

import (
	"os"
	"testing"

	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// env is the package's one control plane: an API server is all the leader election, request,
// supervisor-guard and configuration-refusal tests need.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }
