// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"cmp"
	"encoding/base64"
	"math"
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/goodput"
)

// The JSON of /api/runs and /api/runs/<key> (documented in the README).

// runSummary is a run in the list of runs.
type runSummary struct {
	Key           string   `json:"key"`
	ID            string   `json:"id"`
	Group         string   `json:"worker_group,omitempty"`
	Service       string   `json:"service,omitempty"`
	State         string   `json:"state"`
	StallKind     string   `json:"stall_kind,omitempty"`
	Ranks         int      `json:"ranks"`
	Steps         int      `json:"steps"`
	LastIteration *int64   `json:"last_iteration,omitempty"`
	LastStepSecs  *float64 `json:"last_step_seconds,omitempty"`
	LastStepEnd   string   `json:"last_step_end,omitempty"`
	Goodput       *float64 `json:"goodput,omitempty"`
	Updated       string   `json:"updated"`
	updated       time.Time
}

// runDetail is one run's page.
type runDetail struct {
	runSummary
	RanksOver     int             `json:"ranks_not_shown"`
	Thresholds    thresholdsJSON  `json:"thresholds"`
	RankList      []rankJSON      `json:"rank_list"`
	Iterations    []int64         `json:"iterations"`
	Heatmap       []string        `json:"heatmap"`
	StepTimes     []stepTimeJSON  `json:"step_times"`
	Stragglers    []stragglerJSON `json:"stragglers"`
	Stalls        []stallJSON     `json:"stalls"`
	GoodputDetail *goodputJSON    `json:"goodput_detail,omitempty"`
	// DeadLetters are the run's dead-letter files (Config.DeadLetterDirectory).
	DeadLetters []deadletter.File `json:"dead_letters,omitempty"`
}

type thresholdsJSON struct {
	Relative   float64 `json:"relative"`
	Individual float64 `json:"individual"`
}

type rankJSON struct {
	Rank int64  `json:"rank"`
	Host string `json:"host,omitempty"`
}

type stepTimeJSON struct {
	Iteration      int64   `json:"iteration"`
	MedianBusy     float64 `json:"median_busy_seconds"`
	SlowestBusy    float64 `json:"slowest_busy_seconds"`
	SlowestRank    int64   `json:"slowest_rank"`
	MedianDuration float64 `json:"median_duration_seconds"`
	Ranks          int     `json:"ranks"`
}

type stragglerJSON struct {
	Rank       int64   `json:"rank"`
	Host       string  `json:"host,omitempty"`
	Iteration  int64   `json:"iteration"`
	Relative   float64 `json:"relative_score"`
	Individual float64 `json:"individual_score"`
	Busy       float64 `json:"busy_seconds"`
}

type stallJSON struct {
	Kind      string   `json:"kind"`
	Iteration int64    `json:"iteration"`
	Ranks     []int64  `json:"culprit_ranks"`
	Hosts     []string `json:"culprit_hosts"`
	LostHosts []string `json:"lost_hosts,omitempty"`
	Stage     *int64   `json:"first_stage,omitempty"`
	Start     string   `json:"start"`
	End       string   `json:"end,omitempty"`
	Seconds   float64  `json:"seconds"`
	Ongoing   bool     `json:"ongoing"`
	Message   string   `json:"message"`
}

type goodputJSON struct {
	Goodput    float64        `json:"goodput"`
	Wall       float64        `json:"wall_seconds"`
	Attempts   int64          `json:"attempts"`
	Final      bool           `json:"final"`
	Live       bool           `json:"live"`
	Unsettled  float64        `json:"unsettled_seconds"`
	Categories []categoryJSON `json:"categories"`
	TopRanks   []topRankJSON  `json:"top_ranks"`
	Message    string         `json:"message"`
	At         string         `json:"at"`
}

type categoryJSON struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
}

type topRankJSON struct {
	Rank    int64   `json:"rank"`
	Host    string  `json:"host,omitempty"`
	Seconds float64 `json:"seconds"`
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// summaries lists the runs, updated most recently first.
func (s *store) summaries() []runSummary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]runSummary, 0, len(s.runs))
	for _, r := range s.runs {
		out = append(out, r.summary())
	}
	slices.SortFunc(out, func(a, b runSummary) int {
		return cmp.Or(b.updated.Compare(a.updated), cmp.Compare(a.Key, b.Key))
	})
	return out
}

