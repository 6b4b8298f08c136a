package words

import "unicode/utf8"

// Nearest returns the candidate closest to a mistyped name ("nemsis":
// "nemesis"), by edit distance (a swap of two neighbours counts as one
// edit), or "" when none is near: more edits than a third of the name's
// length, at least one, allow. Ties go to the first candidate.
func Nearest(name string, candidates []string) string {
	best, bestD := "", max(1, utf8.RuneCountInString(name)/3)+1
	for _, c := range candidates {
		if d := distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean is "; did you mean X?" with the candidate nearest name, or "".
func DidYouMean(name string, candidates []string) string {
	if n := Nearest(name, candidates); n != "" && n != name {
		return "; did you mean " + n + "?"
	}
	return ""
}

// distance is the optimal string alignment distance between a and b: the
// insertions, deletions, substitutions and swaps of neighbours that turn
// one into the other.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
