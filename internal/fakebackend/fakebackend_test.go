package fakebackend

import (
	"os/exec"
	"strings"
	"testing"
)

// No package of locktest imports the fake but in its tests: a binary
// built from the module never runs on a backend in memory.
func TestOnlyTestsImportIt(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "github.com/locktest/locktest/...").Output()
	if err != nil {
		t.Skipf("skipped: go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Fields(imports) {
			if imp == "github.com/locktest/locktest/internal/fakebackend" {
				t.Errorf("%s imports the fake backend outside its tests", pkg)
			}
		}
	}
}
