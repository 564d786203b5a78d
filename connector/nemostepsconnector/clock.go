package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import "time"

// clock is the connector's time source: the wall clock in the collector, a
// fake one in tests, which then decide steps without sleeping.
type clock interface {
	Now() time.Time
	NewTicker(every time.Duration) ticker
}

// ticker delivers the times at which the connector looks for steps to
// decide and intervals to flush.
type ticker interface {
	C() <-chan time.Time
	Stop()
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTicker(every time.Duration) ticker {
	return wallTicker{time.NewTicker(every)}
}

type wallTicker struct{ t *time.Ticker }

func (w wallTicker) C() <-chan time.Time { return w.t.C }
func (w wallTicker) Stop()               { w.t.Stop() }

// tickInterval is how often steps are looked at: a tenth of decision_wait
// (and of interval, when set), between 10ms and 1s, so that a complete step
// is emitted soon after its last rank reported.
func tickInterval(wait, interval time.Duration) time.Duration {
	every := wait / 10
	if interval > 0 {
		every = min(every, interval/10)
	}
	return min(max(every, 10*time.Millisecond), time.Second)
}
