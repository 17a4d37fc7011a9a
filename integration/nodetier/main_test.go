package nodetier

import (
	"context"
	"testing"

	"github.com/shardns/shardns/integration/harness"
)

// TestMain builds the shardns binary the tests run (harness.Bin) and
// stops the apiserver they share when they are done.
func TestMain(m *testing.M) { harness.Main(m) }

// ctx is the context of the tests' API calls: a test stops them by
// failing, not by cancelling.
var ctx = context.Background()
