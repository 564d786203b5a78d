package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import "time"

// clock is the time source of the held spans: the wall clock in the
// collector, a fake one in tests, which then expire held spans without
// sleeping.
type clock interface {
	Now() time.Time
	NewTicker(every time.Duration) ticker
}

// ticker delivers the times at which held spans whose decision_wait is over
// are passed on.
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
