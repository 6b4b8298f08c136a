package shellwords

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  a  b\tc\n", []string{"a", "b", "c"}},
		{`--recipe 'exec:python3 adapters/x.py' --time 30s`, []string{"--recipe", "exec:python3 adapters/x.py", "--time", "30s"}},
		{`"a \"b\" \$c \x" d`, []string{`a "b" $c \x`, "d"}},
		{`a\ b c\'d`, []string{"a b", "c'd"}},
		{`'' x`, []string{"", "x"}},
		{`'it'\''s'`, []string{"it's"}},
	} {
		got, err := Split(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`'a`, `"a`, `a "b' c`} {
		if _, err := Split(bad); err == nil {
			t.Errorf("Split(%q): no error for an unterminated quote", bad)
		}
	}
}

func TestJoinSplitRoundTrip(t *testing.T) {
	for _, words := range [][]string{
		{"locktest", "run", "--recipe", "exec:python3 /tmp/my dir/x.py"},
		{"it's", `a "b"`, "$HOME", "a\\b", "", "!x", "{a,b}", "tab\there", "line\nbreak"},
		{"plain", "--time", "30s"},
	} {
		line := Join(words)
		got, err := Split(line)
		if err != nil || !slices.Equal(got, words) {
			t.Errorf("Split(Join(%q)) = Split(%s) = %q, %v", words, line, got, err)
		}
	}
	if got := Join([]string{"--time", "30s"}); got != "--time 30s" {
		t.Errorf("Join quoted words that need no quotes: %s", got)
	}
}
