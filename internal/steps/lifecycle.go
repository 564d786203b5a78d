// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

import (
	"errors"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
)

// Start starts the engine's ticker: every tenth of the shorter of
// decision_wait and span_wait (at most a second), or every tick when set,
// the due steps are decided, the spans that waited span_wait for their step
// span in vain expire, the user ticks, what a holder passed on is sent, and
// the user sends.
func (e *Engine[D]) Start(tick time.Duration) {
	if tick <= 0 {
		tick = clock.TickEvery(min(e.cfg.Waits.DecisionWait, e.cfg.Waits.Span()))
	}
	e.loop = clock.StartLoop(e.clk, tick, func() { _ = e.tick(false) })
}

// Shutdown stops the ticker, decides every open step with the ranks it
// has, expires every waiting span, and has the user tick and send a
// last time before it returns, so that nothing decided is left behind.
// Later batches are not walked (Consume reports false).
func (e *Engine[D]) Shutdown() error {
	e.loop.Stop()
	return e.tick(true)
}

// tick is one turn of the ticker; final shuts the engine down.
func (e *Engine[D]) tick(final bool) error {
	e.mu.Lock()
	if final && e.closed {
		e.mu.Unlock()
		return nil
	}
	if final {
		e.closed = true
		e.open.Drain(e.decideFn)
		e.expire(math.MaxInt64, ExpiredShutdown)
	} else {
		now := e.now()
		e.open.Due(now, e.decideFn)
		e.expire(now-e.cfg.Waits.Span(), ExpiredWait)
	}
	e.l.Tick(e.clk.Now(), final)
	if e.out != nil {
		e.stats.Queued += int64(e.out.Ready())
	}
	st := e.takeStats()
	e.mu.Unlock()
	err := e.send(&st)
	if lerr := e.l.Send(&st, final); lerr != nil || final {
		return errors.Join(err, lerr)
	}
	return nil
}

// expire gives up the waiting spans that arrived at or before through.
func (e *Engine[D]) expire(through time.Duration, why Expiry) {
	if e.counts.Waiting == 0 {
		return
	}
	kept := int64(0)
	e.ranks.All(func(rank Rank, st *rankState) {
		e.giveUp(rank, st, why, &kept, func(_ waitingSpan, arrived time.Duration) bool { return arrived <= through })
	})
	if why == ExpiredWait && kept > 0 && !e.stepSeen && !e.warnedNoStep {
		e.warnedNoStep = true
		e.logger.Warn("no span named in "+e.cfg.KeyPrefix+"step_span_names with a usable "+e.cfg.KeyPrefix+"iteration_attribute "+
			"has come from any rank yet, so spans wait span_wait for their step span in vain; logged once",
			zap.Strings("step_span_names", e.spans.StepSpanNames()),
			zap.String("iteration_attribute", e.spans.IterationAttribute()),
			zap.Int64("spans", kept),
			zap.String("fix", "check "+e.cfg.KeyPrefix+"step_span_names and "+e.cfg.KeyPrefix+"iteration_attribute"))
	}
}

// giveUp removes a rank's waiting spans that which says, and tells the
// holder of those it kept; kept counts them.
func (e *Engine[D]) giveUp(rank Rank, st *rankState, why Expiry, kept *int64, which func(w waitingSpan, arrived time.Duration) bool) {
	n := st.waiting.RemoveIf(func(w waitingSpan, _ int64, arrived time.Duration) bool {
		if !which(w, arrived) {
			return false
		}
		if w.isWait {
			e.stats.Skipped[SkipWaitExpired]++
		}
		if w.kept {
			*kept++
			e.stats.Expired[why]++
			e.stats.Waiting -= w.heldCount()
			e.l.Resolved(rank, w.held, Placement[D]{Kind: KindExpired, Expiry: why})
		}
		return true
	})
	e.counts.Waiting -= n
	st.waiting.compact()
}

// settle hands a waiting span its place, once a step span placed it.
func (e *Engine[D]) settle(rank Rank, w waitingSpan, iteration int64, where Place) {
	e.counts.Waiting--
	kind := KindOutside
	key := rank.StepOf(iteration)
	if where == InStep {
		kind = KindCompute
		if w.isWait {
			kind = KindWait
			e.addWait(key, rank.Rank, w.iv)
		}
	}
	if w.kept {
		e.stats.Waiting -= w.heldCount()
		e.l.Resolved(rank, w.held, e.placement(key, kind))
	}
}

// TakeWaiting gives take every span of rank that waits for its step span,
// held, and removes those take says. For a holder's Decided (the engine's
// lock is held).
func (e *Engine[D]) TakeWaiting(rank Rank, take func(h Held, start int64) bool) {
	st, ok := e.ranks.Get(rank)
	if !ok {
		return
	}
	e.counts.Waiting -= st.waiting.RemoveIf(func(w waitingSpan, start int64, _ time.Duration) bool {
		if w.kept && take(w.held, start) {
			e.stats.Waiting -= w.heldCount()
			return true
		}
		return false
	})
}

// enforceBudget keeps the engine within its budget: the oldest open step is
// decided early with what it has, or, when spans waiting for their step
// span are older, those of the resource that has waited longest give up.
func (e *Engine[D]) enforceBudget() {
	if e.cfg.OverBudget == nil {
		return
	}
	for e.cfg.OverBudget(e.counts) {
		rank, oldest, waiting := e.oldestWaiting()
		if o := e.open.Oldest(); o != nil && (!waiting || o.Created <= oldest.arrived) {
			e.open.DecideOldest(e.decideFn)
			continue
		}
		if !waiting {
			return // what is left is the holder's own
		}
		st, _ := e.ranks.Get(rank)
		var kept int64
		e.giveUp(rank, st, ExpiredBudget, &kept, func(w waitingSpan, _ time.Duration) bool { return w.seq == oldest.seq })
	}
}

// arrival orders waiting spans: by the engine's time, then by resource.
type arrival struct {
	arrived time.Duration
	seq     uint64
}

func (a arrival) before(b arrival) bool {
	return a.arrived < b.arrived || a.arrived == b.arrived && a.seq < b.seq
}

// oldestWaiting is the rank with the span that has waited longest, and
// when and with which resource it arrived.
func (e *Engine[D]) oldestWaiting() (Rank, arrival, bool) {
	var rank Rank
	var oldest arrival
	found := false
	if e.counts.Waiting == 0 {
		return rank, oldest, false
	}
	e.ranks.All(func(r Rank, st *rankState) {
		if w, arrived, ok := st.waiting.Oldest(); ok {
			if a := (arrival{arrived: arrived, seq: w.seq}); !found || a.before(oldest) {
				rank, oldest, found = r, a, true
			}
		}
	})
	return rank, oldest, found
}
