package etcd

import (
	"testing"

	"github.com/locktest/locktest/internal/partest"
)

// The tests here mostly wait (out leases, pauses, a run's clock), each on a
// cluster of its own.
func TestMain(m *testing.M) { partest.Main(m) }
