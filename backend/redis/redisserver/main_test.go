package redisserver

import (
	"testing"

	"github.com/locktest/locktest/internal/partest"
)

// The tests here mostly wait on servers of their own.
func TestMain(m *testing.M) { partest.Main(m) }
