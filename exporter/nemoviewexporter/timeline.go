// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"time"
	"unique"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// A step as a timeline: the spans the collector kept of an iteration (the
// export rank's, a straggler's whole step, error spans), rank by rank,
// from the traces pipeline after rank_strategy. Each run keeps, for at
// most maxKeptRanks ranks (the latest to send spans), the last
// maxRankSpans spans of each and where its step spans of those
// iterations began and ended; a span belongs to the iteration whose step
// span of its rank covers it.

const (
	maxKeptRanks = 32
	maxRankSpans = 4096
)

// keptSpan is one span as the timeline draws it.
type keptSpan struct {
	name       unique.Handle[string]
	start, end int64
	id, parent pcommon.SpanID
	err        bool
}

// keptRank is what a run keeps of one rank's spans.
type keptRank struct {
	rank    int64
	host    string
	spans   []keptSpan
	steps   map[int64]stepExtent
	touched uint64
}

type stepExtent struct {
	start, end int64
	reason     string
}

// stepSpans are Megatron-LM's step spans, nemo_steps' default
// step_span_names and iteration_attribute (one definition: internal/steps).
var stepSpans = steps.DefaultSpans()

// addTraces takes the spans of a batch. Called without the lock.
func (s *store) addTraces(td ptrace.Traces) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range td.ResourceSpans().All() {
		res := rs.Resource().Attributes()
		id, ok := identityOf(res, res)
		if !ok {
			continue
		}
		rank, _, status := rankattr.Lookup(res, rankKeys)
		if status != rankattr.Valid {
			continue
		}
		// The kept spans come before the run's step metrics (those wait
		// for the step's decision): a step span of theirs makes the run;
		// spans of no step (no training loop) do not.
		r := s.runs[id.key()]
		if r == nil {
			if !hasStepSpan(rs) {
				continue
			}
			r = s.runFor(id.key(), id.id, id.group, str(res, attrkey.ServiceName))
		}
		kr := r.keptRank(rank, str(res, attrkey.HostName), &s.seq)
		for _, ss := range rs.ScopeSpans().All() {
			for _, sp := range ss.Spans().All() {
				kr.add(sp)
			}
		}
	}
}

// hasStepSpan says rs holds a step span with its iteration.
func hasStepSpan(rs ptrace.ResourceSpans) bool {
	for _, ss := range rs.ScopeSpans().All() {
		for _, sp := range ss.Spans().All() {
			if _, ok := sp.Attributes().Get(stepSpans.IterationAttribute); ok && slices.Contains(stepSpans.StepSpanNames, sp.Name()) {
				return true
			}
		}
	}
	return false
}

// keptRank is rank's record, made room for.
func (r *run) keptRank(rank int64, host string, seq *uint64) *keptRank {
	*seq++
	kr := r.kept[rank]
	if kr == nil {
		if len(r.kept) >= maxKeptRanks {
			var oldest *keptRank
			for _, k := range r.kept {
				if oldest == nil || k.touched < oldest.touched {
					oldest = k
				}
			}
			delete(r.kept, oldest.rank)
		}
		if r.kept == nil {
			r.kept = map[int64]*keptRank{}
		}
		kr = &keptRank{rank: rank, steps: map[int64]stepExtent{}}
		r.kept[rank] = kr
	}
	if host != "" {
		kr.host = host
	}
	kr.touched = *seq
	return kr
}

func (kr *keptRank) add(sp ptrace.Span) {
	start, end := int64(sp.StartTimestamp()), int64(sp.EndTimestamp())
	if slices.Contains(stepSpans.StepSpanNames, sp.Name()) {
		if v, ok := sp.Attributes().Get(stepSpans.IterationAttribute); ok {
			if it, ok := rankattr.Parse(v); ok {
				kr.steps[it] = stepExtent{start: start, end: end, reason: str(sp.Attributes(), attrkey.KeptReason)}
			}
		}
	}
	if len(kr.spans) >= maxRankSpans {
		kr.spans = slices.Delete(kr.spans, 0, maxRankSpans/4)
		oldest := kr.spans[0].start
		for _, s := range kr.spans {
			oldest = min(oldest, s.start)
		}
		for it, e := range kr.steps {
			if e.end < oldest {
				delete(kr.steps, it)
			}
		}
	}
	kr.spans = append(kr.spans, keptSpan{
		name: unique.Make(sp.Name()), start: start, end: end,
		id: sp.SpanID(), parent: sp.ParentSpanID(), err: sp.Status().Code() == ptrace.StatusCodeError,
	})
}

