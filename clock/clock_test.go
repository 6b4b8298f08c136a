package clock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// within fails unless lo <= got <= hi.
func within(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %v, want within [%v, %v]", what, got, lo, hi)
	}
}

func TestNewReadsHostTime(t *testing.T) {
	c := New()
	within(t, "skew of a new clock", c.Skew(), -5*time.Millisecond, 5*time.Millisecond)
	if c.Rate() != 1 || c.Offset() != 0 {
		t.Errorf("rate %v offset %v, want 1 and 0", c.Rate(), c.Offset())
	}
}

func TestBumpShiftsNow(t *testing.T) {
	c := New()
	before := c.Now()
	c.Bump(time.Hour)
	within(t, "Now after Bump(1h) minus before", c.Now().Sub(before), time.Hour, time.Hour+50*time.Millisecond)
	c.Bump(-90 * time.Minute)
	within(t, "skew after +1h -90m", c.Skew(), -30*time.Minute-5*time.Millisecond, -30*time.Minute+5*time.Millisecond)
	if c.Offset() != -30*time.Minute {
		t.Errorf("Offset = %v, want -30m", c.Offset())
	}
	c.Reset()
	within(t, "skew after Reset", c.Skew(), -5*time.Millisecond, 5*time.Millisecond)
	if c.Offset() != 0 || c.Rate() != 1 {
		t.Errorf("after Reset: offset %v rate %v", c.Offset(), c.Rate())
	}
}

func TestRateScalesElapsedTime(t *testing.T) {
	c := New()
	c.SetRate(0.5)
	start, host := c.Now(), time.Now()
	time.Sleep(200 * time.Millisecond)
	el, hostEl := c.Since(start), time.Since(host)
	// The clock advanced half as much as the host.
	within(t, "clock elapsed at rate 0.5", el, hostEl/2-5*time.Millisecond, hostEl/2+5*time.Millisecond)

	c.SetRate(3)
	start, host = c.Now(), time.Now()
	time.Sleep(100 * time.Millisecond)
	el, hostEl = c.Since(start), time.Since(host)
	within(t, "clock elapsed at rate 3", el, 3*hostEl-15*time.Millisecond, 3*hostEl+15*time.Millisecond)

	// Changing the rate does not make the clock jump.
	before := c.Now()
	c.SetRate(1)
	within(t, "jump at a rate change", c.Now().Sub(before), 0, 5*time.Millisecond)
}

// Sleep waits d of the clock's time: d/rate of the host's. A sleep never
// ends early, so the lower bounds are tight; a loaded machine wakes a
// sleeper late, by 80 ms and more, so each upper bound is what a Sleep
// that got the rate wrong would take (host time, or the rate applied
// twice), not a guess at the scheduler's lateness.
func TestSleepWaitsClockTime(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		rate     float64
		d        time.Duration
		min, max time.Duration // host time
	}{
		{rate: 4, d: 400 * time.Millisecond, min: 95 * time.Millisecond, max: 400 * time.Millisecond},    // host time would be 400 ms
		{rate: 0.5, d: 100 * time.Millisecond, min: 195 * time.Millisecond, max: 400 * time.Millisecond}, // the rate twice: 400 ms
		{rate: 1, d: 100 * time.Millisecond, min: 99 * time.Millisecond, max: 200 * time.Millisecond},    // twice d
	} {
		c := New()
		c.SetRate(tc.rate)
		start := time.Now()
		if err := c.Sleep(ctx, tc.d); err != nil {
			t.Fatal(err)
		}
		within(t, "host time of Sleep", time.Since(start), tc.min, tc.max)
	}
}

func TestRateChangeRearmsTimers(t *testing.T) {
	c := New()
	start := time.Now()
	tm := c.NewTimer(400 * time.Millisecond)
	time.Sleep(100 * time.Millisecond) // 100 ms of clock time pass at rate 1
	c.SetRate(3)                       // the remaining 300 ms take 100 ms
	<-tm.C
	within(t, "host time to fire", time.Since(start), 195*time.Millisecond, 270*time.Millisecond)

	// A stopped clock never fires until it runs again.
	c.SetRate(0)
	tm = c.NewTimer(time.Millisecond)
	select {
	case <-tm.C:
		t.Fatal("timer fired on a stopped clock")
	case <-time.After(50 * time.Millisecond):
	}
	c.SetRate(1)
	select {
	case <-tm.C:
	case <-time.After(time.Second):
		t.Fatal("timer did not fire after the clock restarted")
	}
}

func TestBumpFiresDueTimers(t *testing.T) {
	c := New()
	due := c.NewTimer(time.Hour)
	later := c.NewTimer(3 * time.Hour)
	called := make(chan struct{})
	c.AfterFunc(90*time.Minute, func() { close(called) })
	c.Bump(2 * time.Hour)
	select {
	case <-due.C:
	case <-time.After(time.Second):
		t.Fatal("a timer due after the bump did not fire")
	}
	select {
	case <-called:
	case <-time.After(time.Second):
		t.Fatal("an AfterFunc due after the bump did not run")
	}
	select {
	case <-later.C:
		t.Fatal("a timer not yet due fired")
	default:
	}
	if !later.Stop() {
		t.Error("Stop of a pending timer reported false")
	}

	// A bump back delays a pending timer.
	start := time.Now()
	tm := c.NewTimer(50 * time.Millisecond)
	c.Bump(-100 * time.Millisecond)
	<-tm.C
	within(t, "host time after bump back", time.Since(start), 145*time.Millisecond, 230*time.Millisecond)
}

func TestTimerStopAndReset(t *testing.T) {
	c := New()
	tm := c.NewTimer(20 * time.Millisecond)
	if !tm.Stop() {
		t.Fatal("Stop of an active timer reported false")
	}
	select {
	case <-tm.C:
		t.Fatal("a stopped timer fired")
	case <-time.After(60 * time.Millisecond):
	}
	if tm.Stop() {
		t.Error("second Stop reported true")
	}
	start := time.Now()
	tm.Reset(30 * time.Millisecond)
	<-tm.C
	within(t, "Reset timer", time.Since(start), 29*time.Millisecond, 100*time.Millisecond)
}

func TestWithTimeoutUsesClockTime(t *testing.T) {
	c := New()
	c.SetRate(4)
	start := time.Now()
	ctx, cancel := c.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	within(t, "host time to the clock timeout", time.Since(start), 95*time.Millisecond, 170*time.Millisecond)
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("cause = %v, want DeadlineExceeded", context.Cause(ctx))
	}

	ctx, cancel = c.WithTimeout(context.Background(), time.Hour)
	cancel()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("cause after cancel = %v, want Canceled", context.Cause(ctx))
	}
}

func TestSleepHonoursContext(t *testing.T) {
	c := New()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := c.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep = %v, want Canceled", err)
	}
}

// Run with -race: timers, bumps and rate changes from many goroutines.
func TestConcurrentUse(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				switch (i + j) % 4 {
				case 0:
					c.Bump(time.Millisecond)
				case 1:
					c.SetRate(float64(1 + j%3))
				case 2:
					c.Sleep(context.Background(), time.Millisecond)
				case 3:
					c.NewTimer(time.Duration(j) * time.Microsecond).Stop()
				}
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	c.Reset()
}
