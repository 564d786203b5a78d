// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"bytes"
	"context"
	"encoding/gob"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// The runs survive a collector restart in a storage extension (the
// presets' file_storage: a bbolt file per component, fsynced): every
// save_interval the runs that changed are written, each under its own key,
// with the list of keys; at start they are read back. The store's own
// types have unexported fields, so a run is saved as savedRun, gob-encoded.

const (
	indexKey  = "runs"
	hostsKey  = "hosts"
	runPrefix = "run/"
	// savedVersion is the layout of savedRun; a file of another layout is
	// not read (the pages start empty, with a warning).
	savedVersion = 1
)

type savedIndex struct {
	Version int
	Keys    []string
}

type savedRun struct {
	Key, ID, Group, Service string
	Updated                 time.Time
	Ranks                   []int64
	Hosts                   []string
	RanksOver               int
	// Steps are the iterations kept, each with its end and its cells.
	Iterations []int64
	Ends       []int64
	Cells      [][]savedCell
	LastIter   int64
	Stragglers []savedStraggler
	Stalls     []savedStall
	Stalled    bool
	Goodput    *savedGoodput
}

type savedCell struct {
	Busy, Duration float32
	Relative       uint8
	Present        bool
}

type savedStraggler struct {
	Rank, Iteration      int64
	Host                 string
	Relative, Individual float64
	Busy                 float64
}

type savedStall struct {
	Kind             string
	Iteration        int64
	Ranks            []int64
	Hosts, LostHosts []string
	Stage            int64
	HasStage         bool
	Start, End       time.Time
	Seconds          float64
	Message          string
	Ongoing          bool
}

type savedGoodput struct {
	Goodput, Wall, Unsettled float64
	Categories               map[string]float64
	Live, Final              bool
	Attempts                 int64
	TopRanks                 []int64
	TopHosts                 []string
	TopSeconds               []float64
	Message                  string
	At                       time.Time
}

func (r *run) saved() savedRun {
	sr := savedRun{
		Key: r.key, ID: r.id, Group: r.group, Service: r.service, Updated: r.updated,
		RanksOver: r.ranksOver, LastIter: r.lastIter, Stalled: r.stalled,
	}
	for _, ri := range r.ranks {
		sr.Ranks, sr.Hosts = append(sr.Ranks, ri.rank), append(sr.Hosts, ri.host)
	}
	for _, it := range slices.Sorted(maps.Keys(r.steps)) {
		st := r.steps[it]
		cells := make([]savedCell, len(st.cells))
		for i, c := range st.cells {
			cells[i] = savedCell{Busy: c.busy, Duration: c.duration, Relative: c.relative, Present: c.present}
		}
		sr.Iterations, sr.Ends, sr.Cells = append(sr.Iterations, it), append(sr.Ends, st.end), append(sr.Cells, cells)
	}
	for _, s := range r.stragglers {
		sr.Stragglers = append(sr.Stragglers, savedStraggler{s.rank, s.iteration, s.host, s.relative, s.individual, s.busy})
	}
	for i := range r.stalls {
		s := &r.stalls[i]
		sr.Stalls = append(sr.Stalls, savedStall{
			Kind: s.kind, Iteration: s.iteration, Ranks: s.ranks, Hosts: s.hosts, LostHosts: s.lostHosts,
			Stage: s.stage, HasStage: s.hasStage, Start: s.start, End: s.end, Seconds: s.seconds, Message: s.message, Ongoing: s.ongoing,
		})
	}
	if g := r.goodput; g != nil {
		sg := &savedGoodput{
			Goodput: g.goodput, Wall: g.wall, Unsettled: g.unsettled, Categories: g.categories, Live: g.live, Final: g.final,
			Attempts: g.attempts, Message: g.message, At: g.at,
		}
		for _, t := range g.top {
			sg.TopRanks, sg.TopHosts, sg.TopSeconds = append(sg.TopRanks, t.rank), append(sg.TopHosts, t.host), append(sg.TopSeconds, t.seconds)
		}
		sr.Goodput = sg
	}
	return sr
}

