// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stepValues are a rank step's gauge values, in seconds and scores.
type stepValues [numGauges]float64

func valuesOf(r *rankStep, s stepbusy.Score) stepValues {
	duration := seconds(r.End - r.Start)
	busy := seconds(s.Busy)
	return stepValues{
		gDuration:   duration,
		gBusy:       busy,
		gWait:       seconds(r.End - r.Start - s.Busy),
		gRelative:   stepbusy.Round3(s.Relative),
		gIndividual: stepbusy.Round3(s.Individual),
	}
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

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

// observe emits a rank step's points, or adds it to the rank's interval.
func (c *stepsConnector) observe(key steps.Rank, r *rankStep, s stepbusy.Score) {
	v := valuesOf(r, s)
	if c.interval <= 0 {
		for g, x := range v {
			c.out.gauge(gaugeID(g, vLast), r.labels, r.End, x)
		}
		return
	}
	a := c.aggs[key]
	first := a == nil
	if first {
		a = &rankAgg{}
		c.aggs[key] = a
	}
	a.labels = r.labels
	a.add(v, r.End, first)
}

// flush emits every rank's interval, last, min and max of each gauge, and
// the straggler counts of the runs that had steps in it.
func (c *stepsConnector) flush() {
	for key, a := range c.aggs {
		for g := range numGauges {
			for variant := range numVariants {
				c.out.gauge(gaugeID(g, variant), a.labels, a.last, a.vals[g][variant])
			}
		}
		delete(c.aggs, key)
	}
	c.runs.All(func(_ uint64, run *runCount) {
		if run.dirty {
			c.out.stragglers(run)
			run.dirty = false
		}
	})
}

// runCount is a run's cumulative count of straggler rank steps.
type runCount struct {
	service string
	group   []label
	count   int64
	// start is the start of the first step counted, last the end of the
	// latest: the Sum's start time and time.
	start, last int64
	dirty       bool
}

// countStragglers adds a decided step's stragglers to its run's count and,
// without interval, emits the count.
func (c *stepsConnector) countStragglers(group uint64, l *rankLabels, n, start, end int64) {
	run, ok := c.runs.Get(group)
	if !ok {
		run = &runCount{start: start}
		c.runs.Put(group, run)
	}
	run.service, run.group = l.service, l.group
	run.count += n
	run.last = max(run.last, end)
	run.dirty = true
	if c.interval <= 0 {
		c.out.stragglers(run)
		run.dirty = false
	}
}