// timelineJSON is /api/runs/<key>/steps/<iteration>: the iteration as a
// timeline, times in milliseconds from the step's start.
type timelineJSON struct {
	Run       string        `json:"run"`
	Iteration int64         `json:"iteration"`
	Start     string        `json:"start"`
	Rows      []timelineRow `json:"rows"`
}

// timelineRow is a rank: its spans (kept ranks), or its step's busy and
// waiting time only (the median rank, from its step metrics).
type timelineRow struct {
	Rank     int64          `json:"rank"`
	Host     string         `json:"host,omitempty"`
	Role     string         `json:"role"`
	BusyMs   float64        `json:"busy_ms"`
	StepMs   float64        `json:"step_ms"`
	Spans    []timelineSpan `json:"spans"`
	FromStep bool           `json:"from_step_metrics"`
}

type timelineSpan struct {
	Name    string  `json:"name"`
	StartMs float64 `json:"start_ms"`
	EndMs   float64 `json:"end_ms"`
	Depth   int     `json:"depth"`
	Error   bool    `json:"error,omitempty"`
}

// timeline is iteration of run key as a timeline: the slowest rank (the
// straggler), the export rank and the other ranks whose spans were kept,
// and the median rank by busy time, from its step metrics.
func (s *store) timeline(key string, iteration int64) (timelineJSON, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runs[key]
	if r == nil {
		return timelineJSON{}, false
	}
	st := r.steps[iteration]
	out := timelineJSON{Run: key, Iteration: iteration, Rows: []timelineRow{}}
	var origin int64
	for _, kr := range r.kept {
		if e, ok := kr.steps[iteration]; ok && (origin == 0 || e.start < origin) {
			origin = e.start
		}
	}
	if st == nil && origin == 0 {
		return timelineJSON{}, false
	}
	slowest, median := -1, -1
	var byBusy []int
	if st != nil {
		byBusy = bySpeed(st.cells)
		if len(byBusy) > 0 {
			slowest, median = byBusy[len(byBusy)-1], byBusy[len(byBusy)/2]
		}
		if origin == 0 {
			// No span kept of it: the step metrics' end and the median's
			// duration place it.
			origin = st.end - int64(float64(st.cells[median].duration)*1e9)
		}
	}
	ms := func(ns int64) float64 { return float64(ns-origin) / 1e6 }
	for _, kr := range r.kept {
		e, ok := kr.steps[iteration]
		if !ok {
			continue
		}
		row := timelineRow{Rank: kr.rank, Host: kr.host, Role: roleOf(e.reason), StepMs: float64(e.end-e.start) / 1e6, Spans: []timelineSpan{}}
		if slot, ok := r.slots[kr.rank]; ok && slot >= 0 && st != nil && slot < len(st.cells) && st.cells[slot].present {
			row.BusyMs = float64(st.cells[slot].busy) * 1e3
		}
		depth := map[pcommon.SpanID]int{}
		within := make([]keptSpan, 0, 128)
		for _, sp := range kr.spans {
			if sp.start >= e.start && sp.end <= e.end {
				within = append(within, sp)
			}
		}
		sort.SliceStable(within, func(i, j int) bool {
			return within[i].start < within[j].start || within[i].start == within[j].start && within[i].end > within[j].end
		})
		for _, sp := range within {
			d := 0
			if pd, ok := depth[sp.parent]; ok {
				d = pd + 1
			}
			depth[sp.id] = d
			row.Spans = append(row.Spans, timelineSpan{Name: sp.name.Value(), StartMs: ms(sp.start), EndMs: ms(sp.end), Depth: d, Error: sp.err})
		}
		out.Rows = append(out.Rows, row)
	}
	if st != nil {
		shown := func(slot int) bool {
			return slices.ContainsFunc(out.Rows, func(row timelineRow) bool { return row.Rank == r.ranks[slot].rank })
		}
		median = nearestMedian(byBusy, shown)
		for _, slot := range []int{slowest, median} {
			if slot < 0 || shown(slot) {
				continue
			}
			c := st.cells[slot]
			out.Rows = append(out.Rows, timelineRow{
				Rank: r.ranks[slot].rank, Host: r.ranks[slot].host, BusyMs: float64(c.busy) * 1e3, StepMs: float64(c.duration) * 1e3,
				Spans: []timelineSpan{}, FromStep: true,
			})
		}
		for i := range out.Rows {
			switch rank := out.Rows[i].Rank; {
			case slowest >= 0 && rank == r.ranks[slowest].rank:
				out.Rows[i].Role = "straggler"
			case median >= 0 && rank == r.ranks[median].rank:
				out.Rows[i].Role = "median"
			}
		}
	}
	order := map[string]int{"straggler": 0, "export": 1, "median": 2}
	slices.SortFunc(out.Rows, func(a, b timelineRow) int {
		oa, ok := order[a.Role]
		if !ok {
			oa = 3
		}
		ob, ok := order[b.Role]
		if !ok {
			ob = 3
		}
		return cmp.Or(cmp.Compare(oa, ob), cmp.Compare(a.Rank, b.Rank))
	})
	out.Start = stamp(timeOf(origin))
	return out, true
}

