// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"math"
	"math/bits"
	"sync"
	"time"
)

// tally is what one worker saw; workers keep their own and are summed at the end.
type tally struct {
	requests, accepted, refused                int64
	itemsAccepted, itemsRefused, itemsRejected int64
	codes                                      map[string]int64
	latency                                    latencyHist
	firstSend, lastDone                        time.Time
}

func (t *tally) add(o tally) {
	t.requests += o.requests
	t.accepted += o.accepted
	t.refused += o.refused
	t.itemsAccepted += o.itemsAccepted
	t.itemsRefused += o.itemsRefused
	t.itemsRejected += o.itemsRejected
	for k, v := range o.codes {
		t.codes[k] += v
	}
	for i, n := range o.latency {
		t.latency[i] += n
	}
	if !o.firstSend.IsZero() && (t.firstSend.IsZero() || o.firstSend.Before(t.firstSend)) {
		t.firstSend = o.firstSend
	}
	if o.lastDone.After(t.lastDone) {
		t.lastDone = o.lastDone
	}
}

// schedule hands out request numbers. Request n is template n mod len(templates)
// in replay round n / len(templates). With a rate, requests are paced by a
// token bucket (as the generic cell rate algorithm): one request per interval,
// and after a stall at most burst worth of catch-up.
type schedule struct {
	mu       sync.Mutex
	sent     int64
	limit    int64 // requests to send at most (math.MaxInt64: no count)
	deadline time.Time
	interval time.Duration // 0: as fast as answered
	burst    time.Duration // bucket capacity, as time's worth of requests
	next     time.Time     // when the next request is due
}

// take returns the next request number and when to send it, or false when the run is over.
func (s *schedule) take() (int64, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.sent >= s.limit || !now.Before(s.deadline) {
		return 0, time.Time{}, false
	}
	at := now
	if s.interval > 0 {
		if earliest := now.Add(-s.burst); s.next.Before(earliest) {
			s.next = earliest
		}
		at = s.next
		if !at.Before(s.deadline) {
			return 0, time.Time{}, false
		}
		s.next = s.next.Add(s.interval)
	}
	n := s.sent
	s.sent++
	return n, at, true
}

// drive sends until the duration or count is reached or ctx ends.
func drive(ctx context.Context, o options, j job, templates []*template, ref int64, senders []sender) tally {
	per := int64(j.itemsPerRequest())
	s := &schedule{limit: math.MaxInt64}
	if o.count > 0 {
		s.limit = (o.count + per - 1) / per
	}
	start := time.Now()
	s.deadline = start.Add(o.duration)
	s.next = start
	if o.rate > 0 {
		s.interval = time.Duration(float64(per) / o.rate * float64(time.Second))
		// A second's worth of requests, and at least one per worker.
		s.burst = max(time.Second, time.Duration(o.inFlight())*s.interval)
	}
	// In-flight requests may outlive the deadline by at most one timeout.
	ctx, cancel := context.WithDeadline(ctx, s.deadline.Add(o.timeout))
	defer cancel()

	maxLen := 0
	for _, t := range templates {
		maxLen = max(maxLen, len(t.data))
	}
	// Iterations wrap around after this many rounds (tens of millions of steps).
	rounds := max(1, int64(maxIteration-o.startIteration)/int64(j.stepsPerRequest)-1)
	workers := o.inFlight()

	tallies := make([]tally, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			t := &tallies[w]
			t.codes = map[string]int64{}
			snd := senders[w%len(senders)]
			buf := make([]byte, 0, maxLen)
			for ctx.Err() == nil {
				n, at, ok := s.take()
				if !ok {
					return
				}
				if !sleepUntil(ctx, at) {
					return
				}
				tpl := templates[n%int64(len(templates))]
				round := n / int64(len(templates))
				now := time.Now()
				buf = tpl.render(buf, replay{
					mask:      j.hash(11, uint64(round)),
					shift:     now.UnixNano() - ref,
					iteration: int64(o.startIteration) + (round%rounds)*int64(j.stepsPerRequest),
				})
				if t.firstSend.IsZero() {
					t.firstSend = now
				}
				reqCtx, reqCancel := context.WithTimeout(ctx, o.timeout)
				out := snd.send(reqCtx, buf)
				reqCancel()
				done := time.Now()
				t.lastDone = done
				t.latency.record(done.Sub(now))
				t.requests++
				if out.code != "" {
					t.refused++
					t.itemsRefused += int64(tpl.items)
					t.codes[out.code]++
					if !sleepUntil(ctx, done.Add(o.errorBackoff)) {
						return
					}
					continue
				}
				t.accepted++
				t.itemsAccepted += int64(tpl.items) - out.rejected
				t.itemsRejected += out.rejected
				if out.rejected > 0 {
					t.codes["partial success"]++
				}
			}
		})
	}
	wg.Wait()
	total := tally{codes: map[string]int64{}}
	for i := range tallies {
		total.add(tallies[i])
	}
	return total
}

