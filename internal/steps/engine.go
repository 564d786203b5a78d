// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/boundedmap"
	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// MaxRememberedRanks bounds the ranks whose state between batches (recent
// steps, busy times, waiting spans) an engine remembers: about twice this
// many, in two generations. A run of more ranks than this forgets some of
// them between their steps (boundedmap), so it is sized for one gateway
// judging a 100,000-rank run from its agents' summaries (about 1 KB a rank:
// BenchmarkGatewaySummaries).
const MaxRememberedRanks = 1 << 18

// DefaultDecidedSize is how many decided steps an engine remembers unless
// told otherwise, so that a rank or span arriving after its step's decision
// follows it.
const DefaultDecidedSize = 16384

// Config is what an Engine needs besides its user (an Observer or a Holder).
type Config struct {
	// Spans name the step spans; WaitSpans the spans a rank waits in
	// (Scoring.WaitSpans).
	Spans     Spans
	WaitSpans []string
	// Waits: how long a step stays open (decision_wait) and how long a span
	// waits for its step span (span_wait, Waits.Span).
	Waits Waits
	// Scores opens a step at its first step span and decides and scores it
	// (Observer.Decided); without it the engine only places spans.
	Scores bool
	// History is how many of a rank's recent busy times its individual
	// score compares with.
	History int
	// DecidedSize is how many decided steps are remembered (0:
	// DefaultDecidedSize).
	DecidedSize int
	// OverBudget says whether the engine and its holder hold too much:
	// then the oldest open step is decided early, or the spans that waited
	// longest for their step span give up, until it says no. nil: no
	// budget beyond span_wait.
	OverBudget func(Counts) bool
	// LocalWorld: a step is complete once every rank of its run and group
	// this engine has heard from reported it, not every rank of the world
	// the ranks report. For an agent, which sees the ranks of its node only
	// (rank_strategy's summarize).
	LocalWorld bool
	// KeyPrefix is where the step settings are in the component's config
	// ("stragglers::"), for the messages the engine logs.
	KeyPrefix string

	// Next receives the spans a Holder passes on with the engine's Output:
	// sent outside the engine's lock at every tick, and sent again at the
	// next tick when refused (they were acknowledged when they arrived).
	// nil for an Observer.
	Next consumer.Traces
	// SpansName names those spans in the message logged when Next refuses
	// them ("kept straggler spans").
	SpansName string
	// PassAtOnce sends what was passed on while a batch was walked right
	// after it (Consume), not at the next tick.
	PassAtOnce bool
}

// Counts are what an engine holds.
type Counts struct {
	// OpenRankSteps are the rank steps (one rank's step span) of open steps,
	// Waits the wait intervals recorded in them.
	OpenRankSteps, Waits int
	// Waiting are the spans (or what is kept of them) waiting for their
	// step span.
	Waiting int
}

// Engine is the step engine a component runs: it reads a resource's rank
// once, walks its spans once per batch and ties each to its rank's step by
// start time (the step span, a compute or wait span in it, or outside every
// step), keeps the open steps until every rank reported or decision_wait
// is over, scores them on busy time, handles late ranks and its memory
// budget, runs the ticker, and tells its user (an Observer or a Holder, roles.go). It is safe for
// concurrent use: batches from several receivers, and its ticker.
type Engine[D any] struct {
	cfg    Config
	spans  Recognizer
	clk    clock.Clock
	epoch  time.Time
	logger *zap.Logger
	l      Holder[D]

	mu      sync.Mutex
	closed  bool
	ranks   *boundedmap.Map[Rank, *rankState]
	open    *Table[Step, openStep[D]]
	decided *Decided[Step, *decidedStep[D]]
	history *stepbusy.History[Rank]
	// groupRanks counts the ranks of each run and group heard from, for
	// LocalWorld.
	groupRanks map[uint64]int64
	counts     Counts
	stats      Stats
	// stepSeen: a usable step span came; warnedNoStep: the engine said
	// that none came while spans waited in vain.
	stepSeen, warnedNoStep bool
	// warnedVersion: the engine said that summaries of another version came.
	warnedVersion bool
	batch         Batch[D]
	decideFn      func(*Open[Step, openStep[D]], Cause)

	// out passes a holder's spans on to cfg.Next (nil: no Next).
	out *Output

	loop *clock.Loop
}

// rankState is what the engine knows of a rank between its batches.
type rankState struct {
	steps   RankSteps
	waiting Waiting[waitingSpan]
}

// waitingSpan is a span that waits for its step span: a wait interval for
// the rank's busy time and, for a holder (kept), the span held.
type waitingSpan struct {
	iv     stepbusy.Interval
	isWait bool
	kept   bool
	held   Held
	// seq is its resource's (Resource.seq): the budget gives up the spans
	// that waited longest one resource at a time.
	seq uint64
}

