// Package shellwords splits a command line into words as a POSIX shell
// does, and quotes words so that a shell (and Split) gives them back: the
// commands locktest records to reproduce a run, and the exec: recipes'
// commands.
package shellwords

import (
	"fmt"
	"strings"
)

// special are the characters a shell treats other than as part of a word.
const special = " \t\n'\"\\$`;&|<>()*?[]#~!{}"

// Split splits s into words as a POSIX shell does, with single and double
// quotes and backslashes, and nothing else (no variables, no globs).
func Split(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		in    bool // a word is under way
		quote rune
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(rs) && strings.ContainsRune(`"\$`+"`", rs[i+1]):
				i++
				cur.WriteRune(rs[i])
			default:
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\':
			if i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
			}
			in = true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}

// Quote quotes s for a shell command line when it needs quotes.
func Quote(s string) string {
	if s != "" && !strings.ContainsAny(s, special) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join joins words, each quoted as it needs, so that Split gives them back.
func Join(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Quote(w)
	}
	return strings.Join(out, " ")
}
