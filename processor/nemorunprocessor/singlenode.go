// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

// Single-node reconciliation (README "Bare torchrun"): ranks that sent a
// per-process id and no job key are grouped into launches, one per
// (host.name, service.name, rl.worker_group, world size) and window of first
// sight. A launch's run id is the per-process id of the first rank seen, so
// that no rank's data is ever written under one id and then another.
//
// Two jobs launched together on one host look alike rank for rank, so a
// launch is decided before any of its ranks but the first is released: the
// requests of its other ranks are held (their senders simply wait) until
// either its world size is complete and single_node_settle passed without a
// further id (one job: merged), a rank came twice (two jobs: nothing is
// merged), or single_node_hold expired (the ranks present are merged). The
// first rank is never held: its id is its run id whatever the decision.

const (
	defaultSingleNodeWindow      = 60 * time.Second
	defaultSingleNodeSettle      = time.Second
	defaultSingleNodeHold        = 5 * time.Second
	defaultSingleNodeIdleTimeout = 7 * 24 * time.Hour
	// maxSingleNodeHold is the OpenTelemetry SDKs' default export timeout:
	// a sender held that long gives up on its request.
	maxSingleNodeHold = 10 * time.Second

	// maxTrackedIDs bounds the per-process ids remembered (about 150 bytes
	// each); at the bound the least recently seen eighth is forgotten.
	maxTrackedIDs = 1 << 16
	// maxHeldRequests bounds the requests held for undecided launches (each
	// holds its data); beyond it a request is refused with a retryable
	// error and its sender retries after the launch is decided.
	maxHeldRequests = 1024
	// sweepInterval: how often ids idle for longer than the idle timeout are
	// dropped.
	sweepInterval = time.Minute
	// warnRepeat: a warning that is not tied to one launch (no host.name,
	// no world size, ...) is repeated at most this often per host, service
	// and reason.
	warnRepeat = time.Hour
)

// unreconciledReason says why a per-process id without a job key kept its
// own value.
type unreconciledReason int

const (
	reasonNone unreconciledReason = iota
	reasonNoHostName
	reasonNoWorldSize
	reasonNoRank
	reasonRankOutOfRange
	reasonMultiNode
	reasonRankCollision
	reasonLate
	reasonConcurrentLaunches
	numReasons
)

var reasonNames = [numReasons]string{"", "no_host_name", "no_world_size", "no_rank", "rank_out_of_range", "multi_node", "rank_collision", "late", "concurrent_launches"}

var (
	errShuttingDown = errors.New("nemo_run is shutting down before the single-node launch of this request was decided; retry")
	errTooManyHeld  = fmt.Errorf("nemo_run already holds %d requests of undecided single-node launches; retry", maxHeldRequests)
)

// launchKey is what the ranks of one single-node launch share. Ranks are
// numbered within an rl.worker_group (NeMo-RL), so it is part of the key.
type launchKey struct {
	host, service, workerGroup string
	worldSize                  int64
}

func (k launchKey) clone() launchKey {
	return launchKey{host: strings.Clone(k.host), service: strings.Clone(k.service), workerGroup: strings.Clone(k.workerGroup), worldSize: k.worldSize}
}

// launch is one group of ranks first seen within the window of each other.
type launch struct {
	key      launchKey
	id       string    // the first rank's per-process id: every member's run id
	first    time.Time // when that rank was first seen; window and hold start here
	lastNew  time.Time // when the last new id joined while pending; settle starts here
	lastSeen time.Time // last time any member was seen
	ranks    map[int64]string

	// pending until decided; decided is closed then, releasing the
	// requests held for it.
	pending bool
	decided chan struct{}
	// complete: decided with every rank of its world size.
	complete bool
	// ambiguous: a rank came twice before the decision. None of its ids is
	// merged.
	ambiguous bool
	// noted: the info that its ranks share one id is due once it is merged
	// with two ranks or more; set once logged.
	noted bool
	// collided: a rank came twice with different ids within the window
	// (always when ambiguous). The launch then admits no one more: it cannot
	// tell its ranks from another job's.
	collided   bool
	warnedLate bool
}

// idDecision is what was decided for one per-process id; it never changes
// while the id is remembered, except once from its pending launch's id to
// its own when the launch turns out ambiguous.
type idDecision struct {
	runID    string
	launch   *launch // nil when the id was refused
	lastSeen time.Time
	// due is a refusal decided while the id was held, counted by the next
	// request that reads it.
	due unreconciledReason
}

type warnKey struct {
	host, service string
	reason        unreconciledReason
}