// heldCount is 1 when the engine holds the span for its holder.
func (w *waitingSpan) heldCount() int64 {
	if w.held.Chunk != nil {
		return 1
	}
	return 0
}

// Observe returns an engine on clk for an Observer, which walks every
// resource with Batch.Walk. It starts its ticker at Start.
func Observe[D any](cfg Config, o Observer[D], clk clock.Clock, logger *zap.Logger) (*Engine[D], error) {
	return New[D](cfg, observing[D]{o}, clk, logger)
}

// New returns an engine on clk for a Holder. It starts its ticker at Start.
func New[D any](cfg Config, l Holder[D], clk clock.Clock, logger *zap.Logger) (*Engine[D], error) {
	spans, err := NewRecognizer(cfg.Spans, cfg.WaitSpans)
	if err != nil {
		return nil, err
	}
	if cfg.DecidedSize <= 0 {
		cfg.DecidedSize = DefaultDecidedSize
	}
	e := &Engine[D]{
		cfg: cfg, spans: spans, clk: clk, epoch: clk.Now(), logger: logger, l: l,
		ranks:      boundedmap.New[Rank, *rankState](MaxRememberedRanks),
		open:       NewTable[Step, openStep[D]](cfg.Waits.DecisionWait),
		decided:    NewDecided[Step, *decidedStep[D]](cfg.DecidedSize),
		history:    stepbusy.NewHistory[Rank](cfg.History, MaxRememberedRanks),
		groupRanks: map[uint64]int64{},
	}
	e.batch.e = e
	e.decideFn = e.decide
	if cfg.Next != nil {
		e.out = NewOutput(cfg.Next)
	}
	return e, nil
}

// Output is where a holder passes held spans on (Config.Next): under the
// engine's lock, in its methods; the engine sends them.
func (e *Engine[D]) Output() *Output { return e.out }

// Recognizer is the engine's: which spans are step and wait spans.
func (e *Engine[D]) Recognizer() *Recognizer { return &e.spans }

// now is the engine's monotonic time.
func (e *Engine[D]) now() time.Duration { return e.clk.Now().Sub(e.epoch) }

// Consume runs fn with the engine's lock held and a Batch to walk the
// resources of one batch with, and returns what the engine did; with
// PassAtOnce it then sends what fn passed on. It reports false, without
// running fn, once the engine is shut down.
func (e *Engine[D]) Consume(fn func(b *Batch[D])) (Stats, bool) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return Stats{}, false
	}
	b := &e.batch
	b.at = e.clk.Now()
	b.arrival = b.at.Sub(e.epoch)
	fn(b)
	passAtOnce := e.cfg.PassAtOnce && e.out != nil
	if passAtOnce {
		e.stats.Queued += int64(e.out.Ready())
	}
	st := e.takeStats()
	e.mu.Unlock()
	if passAtOnce {
		_ = e.send(&st) // refused: logged, counted, and sent again at the next tick
	}
	return st, true
}

// send passes on what the output queued, outside the engine's lock; what
// Next refuses stays queued for the next tick, counted in st and logged.
func (e *Engine[D]) send(st *Stats) error {
	if e.out == nil {
		return nil
	}
	refused, err := e.out.Send(context.Background())
	if err != nil {
		st.SendFailed += int64(refused)
		e.logger.Error("the next consumer refused "+e.cfg.SpansName+"; they are sent again at the next tick",
			zap.Int("spans", refused), zap.Error(err))
	}
	return err
}

func (e *Engine[D]) takeStats() Stats {
	st := e.stats
	e.stats = Stats{}
	return st
}

// rank is a rank's state, created when new.
func (e *Engine[D]) rank(r Rank) *rankState {
	return e.ranks.GetOrNew(r, func() *rankState {
		if e.cfg.LocalWorld && len(e.groupRanks) < MaxRememberedRanks {
			e.groupRanks[r.Group]++
		}
		return &rankState{}
	})
}

// warnSummaryVersion says once that summaries of a version this build
// cannot read came (they are counted, by reason summary_version).
func (e *Engine[D]) warnSummaryVersion(got string) {
	if e.warnedVersion {
		return
	}
	e.warnedVersion = true
	e.logger.Error("step summaries of a contract version this collector cannot read came from an agent; "+
		"they are refused (counted as skipped, reason summary_version), so the ranks they summarize are missing from this collector's judgements; logged once",
		zap.String("got_version", got), zap.String("reads_version", stepsummary.Version),
		zap.String("fix", "run the same otelcol-nemo release on the agents and the gateways (upgrade the gateways first)"))
}
