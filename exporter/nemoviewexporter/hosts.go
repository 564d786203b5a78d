// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// The fleet's hosts: what each host cost the runs it ran in, over every
// run this collector saw within a window of time (HostsConfig.Window),
// from what the pages already read: the step gauges (its rank-steps and
// straggler steps, with the rank's host.name), the ranks' straggler time
// (nemo.rank.straggler_time) and the stall records (culprit and lost
// hosts, and how long the stall lasted). A few bad hosts (a slow link, a
// throttling GPU, a flaky NIC) show up as the same culprit run after run;
// the drain list names the hosts that cost at least DrainAfterRuns runs
// in the window, for a scheduler to read.
//
// The counts are kept in numBuckets buckets per window, so that what is
// older than the window drops out bucket by bucket; at most MaxHosts
// hosts are tracked. Exported fields: the fleet is saved as it is (gob).

// numBuckets is how many buckets a window has.
const numBuckets = 24

// maxHostRuns bounds the runs remembered per host (the most recent): a
// host counts the runs it cost among them.
const maxHostRuns = 32

type fleet struct {
	Hosts map[string]*hostStats
	// Untracked are the hosts seen beyond max_hosts (up to max_hosts of
	// them: the page then says "at least").
	Untracked map[string]bool
	// Straggler is the last nemo.rank.straggler_time of each run's ranks
	// (cumulative), to add what it grew by.
	Straggler map[string]map[int64]float64
	// changed says it changed since it was last saved.
	changed bool
}

// hostLimits bound the fleet and set its window and drain thresholds.
type hostLimits struct {
	window         time.Duration
	maxHosts       int
	drainRuns      int
	stragglerSteps int64
}

type hostStats struct {
	Buckets []hostBucket
	// Runs are the runs it ran in, by run key, with what it cost each.
	Runs     map[string]*hostRun
	LastSeen time.Time
}

// hostBucket counts one stretch of time (window / numBuckets from Start).
type hostBucket struct {
	Start                            time.Time
	RankSteps, StragglerSteps        int64
	StragglerSeconds, StalledSeconds float64
	Culprit, Lost                    int64
}

// hostRun is what a host did in one run: its straggler steps, whether it
// was a stall's culprit or lost, and when it was last seen in it.
type hostRun struct {
	StragglerSteps int64
	Culprit, Lost  bool
	Last           time.Time
}

func newFleet() *fleet {
	return &fleet{Hosts: map[string]*hostStats{}, Untracked: map[string]bool{}, Straggler: map[string]map[int64]float64{}}
}

// host is the stats of name, created if there is room; nil otherwise.
func (f *fleet) host(name string, l hostLimits) *hostStats {
	if name == "" {
		return nil
	}
	f.changed = true
	h := f.Hosts[name]
	if h == nil {
		if len(f.Hosts) >= l.maxHosts {
			if len(f.Untracked) < l.maxHosts {
				f.Untracked[name] = true
			}
			return nil
		}
		h = &hostStats{Runs: map[string]*hostRun{}}
		f.Hosts[name] = h
	}
	return h
}

// bucket is the bucket of now, and the run's record.
func (h *hostStats) at(now time.Time, run string, l hostLimits) (*hostBucket, *hostRun) {
	width := l.window / numBuckets
	if n := len(h.Buckets); n == 0 || !now.Before(h.Buckets[n-1].Start.Add(width)) {
		// A new stretch of time: what left the window goes (report
		// expires too, so that a host seen no more drops out of the page).
		h.expire(now, l)
		h.Buckets = append(h.Buckets, hostBucket{Start: now.Truncate(width)})
	}
	h.LastSeen = now
	hr := h.Runs[run]
	if hr == nil {
		if len(h.Runs) >= maxHostRuns {
			oldest := ""
			for k, r := range h.Runs {
				if oldest == "" || r.Last.Before(h.Runs[oldest].Last) {
					oldest = k
				}
			}
			delete(h.Runs, oldest)
		}
		hr = &hostRun{}
		h.Runs[run] = hr
	}
	hr.Last = now
	return &h.Buckets[len(h.Buckets)-1], hr
}

// expire drops the buckets and runs older than the window.
func (h *hostStats) expire(now time.Time, l hostLimits) {
	from := now.Add(-l.window)
	i := 0
	for i < len(h.Buckets) && !h.Buckets[i].Start.Add(l.window/numBuckets).After(from) {
		i++
	}
	h.Buckets = h.Buckets[i:]
	maps.DeleteFunc(h.Runs, func(_ string, r *hostRun) bool { return r.Last.Before(from) })
}

// step counts one rank-step of run on host.
func (f *fleet) step(host, run string, straggler bool, now time.Time, l hostLimits) {
	h := f.host(host, l)
	if h == nil {
		return
	}
	b, hr := h.at(now, run, l)
	b.RankSteps++
	if straggler {
		b.StragglerSteps++
		hr.StragglerSteps++
	}
}

// stragglerTime takes a rank's cumulative straggler time in run: what it
// grew by is the host's (all of it after a reset: nemo_steps restarted).
func (f *fleet) stragglerTime(host, run string, rank int64, seconds float64, now time.Time, l hostLimits) {
	last := f.Straggler[run]
	if last == nil {
		last = map[int64]float64{}
		f.Straggler[run] = last
	}
	grew := seconds - last[rank]
	if grew < 0 {
		grew = seconds
	}
	last[rank] = seconds
	if h := f.host(host, l); h != nil && grew > 0 {
		b, _ := h.at(now, run, l)
		b.StragglerSeconds += grew
	}
}

