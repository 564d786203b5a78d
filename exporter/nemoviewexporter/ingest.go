// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/goodput"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// runIdentity is a run as the pages key it: its id and worker group (NeMo-RL
// numbers ranks per worker group, as nemo_steps compares them).
type runIdentity struct{ id, group string }

func (r runIdentity) key() string {
	if r.group == "" {
		return r.id
	}
	return r.id + "@" + r.group
}

func identityOf(attrs, resource pcommon.Map) (runIdentity, bool) {
	var id runIdentity
	for _, m := range []pcommon.Map{attrs, resource} {
		if id.id == "" {
			id.id = str(m, attrkey.RunID)
		}
		if id.group == "" {
			id.group = str(m, attrkey.WorkerGroup)
		}
	}
	return id, id.id != ""
}

func str(m pcommon.Map, key string) string {
	if v, ok := m.Get(key); ok {
		return v.AsString()
	}
	return ""
}

func number(v pcommon.Value) float64 {
	switch v.Type() {
	case pcommon.ValueTypeDouble:
		return v.Double()
	case pcommon.ValueTypeInt:
		return float64(v.Int())
	default:
		return 0
	}
}

// stepGauge is which of a rank step's values a gauge carries.
type stepGauge uint8

const (
	gaugeNone stepGauge = iota
	gaugeBusy
	gaugeDuration
	gaugeRelative
	gaugeIndividual
)

func gaugeOf(name string) stepGauge {
	switch name {
	case runrecords.StepBusyTime:
		return gaugeBusy
	case runrecords.StepDuration:
		return gaugeDuration
	case runrecords.StepRelativeScore:
		return gaugeRelative
	case runrecords.StepIndividualScore:
		return gaugeIndividual
	default:
		return gaugeNone
	}
}

// pointKey ties a rank step's gauges together: nemo_steps stamps the five
// gauges of a rank step with the same run, rank and time, in one batch.
type pointKey struct {
	run  string
	rank int64
	ts   pcommon.Timestamp
}

// gaugeBatch gathers a batch's rank steps from their gauges, in arrival
// order (steps), before they are taken under the store's lock; index has
// each one's place in steps.
type gaugeBatch struct {
	index map[pointKey]int32
	steps []pendingStep
}

// newGaugeBatch makes room for the rank steps of points data points: the
// first and the last can have some of their gauges in the request before or
// after.
func newGaugeBatch(points int) gaugeBatch {
	n := points/runrecords.RankStepGauges + 2
	return gaugeBatch{index: make(map[pointKey]int32, n), steps: make([]pendingStep, 0, n)}
}

type pendingStep struct {
	run     string // id.key()
	id      runIdentity
	service string
	step    rankStep
	hasIter bool
}

// rankKeys are where nemo_steps puts a point's rank (its default rank_keys).
var rankKeys = []string{attrkey.DLRank, attrkey.LegacyDLRank}

// add takes one data point of gauge g.
func (b *gaugeBatch) add(g stepGauge, dp pmetric.NumberDataPoint, resource pcommon.Map, service string) {
	attrs := dp.Attributes()
	id, ok := identityOf(attrs, resource)
	if !ok {
		return
	}
	rank, _, status := rankattr.Lookup(attrs, rankKeys)
	if status != rankattr.Valid {
		return
	}
	key := pointKey{run: id.key(), rank: rank, ts: dp.Timestamp()}
	i, ok := b.index[key]
	if !ok {
		i = int32(len(b.steps))
		b.index[key] = i
		b.steps = append(b.steps, pendingStep{run: key.run, id: id, service: service, step: rankStep{rank: rank, end: int64(dp.Timestamp()), relative: 1, individual: 1}})
	}
	ps := &b.steps[i]
	if h := str(attrs, attrkey.HostName); h != "" {
		ps.step.host = h
	}
	v := pointValue(dp)
	switch g {
	case gaugeBusy:
		ps.step.busy = v
		if dp.Exemplars().Len() > 0 {
			if it, ok := dp.Exemplars().At(0).FilteredAttributes().Get(runrecords.StepIteration); ok {
				ps.step.iteration, ps.hasIter = rankattr.Parse(it)
			}
		}
	case gaugeDuration:
		ps.step.duration = v
	case gaugeRelative:
		ps.step.relative, ps.step.hasRel = v, true
	case gaugeIndividual:
		ps.step.individual = v
	}
}

// addMetrics takes the step gauges and the goodput metrics of a batch;
// everything else is ignored. The busy time point's exemplar names the
// iteration (nemo_steps without an interval); a rank step without it is
// not shown.
func (s *store) addMetrics(md pmetric.Metrics) {
	b := newGaugeBatch(md.DataPointCount())
	live := liveBatch{}
	for _, rm := range md.ResourceMetrics().All() {
		service := str(rm.Resource().Attributes(), attrkey.ServiceName)
		for _, sm := range rm.ScopeMetrics().All() {
			for _, m := range sm.Metrics().All() {
				if live.add(m, rm.Resource().Attributes(), service) {
					continue
				}
				g := gaugeOf(m.Name())
				if g == gaugeNone || m.Type() != pmetric.MetricTypeGauge {
					continue
				}
				for _, dp := range m.Gauge().DataPoints().All() {
					b.add(g, dp, rm.Resource().Attributes(), service)
				}
			}
		}
	}
	if len(b.steps) == 0 && len(live) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.steps {
		if ps := &b.steps[i]; ps.hasIter {
			s.addStep(s.runFor(ps.run, ps.id.id, ps.id.group, ps.service), &ps.step)
		}
	}
	for key, l := range live {
		r := s.runFor(key, l.id.id, l.id.group, l.service)
		r.addLive(l, r.updated)
		for rank, t := range l.ranks {
			s.fleet.stragglerTime(t.host, key, rank, t.seconds, r.updated, s.limits.hosts)
		}
	}
}

