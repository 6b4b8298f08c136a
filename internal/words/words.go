// Package words holds the plain-words helpers of stories and summaries:
// a count with its noun in the singular or the plural, and the like.
package words

import (
	"strconv"
	"strings"
)

// integer is what the helpers count with.
type integer interface{ ~int | ~int64 }

// Plural says n of a noun whose plural adds an s: "1 write", "3 writes".
func Plural[N integer](n N, noun string) string {
	return Count(n, noun, noun+"s")
}

// Count says n things, in the singular or the plural: "1 update was",
// "35 updates were".
func Count[N integer](n N, one, many string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Form(n, one, many)
}

// Form is one when n is 1, else many: Form(n, "has", "have").
func Form[N integer](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Times says how often: "once", "3 times".
func Times[N integer](n N) string {
	if n == 1 {
		return "once"
	}
	return strconv.FormatInt(int64(n), 10) + " times"
}

// OneLine keeps an error to the single line the user sees.
func OneLine(err error) string {
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
}
