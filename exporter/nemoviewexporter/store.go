// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"math"
	"sync"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
)

// limits bound what the store keeps.
type limits struct {
	runs, steps, ranks int
	// stragglers marks a rank step as a straggler, as nemo_steps does.
	stragglers stepbusy.Thresholds
	hosts      hostLimits
}

func limitsOf(cfg *Config) limits {
	return limits{
		runs: cfg.MaxRuns, steps: cfg.MaxSteps, ranks: cfg.MaxRanks,
		stragglers: stepbusy.Thresholds{Relative: cfg.RelativeThreshold, Individual: cfg.IndividualThreshold},
		hosts: hostLimits{
			window: cfg.Hosts.Window, maxHosts: cfg.Hosts.MaxHosts,
			drainRuns: cfg.Hosts.DrainAfterRuns, stragglerSteps: cfg.Hosts.StragglerStepsPerRun,
		},
	}
}

const (
	// maxStragglers and maxStalls bound a run's lists (the newest kept).
	maxStragglers = 200
	maxStalls     = 50
)

// store holds the runs the pages show. The pipelines write to it and the
// HTTP handlers read snapshots of it, under one lock.
type store struct {
	mu     sync.Mutex
	limits limits
	now    func() time.Time
	runs   map[string]*run
	// fleet is every host across the runs (/hosts).
	fleet *fleet
	// seq orders the kept ranks' updates (timeline.go).
	seq uint64
}

func newStore(l limits, now func() time.Time) *store {
	return &store{limits: l, now: now, runs: map[string]*run{}, fleet: newFleet()}
}

// run is one run (and worker group) as the pages show it.
type run struct {
	key     string
	id      string
	group   string
	service string
	updated time.Time
	// ranks by slot, the order they were first seen; slots by rank.
	ranks      []rankInfo
	slots      map[int64]int
	ranksOver  int // ranks beyond max_ranks (counted up to 3x max_ranks)
	steps      map[int64]*step
	lastIter   int64
	stragglers []stragglerStep
	stalls     []stallInfo
	stalled    bool
	goodput    *goodputInfo
	// kept are the spans kept of its ranks, for the step timelines.
	kept map[int64]*keptRank
}

type rankInfo struct {
	rank int64
	host string
}

// step is one iteration: a cell per rank slot.
type step struct {
	end   int64 // the latest rank step's end, Unix ns
	cells []cell
}

// cell is one rank's step: its busy time and step duration (seconds) and
// its relative score, quantized (0: no score; else 1 + score x 254).
type cell struct {
	busy, duration float32
	relative       uint8
	present        bool
}

func quantize(score float64) uint8 {
	return 1 + uint8(math.Round(math.Max(0, math.Min(1, score))*254))
}

type stragglerStep struct {
	rank, iteration      int64
	host                 string
	relative, individual float64
	busy                 float64
}

type stallInfo struct {
	kind             string
	iteration        int64
	ranks            []int64
	hosts, lostHosts []string
	stage            int64
	hasStage         bool
	start, end       time.Time
	seconds          float64
	message          string
	ongoing          bool
}

type goodputInfo struct {
	goodput    float64
	categories map[string]float64
	wall       float64
	// live says the figures are the metrics' of the latest tick, newer
	// than the last record; unsettled is the part of the wall time not
	// settled into a category yet (live only).
	live      bool
	unsettled float64
	attempts  int64
	final     bool
	top       []topRank
	message   string
	at        time.Time
}

type topRank struct {
	rank    int64
	host    string
	seconds float64
}

// runFor returns the run of key, creating it (and evicting the run updated
// longest ago when there are too many). Called under the lock.
func (s *store) runFor(key, id, group, service string) *run {
	r := s.runs[key]
	if r == nil {
		if len(s.runs) >= s.limits.runs {
			var oldest *run
			for _, o := range s.runs {
				if oldest == nil || o.updated.Before(oldest.updated) {
					oldest = o
				}
			}
			delete(s.runs, oldest.key)
			s.fleet.forget(oldest.key)
		}
		r = &run{key: key, id: id, group: group, slots: map[int64]int{}, steps: map[int64]*step{}, lastIter: math.MinInt64}
		s.runs[key] = r
	}
	if service != "" {
		r.service = service
	}
	r.updated = s.now()
	return r
}

// rankStep is what the step gauges say of one rank's step.
type rankStep struct {
	rank, iteration      int64
	host                 string
	end                  int64
	busy, duration       float64
	relative, individual float64
	hasRel               bool
}

// addStep records one rank's step. Called under the lock.
func (s *store) addStep(r *run, rs *rankStep) {
	slot, ok := r.slots[rs.rank]
	if !ok {
		if len(r.ranks) >= s.limits.ranks {
			// Remembered (to count each rank once) up to 4x max_ranks:
			// rank numbers from a sender cannot grow the map for ever.
			if len(r.slots) < 4*s.limits.ranks {
				r.ranksOver++
				r.slots[rs.rank] = -1
			}
			return
		}
		slot = len(r.ranks)
		r.slots[rs.rank] = slot
		r.ranks = append(r.ranks, rankInfo{rank: rs.rank})
	}
	if slot < 0 {
		return // beyond max_ranks
	}
	if rs.host != "" {
		r.ranks[slot].host = rs.host
	}
	st := r.steps[rs.iteration]
	if st == nil {
		if len(r.steps) >= s.limits.steps {
			oldest := rs.iteration
			for it := range r.steps {
				oldest = min(oldest, it)
			}
			if oldest == rs.iteration {
				return // older than every step kept
			}
			delete(r.steps, oldest)
		}
		st = &step{}
		r.steps[rs.iteration] = st
	}
	for len(st.cells) <= slot {
		st.cells = append(st.cells, cell{})
	}
	fresh := !st.cells[slot].present // not a rank step sent again
	c := cell{busy: float32(rs.busy), duration: float32(rs.duration), present: true}
	if rs.hasRel {
		c.relative = quantize(rs.relative)
	}
	st.cells[slot] = c
	st.end = max(st.end, rs.end)
	r.lastIter = max(r.lastIter, rs.iteration)
	straggles := s.straggles(rs)
	if fresh {
		s.fleet.step(r.ranks[slot].host, r.key, straggles, r.updated, s.limits.hosts)
	}
	if straggles {
		r.stragglers = append(r.stragglers, stragglerStep{
			rank: rs.rank, iteration: rs.iteration, host: r.ranks[slot].host,
			relative: rs.relative, individual: rs.individual, busy: rs.busy,
		})
		if len(r.stragglers) > maxStragglers {
			r.stragglers = r.stragglers[len(r.stragglers)-maxStragglers:]
		}
	}
}

// straggles reports whether a rank step scored below a threshold, as
// nemo_steps counts it (nemo.step.stragglers). A score the points do not
// carry is 1: never below a threshold.
func (s *store) straggles(rs *rankStep) bool {
	return s.limits.stragglers.Straggles(stepbusy.Score{Busy: int64(rs.busy * 1e9), Relative: rs.relative, Individual: rs.individual})
}

// state is a run's state on the pages.
func (r *run) state() (state, kind string) {
	switch {
	case r.goodput != nil && r.goodput.final:
		return "ended", ""
	case r.stalled && len(r.stalls) > 0:
		k := r.stalls[len(r.stalls)-1].kind
		if k == "paused" {
			return "paused", k
		}
		return "stalled", k
	default:
		return "training", ""
	}
}
