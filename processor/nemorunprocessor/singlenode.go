// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
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
//
// Why this processor holds a request when no other does: an id written
// under the wrong run cannot be taken back from the files and backends it
// reached, and a second rank's id tells nothing until its launch is
// decided; holding (at most single_node_hold, under the SDKs' 10 s export
// timeout, and maxHeldRequests requests) is the only answer that neither
// guesses nor refuses. Held spans are not acknowledged until released.
//
// The state by concern: this file (the state, its bounds, start and stop),
// singlenode_decide.go (a rank's verdict), singlenode_hold.go (the held
// requests and the ticker deciding launches in time), singlenode_forget.go
// (idle and overflowing ids), singlenode_reconcile.go (a verdict applied to
// a request's resource).

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
