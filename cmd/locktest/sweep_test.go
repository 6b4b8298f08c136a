package main

import "testing"

// A sweep's exit status: a violation in any run decides, whatever order
// the unknown runs came in.
func TestWorse(t *testing.T) {
	for _, c := range []struct {
		runs []int
		want int
	}{
		{[]int{exitValid, exitValid}, exitValid},
		{[]int{exitValid, exitUnknown, exitValid}, exitUnknown},
		{[]int{exitUnknown, exitInvalid, exitUnknown}, exitInvalid},
		{[]int{exitInvalid, exitUnknown}, exitInvalid},
		{[]int{exitValid, exitInvalid, exitValid}, exitInvalid},
	} {
		code := exitValid
		for _, r := range c.runs {
			code = worse(code, r)
		}
		if code != c.want {
			t.Errorf("runs exiting %v: sweep exits %d, want %d", c.runs, code, c.want)
		}
	}
}