// refusal describes a per-process id that kept its own value, for the
// warning.
type refusal struct {
	reason   unreconciledReason
	key      launchKey
	rank     int64
	id       string
	launchID string        // the launch it could not join
	members  int           // that launch's members
	other    string        // rank_collision, concurrent_launches: the id that already has the rank
	after    time.Duration // late: time since that launch's first rank
}

// verdict is decide's answer for one resource.
type verdict struct {
	runID string
	// pending is the undecided launch the id belongs to: the resource must
	// wait for its decision (runID is not set).
	pending *launch
	// counted is set (with warn possibly) only on the call that first
	// refused the id, so that each id is counted once.
	counted unreconciledReason
	warn    bool
	refusal refusal
	// joined is set when a launch has two members sharing its id: logged
	// once per launch.
	joined *launch
}

// singleNode holds the launches of one nemo_run component, shared by its
// traces, metrics and logs processors so that they agree.
type singleNode struct {
	window, settle, hold, idle time.Duration
	maxIDs, maxHeld            int
	clock                      clock.Clock

	mu        sync.Mutex
	ids       map[string]idDecision
	launches  map[launchKey]*launch
	undecided map[*launch]struct{}
	held      int // requests waiting in await
	warned    *ratelog.Limiter[warnKey]
	nextSweep time.Time
	// loop decides pending launches whose settle or hold passed; started
	// with the first pending launch.
	loop     *clock.Loop
	stopped  chan struct{}
	stopOnce sync.Once
}

func newSingleNode(cfg *Config, clk clock.Clock) *singleNode {
	return &singleNode{
		window:    cfg.SingleNodeWindow,
		settle:    cfg.SingleNodeSettle,
		hold:      cfg.SingleNodeHold,
		idle:      cfg.SingleNodeIdleTimeout,
		maxIDs:    maxTrackedIDs,
		maxHeld:   maxHeldRequests,
		clock:     clk,
		ids:       map[string]idDecision{},
		launches:  map[launchKey]*launch{},
		undecided: map[*launch]struct{}{},
		warned: &ratelog.Limiter[warnKey]{Every: warnRepeat, MaxKeys: maxTrackedIDs, Clone: func(k warnKey) warnKey {
			k.host, k.service = strings.Clone(k.host), strings.Clone(k.service)
			return k
		}},
		stopped: make(chan struct{}),
	}
}

// stop releases every held request (with errShuttingDown) and ends the
// loop. Held requests are refused rather than passed on undecided: their
// senders retry, and the next collector decides their launch afresh, so no
// rank's data goes out under an id that was never decided.
// Start does nothing: the state starts its loop with its first launch. It
// and Shutdown make the state a component that its processors share
// (internal/sharedcomponent).
func (*singleNode) Start(context.Context, component.Host) error { return nil }

// Shutdown stops the state.
func (s *singleNode) Shutdown(context.Context) error {
	s.stop()
	return nil
}

func (s *singleNode) stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		s.mu.Lock()
		loop := s.loop
		s.loop = nil
		s.mu.Unlock()
		loop.Stop()
	})
}

// await blocks until every launch of held is decided, ctx is done or the
// processor (stopped) or the state stops.
func (s *singleNode) await(ctx context.Context, stopped <-chan struct{}, held []heldResource) error {
	s.mu.Lock()
	if s.held >= s.maxHeld {
		s.mu.Unlock()
		return errTooManyHeld
	}
	s.held++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}()
	for _, h := range held {
		select {
		case <-h.launch.decided:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the single-node launch of run id %s to be decided: %w", h.launch.id, ctx.Err())
		case <-stopped:
			return errShuttingDown
		case <-s.stopped:
			return errShuttingDown
		}
	}
	return nil
}

// heldRequests is how many requests are waiting for a decision.
func (s *singleNode) heldRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// tick decides the pending launches whose settle or hold passed.
func (s *singleNode) tick() {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.undecided {
		s.resolve(l, now)
	}
}

