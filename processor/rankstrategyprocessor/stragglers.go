// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/pdatautil"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stragglerBuffer holds the step subtrees of the ranks the strategy drops
// and keeps a rank's step when it was a straggler. It notes, from every rank
// (kept ones too), the step spans and wait spans that busy times are made
// of. It is safe for concurrent use: ConsumeTraces from several receivers
// and the decision ticker.
//
// The step machinery (the table of open steps with its completion, expiry
// and early decision, the decided-step FIFO, reading a rank, recognizing
// step and wait spans, placing spans in steps by start time, the held
// chunks) is internal/steps'. This file receives spans and runs the ticker;
// stepplace.go ties spans to their steps; stepdecide.go is the policy:
// which held ranks of a decided step to keep;
// steplast.go keeps the last ranks to report; stepbudget.go releases spans
// and keeps within max_buffered_spans.
type stragglerBuffer struct {
	// wait is decision_wait, spanWait span_wait.
	wait, spanWait time.Duration
	spans          steps.Recognizer
	thresholds     stepbusy.Thresholds
	maxHeld        int
	reader         *steps.Reader
	clk            clock.Clock
	epoch          time.Time
	logger         *zap.Logger
	next           consumer.Traces
	record         func(context.Context, *tally)

	mu      sync.Mutex
	closed  bool
	ranks   map[uint64]*rankState
	placer  *stepbusy.Timeline[uint64]
	open    steps.Table[steps.Step, stepRanks]
	decided steps.Decided[steps.Step, *stepDecision]
	history *stepbusy.History[uint64]
	out     keptOutput
	// held counts the spans of every chunk that still holds a span; it and
	// out.count are what max_buffered_spans bounds.
	held int
	// observed counts the rank entries and wait intervals recorded in open
	// steps, bounded by max_buffered_spans too.
	observed       int
	stepSeen       bool
	warnedNoStep   bool
	warnedLoneRank bool
	// rankStepHint sizes a rank's span list in a new step: the largest
	// rank step of the last step decided, so that one allocation fits.
	rankStepHint int

	// The rank step last looked up (rankIn); the table remembers the step.
	lastRankOf   *openStep
	lastRank     int64
	lastRankStep *rankStep

	// Scratch space, used under mu.
	scores []stepbusy.Score
	placed []steps.Placed[pendingSpan]

	loop *clock.Loop
}

func newStragglerBuffer(cfg *StragglersConfig, keys *steps.Keys, reader *steps.Reader, clk clock.Clock, logger *zap.Logger,
	next consumer.Traces, record func(context.Context, *tally),
) (*stragglerBuffer, error) {
	if len(keys.RankKeys) == 0 {
		return nil, errors.New("stragglers: rank_keys must list at least one attribute key, to tell the ranks of a step apart")
	}
	recognizer, err := steps.NewRecognizer(cfg.Spans, cfg.WaitSpans)
	if err != nil {
		return nil, fmt.Errorf("stragglers: %w", err)
	}
	return &stragglerBuffer{
		wait:         cfg.DecisionWait,
		spanWait:     cfg.Span(),
		spans:        recognizer,
		thresholds:   cfg.Thresholds(cfg.MaxRanksPerStep),
		maxHeld:      cfg.MaxBufferedSpans,
		reader:       reader,
		clk:          clk,
		epoch:        clk.Now(),
		logger:       logger,
		next:         next,
		record:       record,
		ranks:        make(map[uint64]*rankState),
		placer:       stepbusy.NewTimeline[uint64](steps.MaxRememberedRanks),
		open:         *steps.NewTable[steps.Step, stepRanks](cfg.DecisionWait),
		decided:      *steps.NewDecided[steps.Step, *stepDecision](cfg.DecisionCacheSize),
		history:      stepbusy.NewHistory[uint64](cfg.History, steps.MaxRememberedRanks),
		out:          newKeptOutput(),
		rankStepHint: 8,
	}, nil
}

// now is the buffer's monotonic time.
func (b *stragglerBuffer) now() time.Duration { return b.clk.Now().Sub(b.epoch) }

// start starts the decision ticker.
func (b *stragglerBuffer) start() {
	// Often enough for the shorter of the two waits.
	b.loop = clock.StartLoop(b.clk, clock.TickEvery(min(b.wait, b.spanWait)), func() { b.tick(context.Background()) })
}

// tick decides the steps that are complete or whose wait is over, drops the
// spans that waited in vain for a step, and passes the kept spans on.
func (b *stragglerBuffer) tick(ctx context.Context) {
	var t tally
	td, n := b.decideDue(&t)
	_ = b.send(ctx, td, n, &t)
	b.record(ctx, &t)
}

