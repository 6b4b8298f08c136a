package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDiscard: a failed run's directory goes, unless a server's log in it
// says something (then only the logs stay) or it recorded a history (then
// all stays).
func TestDiscard(t *testing.T) {
	for _, tc := range []struct {
		name    string
		log     string // the content of logs/m0.log
		history bool   // a history was recorded
		kept    bool
	}{
		{"silent servers", "", false, false},
		{"a server said why", "bind: permission denied\n", false, true},
		{"a history recorded", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			files := map[string]string{"resource-log.jsonl": "", "logs/m0.log": tc.log, "logs/toxiproxy.log": ""}
			if tc.history {
				files["history.jsonl"] = "{}\n"
			}
			for f, b := range files {
				p := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			logs := Discard(dir)
			ents, err := os.ReadDir(dir)
			switch {
			case tc.history && (logs != "" || len(ents) != 3):
				t.Errorf("Discard = %q, left %v; want all kept", logs, ents)
			case tc.history:
			case !tc.kept && (logs != "" || !os.IsNotExist(err)):
				t.Errorf("Discard = %q, left %v (%v); want the directory gone", logs, ents, err)
			case tc.kept && (logs != filepath.Join(dir, "logs") || len(ents) != 1 || ents[0].Name() != "logs"):
				t.Errorf("Discard = %q, left %v; want only %s", logs, ents, filepath.Join(dir, "logs"))
			}
		})
	}
}
