// Package registry is where locktest's backends are registered, one line
// each. It is the only package that imports the backends: the CLI hands
// Backends to the harness, which imports none itself.
package registry

import (
	"github.com/locktest/locktest/backend"
	"github.com/locktest/locktest/backend/etcd"
	"github.com/locktest/locktest/backend/mysql"
	"github.com/locktest/locktest/backend/postgres"
	"github.com/locktest/locktest/backend/redis"
	"github.com/locktest/locktest/backend/zookeeper"
)

// backends are the registered backends, the default first: a run of no
// recipe in particular, and a history that names no backend, are its.
var backends = backend.NewSet(
	etcd.Backend,
	redis.Backend,
	zookeeper.Backend,
	postgres.Backend,
	mysql.Backend,
)

// Backends are every backend locktest has, for the harness (its Options'
// and CheckOptions' Backends) and the CLI.
func Backends() *backend.Set { return backends }
