package links

import (
	"testing"

	"github.com/rs/zerolog"
	zlog "github.com/rs/zerolog/log"
)

// Toxiproxy's bandwidth toxic logs to zerolog's global logger, not the
// server's: once a run's toxiproxy starts, that logger writes nothing (by
// default it writes to the user's terminal).
func TestGlobalLoggerQuiet(t *testing.T) {
	l, err := Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if lvl := zlog.Logger.GetLevel(); lvl != zerolog.Disabled {
		t.Errorf("zerolog's global logger logs at %v", lvl)
	}
}