// roleOf names a kept rank by why its step was kept.
func roleOf(reason string) string {
	switch reason {
	case "":
		return "export"
	case attrkey.KeptStraggler:
		return "straggler"
	default:
		return reason
	}
}

// bySpeed are the slots of the ranks that reported the step, by busy
// time, the fastest first.
func bySpeed(cells []cell) []int {
	var present []int
	for i, c := range cells {
		if c.present {
			present = append(present, i)
		}
	}
	slices.SortStableFunc(present, func(a, b int) int { return cmp.Compare(cells[a].busy, cells[b].busy) })
	return present
}

// nearestMedian is the slot nearest the median of byBusy that is not shown
// yet (a rank beside the straggler and the export rank); -1 when none.
func nearestMedian(byBusy []int, shown func(int) bool) int {
	m := len(byBusy) / 2
	for d := range len(byBusy) {
		for _, i := range []int{m - d, m + d} {
			if i >= 0 && i < len(byBusy)-1 && !shown(byBusy[i]) { // never the slowest
				return byBusy[i]
			}
		}
	}
	return -1
}

// traceEvent is one event of the Chrome trace-event format, which
// Perfetto and chrome://tracing open: complete events (ph X) in
// microseconds, one thread per rank, named by metadata events (ph M).
type traceEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int64          `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

type traceFile struct {
	TraceEvents     []traceEvent `json:"traceEvents"`
	DisplayTimeUnit string       `json:"displayTimeUnit"`
}

// chromeTrace is the timeline in the Chrome trace-event format.
func (tl timelineJSON) chromeTrace() traceFile {
	out := traceFile{DisplayTimeUnit: "ms", TraceEvents: []traceEvent{{
		Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "run " + tl.Run + ", iteration " + itoa(tl.Iteration) + " (from " + tl.Start + ")"},
	}}}
	for i, row := range tl.Rows {
		label := "rank " + itoa(row.Rank)
		if row.Host != "" {
			label += " on " + row.Host
		}
		if row.Role != "" {
			label += " (" + row.Role + ")"
		}
		out.TraceEvents = append(out.TraceEvents,
			traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: row.Rank, Args: map[string]any{"name": label}},
			traceEvent{Name: "thread_sort_index", Ph: "M", Pid: 1, Tid: row.Rank, Args: map[string]any{"sort_index": i}})
		if row.FromStep {
			out.TraceEvents = append(out.TraceEvents,
				traceEvent{Name: "busy (step metrics)", Ph: "X", Pid: 1, Tid: row.Rank, Ts: 0, Dur: row.BusyMs * 1e3},
				traceEvent{Name: "waiting (step metrics)", Ph: "X", Pid: 1, Tid: row.Rank, Ts: row.BusyMs * 1e3, Dur: (row.StepMs - row.BusyMs) * 1e3})
			continue
		}
		for _, sp := range row.Spans {
			ev := traceEvent{Name: sp.Name, Ph: "X", Pid: 1, Tid: row.Rank, Ts: sp.StartMs * 1e3, Dur: (sp.EndMs - sp.StartMs) * 1e3}
			if sp.Error {
				ev.Args = map[string]any{"error": true}
			}
			out.TraceEvents = append(out.TraceEvents, ev)
		}
	}
	return out
}

func timeOf(ns int64) time.Time { return time.Unix(0, ns) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
