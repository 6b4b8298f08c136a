package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/scenario"
)

// nightlyRun is one run of a nightly plan, as reported.
type nightlyRun struct {
	Name     string  // scenario or "seed N", recipe, resource
	Dir      string  // the run directory
	Command  string  // what reproduces it
	Seconds  float64 // how long it took
	Verdicts map[string]string
	Exit     int
	Failed   string // the first story of a required check that failed; "" when it held
	Shrink   string // the command that shrinks a failed run's schedule, if it has one
	Error    string // a run that could not be carried out, or an unknown verdict
	// Bugs are the upstream bugs its scenario reproduces (each with the
	// recipes that show it).
	Bugs []scenario.Bug
	// Cells are the (lock state × fault) cells its faults struck, on
	// Backend.
	Cells   []nemesis.Cell
	Backend string
}

type junitSuites struct {
	XMLName xml.Name   `xml:"testsuites"`
	Suites  []junitSet `xml:"testsuite"`
}

type junitSet struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name       string           `xml:"name,attr"`
	Classname  string           `xml:"classname,attr"`
	Time       string           `xml:"time,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Failure    *junitMessage    `xml:"failure,omitempty"`
	Error      *junitMessage    `xml:"error,omitempty"`
	SystemOut  string           `xml:"system-out,omitempty"`
}

// junitProperties name a case's upstream bugs, one property
// "upstream-bug" each, as CI systems show a case's properties.
type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes the runs as one JUnit test suite, as CI systems read
// it: a test case per run, a failure with the first story where a
// required check failed, an error where the run could not be judged, and
// the upstream bugs its scenario reproduces as its properties.
func writeJUnit(w io.Writer, runs []nightlyRun) error {
	set := junitSet{Name: "locktest nightly", Tests: len(runs)}
	var total float64
	for _, r := range runs {
		total += r.Seconds
		c := junitCase{Name: r.Name, Classname: "locktest", Time: fmt.Sprintf("%.3f", r.Seconds),
			SystemOut: fmt.Sprintf("reproduce: %s\nrun directory: %s\n", r.Command, r.Dir)}
		for _, b := range r.Bugs {
			if c.Properties == nil {
				c.Properties = &junitProperties{}
			}
			c.Properties.Property = append(c.Properties.Property, junitProperty{Name: "upstream-bug", Value: b.String() + ": " + b.URL})
			c.SystemOut += fmt.Sprintf("upstream bug: %s: %s\n", b, b.URL)
		}
		if r.Shrink != "" {
			c.SystemOut += "shrink: " + r.Shrink + "\n"
		}
		switch {
		case r.Failed != "":
			set.Failures++
			c.Failure = &junitMessage{Message: firstLine(r.Failed), Text: r.Failed}
			if r.Shrink != "" {
				c.Failure.Text += "\n\nShrink it to the fewest faults that still fail: " + r.Shrink
			}
		case r.Error != "":
			set.Errors++
			c.Error = &junitMessage{Message: firstLine(r.Error), Text: r.Error}
		}
		set.Cases = append(set.Cases, c)
	}
	set.Time = fmt.Sprintf("%.3f", total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSet{set}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// writeSummary writes the runs as Markdown for a CI job's summary page: a
// table of runs and verdicts, then each failure's story and reproduction.
func writeSummary(w io.Writer, runs []nightlyRun) error {
	var b strings.Builder
	failed := 0
	for _, r := range runs {
		if r.Failed != "" || r.Error != "" {
			failed++
		}
	}
	fmt.Fprintf(&b, "# locktest nightly: %d runs, %d failed\n\n", len(runs), failed)
	b.WriteString("| run | verdict | exit | seconds |\n| --- | --- | --- | --- |\n")
	for _, r := range runs {
		verdict := "held"
		switch {
		case r.Failed != "":
			verdict = "**failed**"
		case r.Error != "":
			verdict = "**unknown**"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f |\n", mdCell(r.Name), verdict, r.Exit, r.Seconds)
	}
	for _, r := range runs {
		if r.Failed == "" && r.Error == "" {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\nReproduce: `%s`  \nRun directory: `%s`\n", r.Name, r.Failed+r.Error, r.Command, r.Dir)
		if r.Shrink != "" {
			fmt.Fprintf(&b, "Shrink: `%s`\n", r.Shrink)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
