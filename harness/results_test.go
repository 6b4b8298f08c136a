package harness

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/histories"
)

func TestParseRequire(t *testing.T) {
	got, err := ParseRequire("all")
	if err != nil || strings.Join(got, ",") != "consistency,contract,invariant,liveness,mutex,resource" {
		t.Errorf("all: %v %v", got, err)
	}
	if got, err := ParseRequire("liveness, mutex"); err != nil || strings.Join(got, ",") != "liveness,mutex" {
		t.Errorf("list: %v %v", got, err)
	}
	// A required check the results lack does not change the verdict.
	if v, code := verdict([]checker.Result{{Name: histories.CheckMutex, Verdict: checker.Valid}}, []string{"mutex", "consistency"}); v != checker.Valid || code != ExitValid {
		t.Errorf("verdict %s %d", v, code)
	}
}