func (r *run) summary() runSummary {
	sum := runSummary{Key: r.key, ID: r.id, Group: r.group, Service: r.service, Ranks: len(r.ranks), Steps: len(r.steps), Updated: stamp(r.updated), updated: r.updated}
	sum.State, sum.StallKind = r.state()
	if st := r.steps[r.lastIter]; st != nil {
		it := r.lastIter
		sum.LastIteration = &it
		d := median(st.cells, func(c cell) float32 { return c.duration })
		sum.LastStepSecs = &d
		sum.LastStepEnd = stamp(time.Unix(0, st.end))
	}
	if r.goodput != nil {
		g := r.goodput.goodput
		sum.Goodput = &g
	}
	return sum
}

// detail is the run of key, and whether there is one.
func (s *store) detail(key string) (runDetail, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[key]
	if r == nil {
		return runDetail{}, false
	}
	d := runDetail{
		runSummary: r.summary(),
		RanksOver:  r.ranksOver,
		Thresholds: thresholdsJSON{Relative: s.limits.stragglers.Relative, Individual: s.limits.stragglers.Individual},
	}
	// Rows in rank order; each iteration's cells in that order, as bytes
	// (0: no step; else 1 + relative score x 254), base64: a 1,000-rank
	// step is 1,336 characters.
	order := make([]int, len(r.ranks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(r.ranks[a].rank, r.ranks[b].rank) })
	for _, slot := range order {
		d.RankList = append(d.RankList, rankJSON{Rank: r.ranks[slot].rank, Host: r.ranks[slot].host})
	}
	for it := range r.steps {
		d.Iterations = append(d.Iterations, it)
	}
	slices.Sort(d.Iterations)
	row := make([]byte, len(order))
	for _, it := range d.Iterations {
		st := r.steps[it]
		for i, slot := range order {
			row[i] = 0
			if slot < len(st.cells) && st.cells[slot].present {
				row[i] = max(st.cells[slot].relative, 1)
			}
		}
		d.Heatmap = append(d.Heatmap, base64.StdEncoding.EncodeToString(row))
		d.StepTimes = append(d.StepTimes, stepTime(it, st, r.ranks))
	}
	for _, sg := range r.stragglers {
		d.Stragglers = append(d.Stragglers, stragglerJSON{Rank: sg.rank, Host: sg.host, Iteration: sg.iteration, Relative: sg.relative, Individual: sg.individual, Busy: round3(sg.busy)})
	}
	for i := range r.stalls {
		st := &r.stalls[i]
		sj := stallJSON{
			Kind: st.kind, Iteration: st.iteration, Ranks: st.ranks, Hosts: st.hosts, LostHosts: st.lostHosts,
			Start: stamp(st.start), End: stamp(st.end), Seconds: st.seconds, Ongoing: st.ongoing, Message: st.message,
		}
		if st.hasStage {
			stage := st.stage
			sj.Stage = &stage
		}
		if sj.Ranks == nil {
			sj.Ranks = []int64{}
		}
		if sj.Hosts == nil {
			sj.Hosts = []string{}
		}
		d.Stalls = append(d.Stalls, sj)
	}
	if g := r.goodput; g != nil {
		gj := &goodputJSON{Goodput: g.goodput, Wall: g.wall, Attempts: g.attempts, Final: g.final, Live: g.live, Unsettled: g.unsettled, Message: g.message, At: stamp(g.at), TopRanks: []topRankJSON{}}
		for c := range goodput.NumCategories {
			name := c.String()
			gj.Categories = append(gj.Categories, categoryJSON{Name: name, Seconds: g.categories[name]})
		}
		for _, t := range g.top {
			gj.TopRanks = append(gj.TopRanks, topRankJSON{Rank: t.rank, Host: t.host, Seconds: t.seconds})
		}
		d.GoodputDetail = gj
	}
	return d, true
}

// stepTime is an iteration's median and slowest rank.
func stepTime(it int64, st *step, ranks []rankInfo) stepTimeJSON {
	out := stepTimeJSON{Iteration: it}
	slowest := -1
	for slot, c := range st.cells {
		if !c.present {
			continue
		}
		out.Ranks++
		if slowest < 0 || c.busy > st.cells[slowest].busy {
			slowest = slot
		}
	}
	if slowest >= 0 {
		out.SlowestBusy = round3(float64(st.cells[slowest].busy))
		out.SlowestRank = ranks[slowest].rank
	}
	out.MedianBusy = round3(median(st.cells, func(c cell) float32 { return c.busy }))
	out.MedianDuration = round3(median(st.cells, func(c cell) float32 { return c.duration }))
	return out
}

// median of the present cells' values (the lower middle of an even count).
func median(cells []cell, value func(cell) float32) float64 {
	vals := make([]float32, 0, len(cells))
	for _, c := range cells {
		if c.present {
			vals = append(vals, value(c))
		}
	}
	if len(vals) == 0 {
		return 0
	}
	slices.Sort(vals)
	return float64(vals[(len(vals)-1)/2])
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