// decide returns the run id for a resource whose sender id is the
// per-process id id and that matched no job key, or the launch it must wait
// for. An id is decided once, when first seen or when its launch is, and
// keeps that decision while it is remembered:
//
//   - the first id seen for a launch key (or the first after the last
//     launch's window, when its rank is taken there, or after its hold,
//     when it is complete) starts a launch and keeps its value, which
//     becomes the launch's run id; it is never held;
//   - an id whose rank is free in a pending launch joins it and waits for
//     its decision: merged (the launch's id) or ambiguous (its own);
//   - an id whose rank is taken in a pending launch makes it ambiguous:
//     no id of it is merged (two jobs launched together:
//     concurrent_launches);
//   - an id whose rank is free in a decided launch still within its window
//     joins it at once;
//   - an id whose rank is taken in a decided launch within the window (of a
//     complete launch: within its hold) refuses it and every later newcomer
//     to that launch (two jobs, or a restart: rank_collision);
//   - an id after the window whose rank is missing from the launch may be a
//     late rank or another job's: refused (late).
//
// Resources without host.name, world size or rank, or whose rank is not
// below the world size or differs from the local rank (a multi-node job),
// are refused outright.
func (s *singleNode) decide(id string, attrs pcommon.Map) verdict {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !now.Before(s.nextSweep) {
		s.expire(now)
	}
	if d, ok := s.ids[id]; ok {
		return s.known(id, d, now)
	}

	key, rank, reason := readIdentity(attrs)
	r := refusal{reason: reason, key: key, rank: rank, id: id}
	if reason != reasonNone {
		return s.refuse(r, s.warnOnce(key, reason, now), now)
	}
	l := s.launches[key]
	if l != nil && now.Sub(l.lastSeen) > s.idle {
		l = nil
	}
	if l != nil && l.pending {
		s.resolve(l, now)
	}
	switch {
	case l == nil:
		return s.found(key, rank, id, now)
	case l.ranks[rank] == id:
		// A member forgotten under the id bound: its launch remembers it.
		return s.join(l, rank, id, now)
	case l.pending:
		other, taken := l.ranks[rank]
		if !taken {
			return s.join(l, rank, id, now)
		}
		s.refuseAll(l)
		r.reason, r.launchID, r.members, r.other = reasonConcurrentLaunches, l.id, len(l.ranks), other
		return s.refuse(r, true, now)
	case l.complete && !l.collided && now.Sub(l.first) > s.hold:
		// Every rank is taken, and the launch was first seen longer than the
		// hold ago: the next job on this host, or a restart.
		return s.found(key, rank, id, now)
	case now.Sub(l.first) <= s.window:
		other, taken := l.ranks[rank]
		if !taken && !l.collided {
			return s.join(l, rank, id, now)
		}
		warn := !l.collided
		l.collided = true
		r.reason, r.launchID, r.members, r.other = reasonRankCollision, l.id, len(l.ranks), other
		if l.ambiguous {
			r.reason = reasonConcurrentLaunches
		}
		return s.refuse(r, warn, now)
	default:
		if _, taken := l.ranks[rank]; taken {
			// The rank is back with a new id after the window: a new launch
			// (the next job on this host, or a restart).
			return s.found(key, rank, id, now)
		}
		warn := !l.warnedLate
		l.warnedLate = true
		r.reason, r.launchID, r.members, r.after = reasonLate, l.id, len(l.ranks), now.Sub(l.first)
		return s.refuse(r, warn, now)
	}
}

// known answers for an id seen before.
func (s *singleNode) known(id string, d idDecision, now time.Time) verdict {
	d.lastSeen = now
	l := d.launch
	if l != nil {
		if l.lastSeen.Before(now) {
			l.lastSeen = now
		}
		if l.pending {
			s.resolve(l, now)
		}
		if l.pending && id != l.id {
			s.ids[id] = d
			return verdict{pending: l}
		}
	}
	v := verdict{runID: d.runID, counted: d.due}
	d.due = reasonNone
	s.ids[id] = d
	if l != nil && !l.pending && !l.noted && !l.ambiguous && len(l.ranks) >= 2 {
		l.noted = true
		v.joined = l
	}
	return v
}

// readIdentity reads the launch key and rank of a resource, or why it has
// none usable.
func readIdentity(attrs pcommon.Map) (launchKey, int64, unreconciledReason) {
	var k launchKey
	if v, ok := attrs.Get(attrkey.ServiceName); ok && v.Type() == pcommon.ValueTypeStr {
		k.service = v.Str()
	}
	if v, ok := attrs.Get(attrkey.HostName); ok && v.Type() == pcommon.ValueTypeStr {
		k.host = strings.TrimSpace(v.Str())
	}
	if k.host == "" {
		return k, -1, reasonNoHostName
	}
	ws, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldWorldSize])
	if status != rankattr.Valid || ws == 0 {
		return k, -1, reasonNoWorldSize
	}
	k.worldSize = ws
	rank, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldRank])
	if status != rankattr.Valid {
		return k, -1, reasonNoRank
	}
	if rank >= ws {
		return k, rank, reasonRankOutOfRange
	}
	// On one node torchrun's local rank equals the rank; where it differs,
	// the job spans nodes and its other ranks are on other hosts.
	if local, _, status := rankattr.Lookup(attrs, rankFieldKeys[fieldLocalRank]); status == rankattr.Valid && local != rank {
		return k, rank, reasonMultiNode
	}
	if v, ok := attrs.Get(attrkey.WorkerGroup); ok && v.Type() == pcommon.ValueTypeStr {
		k.workerGroup = v.Str()
	}
	return k, rank, reasonNone
}

