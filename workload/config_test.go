package workload

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidateGuard(t *testing.T) {
	cfg := DefaultConfig()
	for _, g := range []string{"", GuardNone, GuardSession, GuardClock} {
		cfg.Guard = g
		if err := cfg.Validate(); err != nil {
			t.Errorf("guard %q: %v", g, err)
		}
	}
	cfg.Guard = "lease"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `unknown guard "lease"`) {
		t.Errorf("bad guard: %v", err)
	}
	cfg.Guard, cfg.GuardMargin = GuardClock, 2*time.Second
	if err := cfg.Validate(); err == nil {
		t.Error("a margin of the whole TTL was accepted")
	}
	cfg.GuardMargin = 0
	if cfg.margin() != 400*time.Millisecond {
		t.Errorf("default margin %v, want TTL/5", cfg.margin())
	}
}
