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
	hostBefore := time.Now()
	before := c.Now()
	c.Bump(time.Hour)
	after := c.Now()
	// Between the two reads the host's time passed too, however long a
	// loaded scheduler made it.
	within(t, "Now after Bump(1h) minus before", after.Sub(before), time.Hour, time.Hour+time.Since(hostBefore))
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

// bracket is a reading of a clock between two readings of the host's:
// however long a loaded scheduler holds the test between reads, the
// clock's time elapsed between two brackets lies between rate × (the host's
// time from the first's hi to the second's lo) and rate × (the first's lo
// to the second's hi).
type bracket struct {
	lo, hi time.Time // host readings either side of the clock's
	clock  time.Time
}

func read(c *Clock) bracket {
	lo := time.Now()
	at := c.Now()
	return bracket{lo: lo, clock: at, hi: time.Now()}
}

// checkRate fails unless the clock time between a and b is what rate makes
// of the host time between them (a nanosecond per reading for rounding).
func checkRate(t *testing.T, what string, rate float64, a, b bracket) {
	t.Helper()
	lo := time.Duration(rate * float64(b.lo.Sub(a.hi)))
	hi := time.Duration(rate * float64(b.hi.Sub(a.lo)))
	within(t, what, b.clock.Sub(a.clock), lo-2, hi+2)
}

func TestRateScalesElapsedTime(t *testing.T) {
	c := New()
	c.SetRate(0.5)
	start := read(c)
	time.Sleep(200 * time.Millisecond)
	checkRate(t, "clock elapsed at rate 0.5", 0.5, start, read(c))

	c.SetRate(3)
	start = read(c)
	time.Sleep(100 * time.Millisecond)
	checkRate(t, "clock elapsed at rate 3", 3, start, read(c))

	// Changing the rate does not make the clock jump: across the change
	// the clock advances by no more than rate 3 and no less than rate 1
	// would make it (a clock re-anchored wrong jumps by its elapsed time
	// or more).
	before := read(c)
	c.SetRate(1)
	after := read(c)
	within(t, "clock advance across a rate change", after.clock.Sub(before.clock), after.lo.Sub(before.hi), 3*after.hi.Sub(before.lo)+2)
}

// Sleep waits d of the clock's time: d/rate of the host's. A sleep never
// ends early, so the lower bounds are tight; a loaded machine wakes a
// sleeper late, by 100 ms and more, so each upper bound is what a Sleep
// that got the rate wrong would take (host time, or the rate applied
// twice), far enough from the right answer that lateness does not reach it.
func TestSleepWaitsClockTime(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		rate     float64
		d        time.Duration
		min, max time.Duration // host time
	}{
		{rate: 10, d: time.Second, min: 99 * time.Millisecond, max: time.Second - time.Millisecond},                       // host time would be 1 s
		{rate: 0.25, d: 50 * time.Millisecond, min: 199 * time.Millisecond, max: 800*time.Millisecond - time.Millisecond}, // the rate twice: 800 ms; host time 50 ms
		{rate: 1, d: 100 * time.Millisecond, min: 99 * time.Millisecond, max: time.Hour},                                  // only an early end is wrong
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

// A timer of 2 s of the clock's time, with the rate raised to 20 after
// 50 ms: it fires once the rest of its time has passed at the new rate, no
// sooner, and well before the host second it would take if not re-armed.
func TestRateChangeRearmsTimers(t *testing.T) {
	c := New()
	start := time.Now()
	tm := c.NewTimer(2 * time.Second)
	time.Sleep(50 * time.Millisecond) // 50 ms or more of clock time pass at rate 1
	changed := time.Now()
	c.SetRate(20)
	changedBy := time.Now()
	<-tm.C
	// At the change at most changedBy-start of the timer's time had passed;
	// the rest passes at rate 20.
	earliest := changed.Sub(start) + (2*time.Second-changedBy.Sub(start))/20
	within(t, "host time to fire", time.Since(start), earliest-time.Millisecond, 2*time.Second-time.Millisecond)

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
	case <-time.After(10 * time.Second):
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
	case <-time.After(10 * time.Second):
		t.Fatal("a timer due after the bump did not fire")
	}
	select {
	case <-called:
	case <-time.After(10 * time.Second):
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

	// A bump back delays a pending timer: by the bump, not less (a timer
	// that ignored the bump fires after 50 ms). How much later than 150 ms
	// it fires is the scheduler's business.
	start := time.Now()
	tm := c.NewTimer(50 * time.Millisecond)
	c.Bump(-100 * time.Millisecond)
	<-tm.C
	within(t, "host time after bump back", time.Since(start), 150*time.Millisecond-time.Microsecond, time.Hour)
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
	select {
	case <-tm.C:
	case <-time.After(10 * time.Second):
		t.Fatal("a Reset timer did not fire")
	}
	within(t, "Reset timer", time.Since(start), 30*time.Millisecond-time.Microsecond, time.Hour)
}

// At rate 10, a timeout of 1 s of the clock's time is 100 ms of the host's.
// A loaded machine wakes the timer late, by 100 ms and more, so the upper
// bound is what a WithTimeout on host time would take (1 s), not a guess at
// the scheduler's lateness; the rate applied twice (10 ms) fails the lower.
func TestWithTimeoutUsesClockTime(t *testing.T) {
	c := New()
	c.SetRate(10)
	start := time.Now()
	ctx, cancel := c.WithTimeout(context.Background(), time.Second)
	defer cancel()
	<-ctx.Done()
	within(t, "host time to the clock timeout", time.Since(start), 99*time.Millisecond, time.Second-time.Millisecond)
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