func (s *singleNode) found(key launchKey, rank int64, id string, now time.Time) verdict {
	id = strings.Clone(id)
	l := &launch{
		key: key.clone(), id: id, first: now, lastNew: now, lastSeen: now,
		ranks: map[int64]string{rank: id}, pending: true, decided: make(chan struct{}),
	}
	s.launches[l.key] = l
	s.undecided[l] = struct{}{}
	s.remember(id, id, l, now)
	if s.loop == nil {
		s.loop = clock.StartLoop(s.clock, clock.TickEvery(s.settle), s.tick)
	}
	// The first id is the launch's run id and its own: never held.
	return verdict{runID: id}
}

func (s *singleNode) join(l *launch, rank int64, id string, now time.Time) verdict {
	id = strings.Clone(id)
	if _, member := l.ranks[rank]; !member && l.pending {
		l.lastNew = now
	}
	l.ranks[rank] = id
	l.lastSeen = now
	runID := l.id
	if l.ambiguous {
		runID = id
	}
	s.remember(id, runID, l, now)
	if l.pending {
		return verdict{pending: l}
	}
	v := verdict{runID: runID}
	if !l.noted && !l.ambiguous && len(l.ranks) >= 2 {
		l.noted = true
		v.joined = l
	}
	return v
}

// resolve decides a pending launch when its world size is complete and
// settle passed since its last new id, or when its hold expired: its ids
// are merged (they were remembered with the launch's id already).
func (s *singleNode) resolve(l *launch, now time.Time) {
	complete := int64(len(l.ranks)) == l.key.worldSize
	if (!complete || now.Sub(l.lastNew) < s.settle) && now.Sub(l.first) < s.hold {
		return
	}
	l.pending, l.complete = false, complete
	s.release(l)
}

// refuseAll decides a pending launch ambiguous: every id keeps its own
// value, and each one but the first (which had it all along) is counted.
func (s *singleNode) refuseAll(l *launch) {
	l.pending, l.ambiguous, l.collided = false, true, true
	for _, id := range l.ranks {
		if d, ok := s.ids[id]; ok && d.launch == l && id != l.id {
			d.runID, d.due = id, reasonConcurrentLaunches
			s.ids[id] = d
		}
	}
	s.release(l)
}

func (s *singleNode) release(l *launch) {
	delete(s.undecided, l)
	close(l.decided)
}

func (s *singleNode) refuse(r refusal, warn bool, now time.Time) verdict {
	id := strings.Clone(r.id)
	s.remember(id, id, nil, now)
	return verdict{runID: id, counted: r.reason, warn: warn, refusal: r}
}

func (s *singleNode) remember(id, runID string, l *launch, now time.Time) {
	if len(s.ids) >= s.maxIDs {
		s.evictOldest()
	}
	s.ids[id] = idDecision{runID: runID, launch: l, lastSeen: now}
}

// warnOnce reports whether a warning not tied to a launch is due for
// (host, service, reason).
func (s *singleNode) warnOnce(key launchKey, reason unreconciledReason, now time.Time) bool {
	return s.warned.Allow(warnKey{host: key.host, service: key.service, reason: reason}, now)
}

// expire drops ids and launches idle for longer than the idle timeout, and
// warnings due again.
func (s *singleNode) expire(now time.Time) {
	for id, d := range s.ids {
		if now.Sub(d.lastSeen) > s.idle {
			delete(s.ids, id)
		}
	}
	for k, l := range s.launches {
		if now.Sub(l.lastSeen) > s.idle {
			delete(s.launches, k)
		}
	}
	s.warned.Sweep(now)
	s.nextSweep = now.Add(sweepInterval)
}

// evictOldest forgets the least recently seen eighth of the ids, and the
// launches none of whose members was seen since.
func (s *singleNode) evictOldest() {
	seen := make([]time.Time, 0, len(s.ids))
	for _, d := range s.ids {
		seen = append(seen, d.lastSeen)
	}
	slices.SortFunc(seen, time.Time.Compare)
	cutoff := seen[len(seen)/8]
	for id, d := range s.ids {
		if !d.lastSeen.After(cutoff) {
			delete(s.ids, id)
		}
	}
	for k, l := range s.launches {
		if !l.lastSeen.After(cutoff) {
			delete(s.launches, k)
		}
	}
}
