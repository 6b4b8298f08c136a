package words

import "testing"

func TestWords(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Plural(1, "write"), "1 write"},
		{Plural(0, "write"), "0 writes"},
		{Plural(int64(3), "other"), "3 others"},
		{Count(int64(1), "update was", "updates were"), "1 update was"},
		{Count(35, "update was", "updates were"), "35 updates were"},
		{Form(1, "has", "have"), "has"},
		{Form(2, "has", "have"), "have"},
		{Times(1), "once"},
		{Times(4), "4 times"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestNearest(t *testing.T) {
	names := []string{"nemesis", "nemesis-interval", "recipe", "resource", "pause", "partition", "mutex", "mutex-3.4"}
	for in, want := range map[string]string{
		"nemsis": "nemesis", "nemeiss": "nemesis", "recipee": "recipe", "pase": "pause", "mutx": "mutex",
		"partiton": "partition", "resorce": "resource", "meteor": "", "x": "", "mutex": "mutex",
	} {
		if got := Nearest(in, names); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := DidYouMean("mutx", names); got != "; did you mean mutex?" {
		t.Errorf("DidYouMean(mutx) = %q", got)
	}
	if got := DidYouMean("meteor", names); got != "" {
		t.Errorf("DidYouMean(meteor) = %q, want nothing", got)
	}
}
