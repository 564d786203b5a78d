// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stepMetrics turns the engine's decided steps into data points: per rank
// and step its duration, busy and wait time and scores (or, with interval,
// their last, smallest and largest value per interval), and per run the
// count of straggler rank steps. Called under the engine's lock.
type stepMetrics struct {
	thresholds stepbusy.Thresholds
	wait       time.Duration
	interval   time.Duration
	runs       *runTable
	out        *pointWriter
	aggs       map[steps.Rank]*rankAgg
	lastFlush  time.Time
}

// newStepMetrics counts intervals from start.
func newStepMetrics(cfg *Config, runs *runTable, out *pointWriter, start time.Time) *stepMetrics {
	return &stepMetrics{
		lastFlush:  start,
		thresholds: cfg.Thresholds(0),
		wait:       cfg.DecisionWait,
		interval:   cfg.Interval,
		runs:       runs,
		out:        out,
		aggs:       make(map[steps.Rank]*rankAgg),
	}
}

// decided emits (or aggregates) the points of every rank the step decided
// and counts its stragglers in the run.
func (m *stepMetrics) decided(d *steps.Decision[none]) {
	run := m.runs.get(d.Step.Group)
	if run == nil {
		return // forgotten since its step spans: too many runs
	}
	var stragglers, lastEnd int64
	var first *rankLabels
	for i := range d.Ranks {
		r := &d.Ranks[i]
		key := steps.Rank{Group: d.Step.Group, Rank: r.Score.Rank}
		labels := run.rank(r.Score.Rank)
		if labels == nil {
			continue // not kept: too many ranks
		}
		if first == nil {
			first = labels
		}
		if m.thresholds.Straggles(r.Score) {
			stragglers++
		}
		m.observe(key, labels, d.Step.Iteration, r)
		lastEnd = max(lastEnd, r.End)
	}
	if first != nil {
		m.countStragglers(run, first, stragglers, d.Ranks[0].Start, lastEnd)
	}
}

var _ feed = (*stepMetrics)(nil)

// stepValues are a rank step's gauge values, in seconds and scores.
type stepValues [numGauges]float64

func valuesOf(r *steps.RankStep) stepValues {
	s := r.Score
	return stepValues{
		gDuration:   seconds(r.End - r.Start),
		gBusy:       seconds(s.Busy),
		gWait:       seconds(r.End - r.Start - s.Busy),
		gRelative:   stepbusy.Round3(s.Relative),
		gIndividual: stepbusy.Round3(s.Individual),
	}
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// observe emits a rank step's points, or adds it to the rank's interval.
func (m *stepMetrics) observe(key steps.Rank, labels *rankLabels, iteration int64, r *steps.RankStep) {
	v := valuesOf(r)
	if m.interval <= 0 {
		m.out.stepGauges(labels, r.End, v, iteration, r)
		return
	}
	a := m.aggs[key]
	first := a == nil
	if first {
		a = &rankAgg{}
		m.aggs[key] = a
	}
	a.labels = labels
	a.add(v, r.End, first)
}

// resource and arrived: the step metrics come from decided steps only.
func (*stepMetrics) resource(*runState, *steps.Resource)                             {}
func (*stepMetrics) arrived(*runState, *steps.Resource, ptrace.Span, steps.StepSpan) {}

// tick flushes the interval when it is over, and at the last tick.
func (m *stepMetrics) tick(now time.Time, final bool, _ *tickOut) {
	if m.interval <= 0 {
		return
	}
	if final || now.Sub(m.lastFlush) >= m.interval {
		m.flush()
		m.lastFlush = now
	}
}

// rankAgg is a rank's steps over the current interval: per gauge the last,
// smallest and largest value.
type rankAgg struct {
	labels *rankLabels
	vals   [numGauges][numVariants]float64
	last   int64 // end of the latest step, the points' timestamp
}

func (a *rankAgg) add(v stepValues, end int64, first bool) {
	for g, x := range v {
		agg := &a.vals[g]
		if first {
			agg[vMin], agg[vMax] = x, x
		} else {
			agg[vMin], agg[vMax] = min(agg[vMin], x), max(agg[vMax], x)
		}
		// The latest step wins; a late rank's older step does not.
		if first || end >= a.last {
			agg[vLast] = x
		}
	}
	a.last = max(a.last, end)
}

// flush emits every rank's interval, last, min and max of each gauge, and
// the straggler counts of the runs that had steps in it.
func (m *stepMetrics) flush() {
	for key, a := range m.aggs {
		for g := range numGauges {
			for variant := range numVariants {
				m.out.gauge(gaugeID(g, variant), a.labels, a.last, a.vals[g][variant])
			}
		}
		delete(m.aggs, key)
	}
	m.runs.all(func(run *runState) {
		if c := run.stragglers; c != nil && c.dirty {
			m.out.stragglers(c)
			c.dirty = false
		}
	})
}

// countStragglers adds a decided step's stragglers to its run's count and,
// without interval, emits the count.
func (m *stepMetrics) countStragglers(run *runState, l *rankLabels, n, start, end int64) {
	if run.stragglers == nil {
		run.stragglers = &runCount{start: start}
	}
	c := run.stragglers
	c.service, c.group = l.service, l.group
	c.count += n
	c.last = max(c.last, end)
	c.dirty = true
	if m.interval <= 0 {
		m.out.stragglers(c)
		c.dirty = false
	}
}