// addLogs takes nemo_steps' stall and goodput records; every other record
// is ignored.
func (s *store) addLogs(ld plog.Logs) {
	for _, rl := range ld.ResourceLogs().All() {
		service := str(rl.Resource().Attributes(), attrkey.ServiceName)
		for _, sl := range rl.ScopeLogs().All() {
			for _, rec := range sl.LogRecords().All() {
				s.addRecord(rec, rl.Resource().Attributes(), service)
			}
		}
	}
}

// addRecord takes one record, if it is a stall or goodput record of a run.
func (s *store) addRecord(rec plog.LogRecord, resource pcommon.Map, service string) {
	attrs := rec.Attributes()
	event := str(attrs, runrecords.EventName)
	if event != runrecords.EventStalled && event != runrecords.EventResumed && event != runrecords.EventGoodput {
		return
	}
	id, ok := identityOf(attrs, resource)
	if !ok {
		return
	}
	at := rec.Timestamp().AsTime()
	if rec.Timestamp() == 0 {
		at = rec.ObservedTimestamp().AsTime()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.runFor(id.key(), id.id, id.group, service)
	switch event {
	case runrecords.EventStalled:
		r.addStall(attrs, rec.Body().AsString(), at)
		st := r.stalls[len(r.stalls)-1]
		s.fleet.stall(r.key, st.hosts, st.lostHosts, s.now(), s.limits.hosts)
	case runrecords.EventResumed:
		if st, ok := r.resume(attrs, at); ok {
			s.fleet.stalled(r.key, st.hosts, st.seconds, s.now(), s.limits.hosts)
		}
	case runrecords.EventGoodput:
		r.goodput = goodputOf(attrs, rec.Body().AsString(), at)
	}
}

func (r *run) addStall(attrs pcommon.Map, body string, at time.Time) {
	st := stallInfo{kind: str(attrs, runrecords.StallKind), message: body, ongoing: true}
	if v, ok := attrs.Get(runrecords.StallIteration); ok {
		st.iteration, _ = rankattr.Parse(v)
	}
	if v, ok := attrs.Get(runrecords.StallSeconds); ok {
		st.seconds = number(v)
	}
	st.start = at.Add(-time.Duration(st.seconds * float64(time.Second)))
	if v, ok := attrs.Get(runrecords.StallRanks); ok && v.Type() == pcommon.ValueTypeSlice {
		for _, e := range v.Slice().All() {
			if n, ok := rankattr.Parse(e); ok {
				st.ranks = append(st.ranks, n)
			}
		}
	}
	st.hosts = strs(attrs, runrecords.StallHosts)
	st.lostHosts = strs(attrs, runrecords.StallLostHosts)
	if v, ok := attrs.Get(runrecords.StallStage); ok {
		st.stage, st.hasStage = rankattr.Parse(v)
	}
	r.endStall(at) // a new stall ends one never resumed
	r.stalls = append(r.stalls, st)
	if len(r.stalls) > maxStalls {
		r.stalls = r.stalls[len(r.stalls)-maxStalls:]
	}
	r.stalled = true
}

// resume ends the run's ongoing stall, and returns it (false: none was).
func (r *run) resume(attrs pcommon.Map, at time.Time) (stallInfo, bool) {
	if len(r.stalls) == 0 || !r.stalls[len(r.stalls)-1].ongoing {
		return stallInfo{}, false
	}
	st := &r.stalls[len(r.stalls)-1]
	if v, ok := attrs.Get(runrecords.StallSeconds); ok {
		st.seconds = number(v)
	}
	r.endStall(at)
	return *st, true
}

func (r *run) endStall(at time.Time) {
	if n := len(r.stalls); n > 0 && r.stalls[n-1].ongoing {
		r.stalls[n-1].ongoing = false
		r.stalls[n-1].end = at
	}
	r.stalled = false
}

func strs(attrs pcommon.Map, key string) []string {
	v, ok := attrs.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeSlice {
		return nil
	}
	out := make([]string, 0, v.Slice().Len())
	for _, e := range v.Slice().All() {
		out = append(out, e.AsString())
	}
	return out
}

func goodputOf(attrs pcommon.Map, body string, at time.Time) *goodputInfo {
	g := &goodputInfo{categories: map[string]float64{}, message: body, at: at}
	if v, ok := attrs.Get(runrecords.Goodput); ok {
		g.goodput = number(v)
	}
	if v, ok := attrs.Get(runrecords.WallSeconds); ok {
		g.wall = number(v)
	}
	if v, ok := attrs.Get(runrecords.Attempts); ok {
		g.attempts, _ = rankattr.Parse(v)
	}
	if v, ok := attrs.Get(runrecords.GoodputFinal); ok && v.Type() == pcommon.ValueTypeBool {
		g.final = v.Bool()
	}
	for c := range goodput.NumCategories {
		name := c.String()
		if v, ok := attrs.Get(runrecords.TimePrefix + name); ok {
			g.categories[name] = number(v)
		}
	}
	if v, ok := attrs.Get(runrecords.TopRanks); ok && v.Type() == pcommon.ValueTypeSlice {
		for _, e := range v.Slice().All() {
			if e.Type() != pcommon.ValueTypeMap {
				continue
			}
			m := e.Map()
			var t topRank
			if rv, ok := m.Get(runrecords.TopRankRank); ok {
				t.rank, _ = rankattr.Parse(rv)
			}
			t.host = str(m, runrecords.TopRankHost)
			if sv, ok := m.Get(runrecords.TopRankSeconds); ok {
				t.seconds = number(sv)
			}
			g.top = append(g.top, t)
		}
	}
	return g
}
