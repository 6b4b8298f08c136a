package workload_test

import (
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/workload"
)

// *Workload is what the nemesis drives.
var _ nemesis.Clients = (*workload.Workload)(nil)
