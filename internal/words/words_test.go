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