// restored is the run sr saved, within the store's limits.
func (s *store) restored(sr *savedRun) *run {
	r := &run{
		key: sr.Key, id: sr.ID, group: sr.Group, service: sr.Service, updated: sr.Updated,
		slots: map[int64]int{}, steps: map[int64]*step{}, ranksOver: sr.RanksOver, lastIter: sr.LastIter, stalled: sr.Stalled,
	}
	for i, rank := range sr.Ranks[:min(len(sr.Ranks), len(sr.Hosts), s.limits.ranks)] {
		r.slots[rank] = len(r.ranks)
		r.ranks = append(r.ranks, rankInfo{rank: rank, host: sr.Hosts[i]})
	}
	n := min(len(sr.Iterations), len(sr.Ends), len(sr.Cells))
	for i := max(0, n-s.limits.steps); i < n; i++ {
		cells := make([]cell, min(len(sr.Cells[i]), len(r.ranks)))
		for j := range cells {
			c := sr.Cells[i][j]
			cells[j] = cell{busy: c.Busy, duration: c.Duration, relative: c.Relative, present: c.Present}
		}
		r.steps[sr.Iterations[i]] = &step{end: sr.Ends[i], cells: cells}
	}
	for _, st := range sr.Stragglers {
		r.stragglers = append(r.stragglers, stragglerStep{st.Rank, st.Iteration, st.Host, st.Relative, st.Individual, st.Busy})
	}
	for i := range sr.Stalls {
		st := &sr.Stalls[i]
		r.stalls = append(r.stalls, stallInfo{
			kind: st.Kind, iteration: st.Iteration, ranks: st.Ranks, hosts: st.Hosts, lostHosts: st.LostHosts,
			stage: st.Stage, hasStage: st.HasStage, start: st.Start, end: st.End, seconds: st.Seconds, message: st.Message, ongoing: st.Ongoing,
		})
	}
	if sg := sr.Goodput; sg != nil {
		g := &goodputInfo{
			goodput: sg.Goodput, wall: sg.Wall, unsettled: sg.Unsettled, categories: sg.Categories, live: sg.Live, final: sg.Final,
			attempts: sg.Attempts, message: sg.Message, at: sg.At,
		}
		if g.categories == nil {
			g.categories = map[string]float64{}
		}
		for i := range min(len(sg.TopRanks), len(sg.TopHosts), len(sg.TopSeconds)) {
			g.top = append(g.top, topRank{rank: sg.TopRanks[i], host: sg.TopHosts[i], seconds: sg.TopSeconds[i]})
		}
		r.goodput = g
	}
	return r
}

// persister saves the store's runs to a storage client and reads them
// back.
type persister struct {
	client storage.Client
	// saved is when each run key was last written (its updated time).
	saved map[string]time.Time
}

// openStorage gets the storage extension id's client for the exporter.
func openStorage(ctx context.Context, host component.Host, id, self component.ID) (storage.Client, error) {
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return nil, fmt.Errorf("storage: no extension %q; add it to the extensions section and to service::extensions (the presets use file_storage/queue), or remove storage", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return nil, fmt.Errorf("storage: %q is not a storage extension (use a file_storage extension)", id)
	}
	return se.GetClient(ctx, component.KindExporter, self, "runs")
}

// load reads the runs saved into s; it returns how many.
func (p *persister) load(ctx context.Context, s *store) (int, error) {
	raw, err := p.client.Get(ctx, indexKey)
	if err != nil || raw == nil {
		return 0, err
	}
	var idx savedIndex
	if err := gob.NewDecoder(bytes.NewReader(raw)).Decode(&idx); err != nil {
		return 0, fmt.Errorf("the saved run list: %w", err)
	}
	if idx.Version != savedVersion {
		return 0, fmt.Errorf("the saved runs are of layout %d, this collector reads layout %d", idx.Version, savedVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if raw, err := p.client.Get(ctx, hostsKey); err == nil && raw != nil {
		f := newFleet()
		if gob.NewDecoder(bytes.NewReader(raw)).Decode(f) == nil {
			s.fleet = f
		}
	}
	for _, key := range idx.Keys {
		raw, err := p.client.Get(ctx, runPrefix+key)
		if err != nil {
			return len(s.runs), err
		}
		var sr savedRun
		if raw == nil || gob.NewDecoder(bytes.NewReader(raw)).Decode(&sr) != nil || len(s.runs) >= s.limits.runs {
			continue
		}
		r := s.restored(&sr)
		s.runs[r.key] = r
		p.saved[r.key] = r.updated
	}
	return len(s.runs), nil
}

// save writes the runs updated since they were last saved, the list of
// runs, and deletes the runs the store no longer holds.
func (p *persister) save(ctx context.Context, s *store) error {
	s.mu.Lock()
	var ops []*storage.Operation
	written := map[string]time.Time{}
	fleetWritten := false
	keys := slices.Sorted(maps.Keys(s.runs))
	for _, key := range keys {
		r := s.runs[key]
		if at, ok := p.saved[key]; ok && !r.updated.After(at) {
			continue
		}
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(r.saved()); err != nil {
			s.mu.Unlock()
			return err
		}
		ops = append(ops, storage.SetOperation(runPrefix+key, buf.Bytes()))
		written[key] = r.updated
	}
	if s.fleet.changed {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(s.fleet); err != nil {
			s.mu.Unlock()
			return err
		}
		ops = append(ops, storage.SetOperation(hostsKey, buf.Bytes()))
		s.fleet.changed, fleetWritten = false, true
	}
	var gone []string
	for key := range p.saved {
		if _, ok := s.runs[key]; !ok {
			ops = append(ops, storage.DeleteOperation(runPrefix+key))
			gone = append(gone, key)
		}
	}
	s.mu.Unlock()
	if len(ops) == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(savedIndex{Version: savedVersion, Keys: keys}); err != nil {
		return err
	}
	if err := p.client.Batch(ctx, append(ops, storage.SetOperation(indexKey, buf.Bytes()))...); err != nil {
		s.mu.Lock()
		s.fleet.changed = s.fleet.changed || fleetWritten
		s.mu.Unlock()
		return err // written again next time
	}
	maps.Copy(p.saved, written)
	for _, key := range gone {
		delete(p.saved, key)
	}
	return nil
}