// stall counts a stall of run: its culprit hosts and its lost ones.
func (f *fleet) stall(run string, culprits, lost []string, now time.Time, l hostLimits) {
	for _, name := range culprits {
		if h := f.host(name, l); h != nil {
			b, hr := h.at(now, run, l)
			b.Culprit++
			hr.Culprit = true
		}
	}
	for _, name := range lost {
		if h := f.host(name, l); h != nil {
			b, hr := h.at(now, run, l)
			b.Lost++
			hr.Lost = true
		}
	}
}

// stalled adds a stall's length to its culprit hosts' cost once it ended.
func (f *fleet) stalled(run string, culprits []string, seconds float64, now time.Time, l hostLimits) {
	for _, name := range culprits {
		if h := f.host(name, l); h != nil {
			b, _ := h.at(now, run, l)
			b.StalledSeconds += seconds
		}
	}
}

// forget drops a run's straggler totals (the run left the pages).
func (f *fleet) forget(run string) { delete(f.Straggler, run) }

// hostJSON is one host on /hosts and /api/hosts, over the window.
type hostJSON struct {
	Host             string   `json:"host"`
	Runs             int      `json:"runs"`
	CostlyRuns       int      `json:"costly_runs"`
	RankSteps        int64    `json:"rank_steps"`
	StragglerSteps   int64    `json:"straggler_steps"`
	StragglerShare   float64  `json:"straggler_share"`
	StragglerSeconds float64  `json:"straggler_seconds"`
	StalledSeconds   float64  `json:"stalled_seconds"`
	CostSeconds      float64  `json:"cost_seconds"`
	CulpritStalls    int64    `json:"culprit_stalls"`
	Lost             int64    `json:"lost"`
	LastSeen         string   `json:"last_seen"`
	Drain            bool     `json:"drain"`
	Reasons          []string `json:"reasons,omitempty"`
}

// hostsJSON is /api/hosts.
type hostsJSON struct {
	WindowSeconds float64         `json:"window_seconds"`
	Thresholds    drainThresholds `json:"drain_thresholds"`
	Hosts         []hostJSON      `json:"hosts"`
	Drain         []hostJSON      `json:"drain"`
	Untracked     int             `json:"hosts_not_tracked"`
}

type drainThresholds struct {
	Runs           int   `json:"costly_runs"`
	StragglerSteps int64 `json:"straggler_steps_per_run"`
}

// report is every host within the window at now, the costliest first,
// and the drain list.
func (f *fleet) report(now time.Time, l hostLimits) hostsJSON {
	out := hostsJSON{
		WindowSeconds: l.window.Seconds(), Untracked: len(f.Untracked), Hosts: []hostJSON{}, Drain: []hostJSON{},
		Thresholds: drainThresholds{Runs: l.drainRuns, StragglerSteps: l.stragglerSteps},
	}
	for name, h := range f.Hosts {
		h.expire(now, l)
		if len(h.Buckets) == 0 {
			continue
		}
		hj := hostJSON{Host: name, Runs: len(h.Runs), LastSeen: stamp(h.LastSeen)}
		for _, b := range h.Buckets {
			hj.RankSteps += b.RankSteps
			hj.StragglerSteps += b.StragglerSteps
			hj.StragglerSeconds += b.StragglerSeconds
			hj.StalledSeconds += b.StalledSeconds
			hj.CulpritStalls += b.Culprit
			hj.Lost += b.Lost
		}
		if hj.RankSteps > 0 {
			hj.StragglerShare = float64(hj.StragglerSteps) / float64(hj.RankSteps)
		}
		hj.CostSeconds = hj.StragglerSeconds + hj.StalledSeconds
		var straggled, culprit, lost int
		for _, r := range h.Runs {
			s := r.StragglerSteps >= l.stragglerSteps
			if s {
				straggled++
			}
			if r.Culprit {
				culprit++
			}
			if r.Lost {
				lost++
			}
			if s || r.Culprit || r.Lost {
				hj.CostlyRuns++
			}
		}
		if hj.CostlyRuns >= l.drainRuns {
			hj.Drain = true
			hj.Reasons = costReasons(straggled, culprit, lost, l)
		}
		out.Hosts = append(out.Hosts, hj)
	}
	slices.SortFunc(out.Hosts, func(a, b hostJSON) int {
		return cmp.Or(cmp.Compare(b.CostSeconds, a.CostSeconds), cmp.Compare(b.CostlyRuns, a.CostlyRuns), strings.Compare(a.Host, b.Host))
	})
	for i := range out.Hosts {
		if out.Hosts[i].Drain {
			out.Drain = append(out.Drain, out.Hosts[i])
		}
	}
	return out
}

// costReasons says why a host is on the drain list.
func costReasons(straggled, culprit, lost int, l hostLimits) []string {
	var out []string
	if straggled > 0 {
		out = append(out, fmt.Sprintf("a straggler (%d or more straggler steps) in %d runs", l.stragglerSteps, straggled))
	}
	if culprit > 0 {
		out = append(out, fmt.Sprintf("the culprit of a stall in %d runs", culprit))
	}
	if lost > 0 {
		out = append(out, fmt.Sprintf("lost (sent nothing while its run stalled) in %d runs", lost))
	}
	return out
}

// hosts is the fleet's page now.
func (s *store) hosts() hostsJSON {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fleet.report(s.now(), s.limits.hosts)
}