// shutdown stops the ticker, decides every open step at once, drops what
// waits for a step, and passes the kept spans on before returning, so
// nothing kept is lost.
func (b *stragglerBuffer) shutdown(ctx context.Context) error {
	b.loop.Stop()
	var t tally
	td, n := b.drain(&t)
	err := b.send(ctx, td, n, &t)
	b.record(ctx, &t)
	if err != nil {
		return fmt.Errorf("rank_strategy: pass on kept straggler spans at shutdown: %w", err)
	}
	return nil
}

func (b *stragglerBuffer) send(ctx context.Context, td ptrace.Traces, n int, t *tally) error {
	if n == 0 {
		return nil
	}
	if err := b.next.ConsumeTraces(ctx, td); err != nil {
		t.sendFailed += int64(n)
		b.logger.Error("the next consumer refused kept straggler spans", zap.Int("spans", n), zap.Error(err))
		return err
	}
	return nil
}

func (b *stragglerBuffer) decideDue(t *tally) (ptrace.Traces, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.open.Due(now, b.decider(t))
	if expired := b.expirePending(now-b.spanWait, t); expired > 0 && !b.stepSeen && !b.warnedNoStep {
		b.warnedNoStep = true
		b.logger.Warn("no span named in stragglers::step_span_names with a usable stragglers::iteration_attribute has come from any rank yet, "+
			"so the spans of dropped ranks are held for span_wait and then dropped; logged once",
			zap.Strings("step_span_names", b.spans.StepSpanNames()),
			zap.String("iteration_attribute", b.spans.IterationAttribute()),
			zap.Int("dropped_spans", expired),
			zap.String("fix", "check stragglers::step_span_names and stragglers::iteration_attribute"))
	}
	b.forgetIdleRanks(now)
	td, n := b.out.take()
	t.held -= int64(n)
	return td, n
}

func (b *stragglerBuffer) drain(t *tally) (ptrace.Traces, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.open.Drain(b.decider(t))
	b.expirePending(math.MaxInt64, t)
	clear(b.ranks)
	td, n := b.out.take()
	t.held -= int64(n)
	return td, n
}

// identify reads the resource's rank, its run and group, and the world size
// it reports (0 when none).
func (b *stragglerBuffer) identify(attrs pcommon.Map) (rankID, int64, bool) {
	id, status := b.reader.Read(attrs)
	if status != rankattr.Valid {
		return rankID{}, 0, false
	}
	return rankID{owner: b.reader.Owner(id.Rank), group: id.Group, rank: id.Rank.Rank}, id.WorldSize, true
}

// hold takes over the resource of a rank the strategy drops: its spans wait
// for their step's decision instead of being dropped. Spans keep_errors
// keeps stay in the batch. handled is false when the resource has no usable
// rank; remove says whether the resource leaves the batch.
func (b *stragglerBuffer) hold(rs ptrace.ResourceSpans, keepErrors bool, t *tally) (handled, remove bool) {
	id, worldSize, ok := b.identify(rs.Resource().Attributes())
	if !ok {
		return false, false
	}
	exceptional := false
	if keepErrors {
		_, exceptional = scanExceptionalSpans(rs)
	}
	src := rs
	if exceptional {
		// Rare: the batch keeps the exceptional spans, the buffer holds a
		// copy of the resource in which they are read, never held.
		src = ptrace.NewResourceSpans()
		rs.CopyTo(src)
		filterExceptionalSpans(rs, t, nil)
	} else {
		remove = true
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		dropped := pdatautil.CountSpans(src)
		if exceptional {
			dropped -= pdatautil.CountSpans(rs)
		}
		t.dropped[reasonNotSelected] += int64(dropped)
		return true, remove
	}
	now := b.now()
	chunk := steps.NewChunk(src, id, now)
	b.held += chunk.Len()
	t.held += int64(chunk.Len())
	r := resourcePlacer{b: b, id: id, worldSize: worldSize, now: now, chunk: chunk, exceptional: exceptional}
	r.place(chunk.RS, t)
	if chunk.Placed() {
		b.uncount(chunk, t)
	}
	b.enforceBudget(t)
	return true, remove
}

// observeKept notes the step and wait spans of a rank the strategy keeps:
// its spans pass through untouched, but its busy times are measured like
// every other rank's.
func (b *stragglerBuffer) observeKept(rs ptrace.ResourceSpans, t *tally) {
	id, worldSize, ok := b.identify(rs.Resource().Attributes())
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	r := resourcePlacer{b: b, id: id, worldSize: worldSize, now: b.now()}
	r.place(rs, t)
	b.enforceBudget(t)
}