// sleepUntil waits until at; false when ctx ended first.
func sleepUntil(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// latencyHist counts request latencies in log-linear buckets: 8 per power of
// two of microseconds, so a percentile is within 12.5%.
type latencyHist [64 * 8]uint64

func latencyBucket(d time.Duration) int {
	us := uint64(max(d, 0)/time.Microsecond) + 1
	e := bits.Len64(us) - 1
	if e >= 3 {
		return e*8 + int(us>>(e-3))&7
	}
	return e*8 + int(us<<(3-e))&7
}

// upper is the largest latency that falls in bucket i.
func latencyUpper(i int) time.Duration {
	e, sub := i/8, i%8
	us := uint64(8+sub) >> (3 - min(e, 3)) // e < 3: one microsecond value per bucket
	if e >= 3 {
		us = (uint64(9+sub) << (e - 3)) - 1
	}
	return time.Duration(us-1) * time.Microsecond
}

func (h *latencyHist) record(d time.Duration) { h[latencyBucket(d)]++ }

// quantiles returns the latency at each quantile q (in [0,1]), rounded up to its bucket.
func (h *latencyHist) quantiles(qs ...float64) []time.Duration {
	var total uint64
	for _, n := range h {
		total += n
	}
	out := make([]time.Duration, len(qs))
	if total == 0 {
		return out
	}
	for k, q := range qs {
		want := uint64(math.Ceil(q * float64(total)))
		var seen uint64
		for i, n := range h {
			seen += n
			if seen >= want && n > 0 {
				out[k] = latencyUpper(i)
				break
			}
		}
	}
	return out
}

// report is the JSON the generator prints.
type report struct {
	Signal          string  `json:"signal"`
	Item            string  `json:"item"`
	Protocol        string  `json:"protocol"`
	Endpoint        string  `json:"endpoint"`
	Ranks           int     `json:"ranks"`
	ItemsPerStep    int     `json:"items_per_step"`
	ItemsPerRequest int     `json:"items_per_request"`
	Connections     int     `json:"connections"`
	Workers         int     `json:"workers"`
	TargetRate      float64 `json:"target_items_per_second"`
	Templates       int     `json:"templates"`
	TemplateBytes   int     `json:"template_bytes"`
	BuildSeconds    float64 `json:"build_seconds"`

	ElapsedSeconds   float64            `json:"elapsed_seconds"`
	RequestsSent     int64              `json:"requests_sent"`
	RequestsAccepted int64              `json:"requests_accepted"`
	RequestsRefused  int64              `json:"requests_refused"`
	ItemsAccepted    int64              `json:"items_accepted"`
	ItemsRefused     int64              `json:"items_refused"`
	ItemsRejected    int64              `json:"items_rejected_partial_success"`
	ItemsPerSecond   float64            `json:"accepted_items_per_second"`
	Errors           map[string]int64   `json:"errors"`
	LatencyMs        map[string]float64 `json:"latency_ms"`

	CPUSeconds           float64 `json:"cpu_seconds"`
	CPUSecondsPerMillion float64 `json:"cpu_seconds_per_million_items"`
}

func itemName(signal string) string {
	switch signal {
	case signalMetrics:
		return "data points"
	case signalLogs:
		return "log records"
	default:
		return "spans"
	}
}

func newReport(o options, j job, t tally, cpu, build time.Duration, templates, templateBytes int) report {
	elapsed := t.lastDone.Sub(t.firstSend).Seconds()
	r := report{
		Signal:           o.signal,
		Item:             itemName(o.signal),
		Protocol:         o.protocol,
		Endpoint:         o.endpoint,
		Ranks:            o.ranks,
		ItemsPerStep:     j.itemsPerStep(),
		ItemsPerRequest:  j.itemsPerRequest(),
		Connections:      o.conns,
		Workers:          o.inFlight(),
		TargetRate:       o.rate,
		Templates:        templates,
		TemplateBytes:    templateBytes,
		BuildSeconds:     build.Seconds(),
		ElapsedSeconds:   elapsed,
		RequestsSent:     t.requests,
		RequestsAccepted: t.accepted,
		RequestsRefused:  t.refused,
		ItemsAccepted:    t.itemsAccepted,
		ItemsRefused:     t.itemsRefused,
		ItemsRejected:    t.itemsRejected,
		Errors:           t.codes,
		CPUSeconds:       cpu.Seconds(),
	}
	if elapsed > 0 {
		r.ItemsPerSecond = float64(t.itemsAccepted) / elapsed
	}
	if t.itemsAccepted > 0 {
		r.CPUSecondsPerMillion = cpu.Seconds() / float64(t.itemsAccepted) * 1e6
	}
	names := []string{"p50", "p90", "p99", "max"}
	qs := t.latency.quantiles(0.5, 0.9, 0.99, 1)
	r.LatencyMs = make(map[string]float64, len(names))
	for i, n := range names {
		r.LatencyMs[n] = float64(qs[i].Microseconds()) / 1000
	}
	return r
}
