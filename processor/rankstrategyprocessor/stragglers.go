package rankstrategyprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor"

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
)

// stragglerRatioKey carries, on every span of a kept straggler step, the
// rank's step duration divided by the median of that step across ranks. It is
// a sibling of keptReasonKey under nemo.rank_strategy: neither key is a
// dotted prefix of the other, so Weave accepts both.
const stragglerRatioKey = "nemo.rank_strategy.straggler_ratio"

// tickInterval is how often the buffer looks for steps to decide: a tenth of
// decision_wait, between 10ms and 1s. A step is decided at most one tick
// after its wait ends.
func tickInterval(wait time.Duration) time.Duration {
	return min(max(wait/10, 10*time.Millisecond), time.Second)
}

// stepKey names one training step of one run and worker group.
type stepKey struct {
	group     uint64
	iteration int64
}

// rankID is one rank of one run and group. owner hashes group and rank.
type rankID struct {
	owner uint64
	group uint64
	rank  int64
}

// spanKey names a span within one rank (owner) and trace. Span ids are only
// unique within a process: Megatron seeds the RNG alike on data-parallel
// ranks, and runs reuse ids.
type spanKey struct {
	owner uint64
	trace uint64
	span  pcommon.SpanID
}

// heldChunk is one resource's spans from one batch, moved out of the batch
// whole (no copy). Its spans are referenced in place and leave it only when
// they are passed on. It is counted against max_buffered_spans, all its
// spans, until none of them waits any more; then it is garbage.
type heldChunk struct {
	rs      ptrace.ResourceSpans
	arrival time.Duration
	spans   int
	// waiting counts the references still held (pending or in an open
	// step), plus one while the batch that brought the chunk is placed.
	waiting int
}

// spanRef is one held span.
type spanRef struct {
	chunk *heldChunk
	span  ptrace.Span
	scope int32
	// ghost marks a span keep_errors already passed on: it ties its
	// children to its step (and a step span gives its duration) but is
	// never passed on again.
	ghost bool
}

// rankState is a rank's spans not yet tied to a step, in arrival order. It
// outlives them by a decision_wait, so that a rank sending every few seconds
// reuses it.
type rankState struct {
	id         rankID
	unresolved []spanRef
	lastSeen   time.Duration
}

// openStep is a step waiting for its decision.
type openStep struct {
	key     stepKey
	created time.Duration
	// durations holds every rank's step duration in ns (kept ranks' too),
	// -1 when the step span had no usable timestamps.
	durations map[int64]int64
	// held holds the dropped ranks' spans of this step.
	held map[int64][]spanRef
}

// stepDecision is what was decided for a step: the ranks kept as stragglers
// and the bar a late rank must pass.
type stepDecision struct {
	median float64 // ns; 0 when no rank had a usable duration
	cutoff float64 // threshold x median; +Inf when the median is unknown
	kept   []keptRank
}

type keptRank struct {
	rank  int64
	ratio float64
}

func (d *stepDecision) keptRatio(rank int64) (float64, bool) {
	for _, k := range d.kept {
		if k.rank == rank {
			return k.ratio, true
		}
	}
	return 0, false
}

// admit decides a rank whose step span arrived after the step was decided:
// it is kept when it clears the step's cutoff and the step has room.
func (d *stepDecision) admit(rank, duration int64, maxRanks int) (ratio float64, keep, added bool) {
	if r, ok := d.keptRatio(rank); ok {
		return r, true, false
	}
	if duration > 0 && float64(duration) >= d.cutoff && len(d.kept) < maxRanks {
		r := roundRatio(float64(duration) / d.median)
		d.kept = append(d.kept, keptRank{rank: rank, ratio: r})
		return r, true, true
	}
	return 0, false, false
}

func roundRatio(r float64) float64 { return math.Round(r*1000) / 1000 }

// decisionCache remembers the last size decisions, first in first out.
type decisionCache struct {
	size   int
	byStep map[stepKey]*stepDecision
	ring   []stepKey
	next   int
}

func newDecisionCache(size int) decisionCache {
	return decisionCache{size: size, byStep: make(map[stepKey]*stepDecision)}
}

func (c *decisionCache) get(k stepKey) *stepDecision { return c.byStep[k] }

func (c *decisionCache) put(k stepKey, d *stepDecision) {
	if _, ok := c.byStep[k]; ok {
		c.byStep[k] = d
		return
	}
	if len(c.ring) < c.size {
		c.ring = append(c.ring, k)
	} else {
		delete(c.byStep, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % c.size
	}
	c.byStep[k] = d
}

// spanSteps maps recently seen spans of dropped ranks to their step's
// iteration, so that a span whose parent arrived earlier, maybe in another
// batch, finds its step. Two generations bound it: the current one is
// retired when it reaches limit entries or is one decision_wait old, so an
// entry lives between one and two waits and at most 2 x limit are kept.
type spanSteps struct {
	cur, prev map[spanKey]int64
	limit     int
	started   time.Duration
}

func newSpanSteps(limit int) spanSteps {
	return spanSteps{cur: make(map[spanKey]int64), prev: make(map[spanKey]int64), limit: limit}
}

func (m *spanSteps) get(k spanKey) (int64, bool) {
	if it, ok := m.cur[k]; ok {
		return it, true
	}
	it, ok := m.prev[k]
	return it, ok
}

func (m *spanSteps) put(k spanKey, iteration int64, now time.Duration) {
	m.cur[k] = iteration
	if len(m.cur) >= m.limit {
		m.rotate(now, 0)
	}
}

// rotate retires the current generation. A generation retired by age sizes
// the next one, which saves growing it again at a steady rate.
func (m *spanSteps) rotate(now time.Duration, sizeHint int) {
	m.prev = m.cur
	m.cur = make(map[spanKey]int64, min(sizeHint, m.limit))
	m.started = now
}

func (m *spanSteps) len() int { return len(m.cur) + len(m.prev) }

// keptOutput collects kept straggler spans, grouped under copies of their
// original resource and scope, until the ticker passes them on.
type keptOutput struct {
	td      ptrace.Traces
	count   int
	byChunk map[*heldChunk]*keptResource
}

type keptResource struct {
	rs ptrace.ResourceSpans
	// scopes maps a scope index in the chunk to its index in rs, -1 when
	// not created yet.
	scopes []int32
}

func newKeptOutput() keptOutput {
	return keptOutput{td: ptrace.NewTraces(), byChunk: make(map[*heldChunk]*keptResource)}
}

// add moves the span out of its chunk into the output and marks it.
func (o *keptOutput) add(ref spanRef, ratio float64) {
	kr := o.byChunk[ref.chunk]
	if kr == nil {
		src := ref.chunk.rs
		rs := o.td.ResourceSpans().AppendEmpty()
		src.Resource().CopyTo(rs.Resource())
		rs.SetSchemaUrl(src.SchemaUrl())
		kr = &keptResource{rs: rs, scopes: make([]int32, src.ScopeSpans().Len())}
		for i := range kr.scopes {
			kr.scopes[i] = -1
		}
		o.byChunk[ref.chunk] = kr
	}
	si := kr.scopes[ref.scope]
	if si < 0 {
		src := ref.chunk.rs.ScopeSpans().At(int(ref.scope))
		ss := kr.rs.ScopeSpans().AppendEmpty()
		src.Scope().CopyTo(ss.Scope())
		ss.SetSchemaUrl(src.SchemaUrl())
		si = int32(kr.rs.ScopeSpans().Len() - 1)
		kr.scopes[ref.scope] = si
	}
	dst := kr.rs.ScopeSpans().At(int(si)).Spans().AppendEmpty()
	ref.span.MoveTo(dst)
	dst.Attributes().PutStr(keptReasonKey, reasonStraggler.String())
	dst.Attributes().PutDouble(stragglerRatioKey, ratio)
	o.count++
}

func (o *keptOutput) take() (ptrace.Traces, int) {
	td, n := o.td, o.count
	if n == 0 {
		return td, 0
	}
	o.td = ptrace.NewTraces()
	o.count = 0
	clear(o.byChunk)
	return td, n
}

// candidate is a held rank whose step cleared the cutoff.
type candidate struct {
	rank     int64
	duration int64
}

// stragglerBuffer holds the step subtrees of the ranks the strategy drops
// and keeps a rank's step when it was a straggler. It is safe for concurrent
// use: ConsumeTraces from several receivers and the decision ticker.
type stragglerBuffer struct {
	wait      time.Duration
	stepName  string
	iterKey   string
	threshold float64
	maxRanks  int
	maxHeld   int
	rankKeys  []string
	selector  *rankSelector
	seed      maphash.Seed
	clock     clock
	epoch     time.Time
	logger    *zap.Logger
	next      consumer.Traces
	record    func(context.Context, *tally)

	mu        sync.Mutex
	closed    bool
	ranks     map[uint64]*rankState
	spanSteps spanSteps
	open      map[stepKey]*openStep
	queue     []*openStep // open steps, oldest first
	decided   decisionCache
	out       keptOutput
	// held counts the spans of every chunk that still has a span waiting;
	// it and out.count are what max_buffered_spans bounds.
	held int
	// observed counts the rank durations recorded in open steps, bounded
	// by max_buffered_spans too.
	observed       int
	stepSeen       bool
	warnedNoStep   bool
	warnedLoneRank bool
	// rankStepHint sizes a rank's span list in a new step: the largest
	// rank step of the last step decided, so that one allocation fits.
	rankStepHint int

	// Scratch space, used under mu.
	durations  []int64
	candidates []candidate
	childHead  map[spanKey]int32
	childNext  []int32
	queueIdx   []int32

	stop   chan struct{}
	done   chan struct{}
	ticker ticker
}

func newStragglerBuffer(cfg *StragglersConfig, rankKeys []string, selector *rankSelector, clk clock, logger *zap.Logger,
	next consumer.Traces, record func(context.Context, *tally),
) (*stragglerBuffer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("stragglers: %w", err)
	}
	if len(rankKeys) == 0 {
		return nil, errors.New("stragglers: rank_keys must list at least one attribute key, to tell the ranks of a step apart")
	}
	return &stragglerBuffer{
		wait:         cfg.DecisionWait,
		stepName:     cfg.StepSpanName,
		iterKey:      cfg.IterationAttribute,
		threshold:    cfg.Threshold,
		maxRanks:     cfg.MaxRanksPerStep,
		maxHeld:      cfg.MaxBufferedSpans,
		rankKeys:     rankKeys,
		selector:     selector,
		seed:         maphash.MakeSeed(),
		clock:        clk,
		epoch:        clk.Now(),
		logger:       logger,
		next:         next,
		record:       record,
		ranks:        make(map[uint64]*rankState),
		spanSteps:    newSpanSteps(max(cfg.MaxBufferedSpans, 1024)),
		open:         make(map[stepKey]*openStep),
		decided:      newDecisionCache(cfg.DecisionCacheSize),
		out:          newKeptOutput(),
		childHead:    make(map[spanKey]int32),
		rankStepHint: 8,
	}, nil
}

// now is the buffer's monotonic time.
func (b *stragglerBuffer) now() time.Duration { return b.clock.Now().Sub(b.epoch) }

// start starts the decision ticker.
func (b *stragglerBuffer) start() {
	b.ticker = b.clock.NewTicker(tickInterval(b.wait))
	b.stop = make(chan struct{})
	b.done = make(chan struct{})
	go b.run(b.ticker, b.stop, b.done)
}

func (b *stragglerBuffer) run(tk ticker, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-tk.C():
			b.tick(context.Background())
		}
	}
}

// tick decides the steps whose wait is over, drops the spans that waited in
// vain for a step, and passes the kept spans on.
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
	if b.stop != nil {
		close(b.stop)
		<-b.done
		b.ticker.Stop()
		b.stop = nil
	}
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
		b.logger.Error("rank_strategy: the next consumer refused kept straggler spans", zap.Int("spans", n), zap.Error(err))
		return err
	}
	return nil
}

func (b *stragglerBuffer) decideDue(t *tally) (ptrace.Traces, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for len(b.queue) > 0 && b.queue[0].created+b.wait <= now {
		b.decide(b.popOldest(), false, t)
	}
	if expired := b.expirePending(now-b.wait, t); expired > 0 && !b.stepSeen && !b.warnedNoStep {
		b.warnedNoStep = true
		b.logger.Warn(fmt.Sprintf("rank_strategy: stragglers: no span named %q with a usable %q attribute has come from a dropped rank yet, so their spans are held for decision_wait and then dropped. "+
			"Check stragglers::step_span_name and stragglers::iteration_attribute. Logged once.", b.stepName, b.iterKey),
			zap.Int("dropped_spans", expired))
	}
	if now-b.spanSteps.started >= b.wait {
		b.spanSteps.rotate(now, len(b.spanSteps.cur))
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
	for len(b.queue) > 0 {
		b.decide(b.popOldest(), false, t)
	}
	b.expirePending(math.MaxInt64, t)
	b.spanSteps = newSpanSteps(b.spanSteps.limit)
	clear(b.ranks)
	td, n := b.out.take()
	t.held -= int64(n)
	return td, n
}

// hold takes over the resource of a rank the strategy drops: its spans wait
// for their step's decision instead of being dropped. Spans keep_errors
// keeps stay in the batch. handled is false when the resource has no usable
// rank; remove says whether the resource leaves the batch.
func (b *stragglerBuffer) hold(rs ptrace.ResourceSpans, keepErrors bool, t *tally) (handled, remove bool) {
	attrs := rs.Resource().Attributes()
	rank, _, status := rankattr.Lookup(attrs, b.rankKeys)
	if status != rankattr.Valid {
		return false, false
	}
	group := b.selector.groupHash(attrs)
	id := rankID{owner: maphash.Comparable(b.seed, [2]uint64{group, uint64(rank)}), group: group, rank: rank}

	chunkTraces := ptrace.NewTraces()
	chunkRS := chunkTraces.ResourceSpans().AppendEmpty()
	exceptional := false
	if keepErrors {
		_, exceptional = scanExceptionalSpans(rs)
	}
	if exceptional {
		// Rare: the batch keeps the exceptional spans, the buffer holds a
		// copy of the resource in which they are ghosts.
		rs.CopyTo(chunkRS)
		filterExceptionalSpans(rs, t, nil)
	} else {
		rs.MoveTo(chunkRS)
		remove = true
	}
	spans := countSpans(chunkRS)

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		dropped := spans
		if exceptional {
			dropped -= countSpans(rs)
		}
		t.dropped[reasonNotSelected] += int64(dropped)
		return true, remove
	}
	now := b.now()
	chunk := &heldChunk{rs: chunkRS, arrival: now, spans: spans, waiting: 1}
	b.held += spans
	t.held += int64(spans)

	st := b.ranks[id.owner]
	if st != nil {
		st.lastSeen = now
	}
	resolved := false
	sss := chunkRS.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		ss := sss.At(i).Spans()
		for j := 0; j < ss.Len(); j++ {
			s := ss.At(j)
			ref := spanRef{chunk: chunk, span: s, scope: int32(i)}
			if exceptional {
				_, ref.ghost = spanKeepReason(s)
			}
			chunk.waiting++
			switch b.place(id, ref, now, t) {
			case placedInStep:
				resolved = true
			case placedPending:
				if st == nil {
					st = &rankState{id: id, lastSeen: now}
					b.ranks[id.owner] = st
				}
				st.unresolved = append(st.unresolved, ref)
			}
		}
	}
	if resolved && st != nil {
		b.resolvePending(st, now, t)
	}
	b.release(chunk, t)
	b.enforceBudget(t)
	return true, remove
}

type placement uint8

const (
	placedInStep placement = iota // tied to a step, open or decided
	placedPending
	placedDropped
)

// place ties a newly arrived span to its step when it can: a step span is
// its own step; another span is in its parent's step when the parent was
// seen. A root span that is not a step span belongs to no step.
func (b *stragglerBuffer) place(id rankID, ref spanRef, now time.Duration, t *tally) placement {
	s := ref.span
	key := spanKey{owner: id.owner, trace: foldTraceID(s.TraceID()), span: s.SpanID()}
	if s.Name() == b.stepName {
		if iteration, ok := b.iteration(s); ok {
			b.stepSeen = true
			b.spanSteps.put(key, iteration, now)
			b.joinAsStep(id, ref, iteration, stepDuration(s), now, t)
			return placedInStep
		}
	}
	parent := s.ParentSpanID()
	if parent.IsEmpty() {
		b.drop(ref, t)
		return placedDropped
	}
	if iteration, ok := b.spanSteps.get(spanKey{owner: id.owner, trace: key.trace, span: parent}); ok {
		b.spanSteps.put(key, iteration, now)
		b.join(id, ref, iteration, t)
		return placedInStep
	}
	return placedPending
}

// tryResolve ties a pending span to its parent's step if the parent is known.
func (b *stragglerBuffer) tryResolve(id rankID, ref spanRef, now time.Duration, t *tally) bool {
	s := ref.span
	trace := foldTraceID(s.TraceID())
	iteration, ok := b.spanSteps.get(spanKey{owner: id.owner, trace: trace, span: s.ParentSpanID()})
	if !ok {
		return false
	}
	b.spanSteps.put(spanKey{owner: id.owner, trace: trace, span: s.SpanID()}, iteration, now)
	b.join(id, ref, iteration, t)
	return true
}

// resolvePending ties a rank's pending spans to steps after some of its
// spans found theirs. Children end, and so arrive, before their parents:
// walking the pending spans newest first meets a parent before its children,
// so one pass ties a whole subtree whatever batches it came in. Spans left
// over whose parent is now known (a parent that arrived before its child)
// are tied through an index of the pending spans by parent.
func (b *stragglerBuffer) resolvePending(st *rankState, now time.Duration, t *tally) {
	u := st.unresolved
	if len(u) == 0 {
		return
	}
	resolved := false
	for i := len(u) - 1; i >= 0; i-- {
		if b.tryResolve(st.id, u[i], now, t) {
			u[i].chunk = nil
			resolved = true
		}
	}
	if resolved {
		b.resolveRemaining(st, now, t)
	}
	kept := u[:0]
	for _, ref := range u {
		if ref.chunk != nil {
			kept = append(kept, ref)
		}
	}
	clear(u[len(kept):])
	st.unresolved = kept
}

func (b *stragglerBuffer) resolveRemaining(st *rankState, now time.Duration, t *tally) {
	u := st.unresolved
	queue := b.queueIdx[:0]
	for i, ref := range u {
		if ref.chunk == nil {
			continue
		}
		if _, ok := b.spanSteps.get(b.parentKey(st.id, ref)); ok {
			queue = append(queue, int32(i))
		}
	}
	if len(queue) == 0 {
		b.queueIdx = queue
		return
	}
	clear(b.childHead)
	next := slices.Grow(b.childNext[:0], len(u))[:len(u)]
	for i := len(u) - 1; i >= 0; i-- {
		ref := u[i]
		next[i] = -1
		if ref.chunk == nil {
			continue
		}
		pk := b.parentKey(st.id, ref)
		if head, ok := b.childHead[pk]; ok {
			next[i] = head
		}
		b.childHead[pk] = int32(i)
	}
	for len(queue) > 0 {
		i := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		ref := u[i]
		if ref.chunk == nil || !b.tryResolve(st.id, ref, now, t) {
			continue
		}
		u[i].chunk = nil
		own := spanKey{owner: st.id.owner, trace: foldTraceID(ref.span.TraceID()), span: ref.span.SpanID()}
		if head, ok := b.childHead[own]; ok {
			for c := head; c >= 0; c = next[c] {
				queue = append(queue, c)
			}
			delete(b.childHead, own)
		}
	}
	b.queueIdx = queue
	b.childNext = next
}

func (b *stragglerBuffer) parentKey(id rankID, ref spanRef) spanKey {
	return spanKey{owner: id.owner, trace: foldTraceID(ref.span.TraceID()), span: ref.span.ParentSpanID()}
}

// joinAsStep handles a rank's step span: it records the rank's duration and
// holds the span in its open step; for a step already decided, the rank is
// judged against that decision.
func (b *stragglerBuffer) joinAsStep(id rankID, ref spanRef, iteration, duration int64, now time.Duration, t *tally) {
	key := stepKey{group: id.group, iteration: iteration}
	if st := b.open[key]; st != nil {
		b.observe(st, id.rank, duration)
		b.holdIn(st, id.rank, ref, t)
		return
	}
	if d := b.decided.get(key); d != nil {
		ratio, keep, added := d.admit(id.rank, duration, b.maxRanks)
		if added {
			t.stragglersKept++
		}
		b.follow(ref, keep, ratio, true, t)
		return
	}
	st := b.openStep(key, now)
	b.observe(st, id.rank, duration)
	b.holdIn(st, id.rank, ref, t)
}

// join holds a span in its open step, or makes it follow its step's decision.
func (b *stragglerBuffer) join(id rankID, ref spanRef, iteration int64, t *tally) {
	key := stepKey{group: id.group, iteration: iteration}
	if st := b.open[key]; st != nil {
		b.holdIn(st, id.rank, ref, t)
		return
	}
	d := b.decided.get(key)
	if d == nil {
		// Decided so long ago that the decision was evicted: dropped, as
		// most ranks' steps are.
		b.follow(ref, false, 0, false, t)
		return
	}
	ratio, keep := d.keptRatio(id.rank)
	b.follow(ref, keep, ratio, true, t)
}

// follow applies a decision taken before the span arrived.
func (b *stragglerBuffer) follow(ref spanRef, keep bool, ratio float64, cached bool, t *tally) {
	if !ref.ghost {
		t.lateSpans++
		if cached {
			t.cacheHits++
		}
	}
	if keep {
		b.emit(ref, ratio, t)
	} else {
		b.drop(ref, t)
	}
}

func (b *stragglerBuffer) holdIn(st *openStep, rank int64, ref spanRef, t *tally) {
	if ref.ghost {
		b.release(ref.chunk, t)
		return
	}
	refs := st.held[rank]
	if refs == nil {
		refs = make([]spanRef, 0, b.rankStepHint)
	}
	st.held[rank] = append(refs, ref)
}

func (b *stragglerBuffer) observe(st *openStep, rank, duration int64) {
	prev, seen := st.durations[rank]
	if !seen {
		b.observed++
	}
	if !seen || duration > prev {
		st.durations[rank] = duration
	}
}

func (b *stragglerBuffer) openStep(key stepKey, now time.Duration) *openStep {
	st := &openStep{key: key, created: now, durations: make(map[int64]int64), held: make(map[int64][]spanRef)}
	b.open[key] = st
	b.queue = append(b.queue, st)
	return st
}

func (b *stragglerBuffer) popOldest() *openStep {
	st := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	return st
}

// observeKept records the step durations of a rank the strategy keeps: its
// spans pass through untouched, but its steps set the median that the
// dropped ranks are measured against.
func (b *stragglerBuffer) observeKept(rs ptrace.ResourceSpans, t *tally) {
	var id rankID
	identified, locked := false, false
	sss := rs.ScopeSpans()
	for i := 0; i < sss.Len(); i++ {
		ss := sss.At(i).Spans()
		for j := 0; j < ss.Len(); j++ {
			s := ss.At(j)
			if s.Name() != b.stepName {
				continue
			}
			iteration, ok := b.iteration(s)
			if !ok {
				continue
			}
			if !identified {
				attrs := rs.Resource().Attributes()
				rank, _, status := rankattr.Lookup(attrs, b.rankKeys)
				if status != rankattr.Valid {
					return
				}
				id = rankID{group: b.selector.groupHash(attrs), rank: rank}
				identified = true
			}
			if !locked {
				b.mu.Lock()
				defer b.mu.Unlock()
				if b.closed {
					return
				}
				locked = true
			}
			key := stepKey{group: id.group, iteration: iteration}
			st := b.open[key]
			if st == nil {
				if b.decided.get(key) != nil {
					continue // too late to matter
				}
				st = b.openStep(key, b.now())
			}
			b.observe(st, id.rank, stepDuration(s))
		}
	}
	if locked {
		b.enforceBudget(t)
	}
}

// decide keeps, among the held ranks of a step, those whose step duration
// is at least threshold x the median of all ranks' durations, slowest first
// and at most max_ranks_per_step; it drops the others.
func (b *stragglerBuffer) decide(st *openStep, early bool, t *tally) {
	delete(b.open, st.key)
	b.observed -= len(st.durations)

	ds := b.durations[:0]
	for _, d := range st.durations {
		if d > 0 {
			ds = append(ds, d)
		}
	}
	b.durations = ds
	dec := &stepDecision{median: median(ds), cutoff: math.Inf(1)}
	if dec.median > 0 {
		dec.cutoff = b.threshold * dec.median
	}

	cands := b.candidates[:0]
	for rank := range st.held {
		if d := st.durations[rank]; d > 0 && float64(d) >= dec.cutoff {
			cands = append(cands, candidate{rank: rank, duration: d})
		}
	}
	slices.SortFunc(cands, func(a, c candidate) int {
		if a.duration != c.duration {
			return cmp.Compare(c.duration, a.duration)
		}
		return cmp.Compare(a.rank, c.rank)
	})
	if len(cands) > b.maxRanks {
		cands = cands[:b.maxRanks]
	}
	b.candidates = cands

	dec.kept = make([]keptRank, 0, len(cands))
	for _, c := range cands {
		ratio := roundRatio(float64(c.duration) / dec.median)
		dec.kept = append(dec.kept, keptRank{rank: c.rank, ratio: ratio})
		for _, ref := range st.held[c.rank] {
			b.emit(ref, ratio, t)
		}
		delete(st.held, c.rank)
	}
	heldRanks := len(st.held) + len(cands)
	largest := 0
	for _, refs := range st.held {
		largest = max(largest, len(refs))
		for _, ref := range refs {
			b.drop(ref, t)
		}
	}
	if largest > 0 {
		b.rankStepHint = min(max(largest, 8), 4096)
	}
	if !early && heldRanks > 0 && len(st.durations) == 1 && !b.warnedLoneRank {
		b.warnedLoneRank = true
		b.logger.Warn("rank_strategy: stragglers: a step was decided having seen a single rank, which is never a straggler. "+
			"Ranks are compared only within their run and group (group_keys): if every rank carries its own run id "+
			"(NeMo Lens mints one per process unless NEMO_LENS_RUN_ID, MEGATRON_OTEL_RUN_ID or SLURM_JOB_ID is set), no rank is ever compared with another. "+
			"Also check that this collector receives every rank of the run. Logged once.",
			zap.Int64("iteration", st.key.iteration))
	}
	st.held = nil
	b.decided.put(st.key, dec)
	if heldRanks > 0 {
		t.stepsDecided++
		t.stragglersKept += int64(len(cands))
		if early {
			t.earlyDecisions++
		}
	}
}

// median sorts ds and returns its median, 0 for none.
func median(ds []int64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	mid := len(ds) / 2
	if len(ds)%2 == 1 {
		return float64(ds[mid])
	}
	return (float64(ds[mid-1]) + float64(ds[mid])) / 2
}

func (b *stragglerBuffer) emit(ref spanRef, ratio float64, t *tally) {
	if !ref.ghost {
		b.out.add(ref, ratio)
		t.kept[reasonStraggler]++
		t.held++
	}
	b.release(ref.chunk, t)
}

func (b *stragglerBuffer) drop(ref spanRef, t *tally) {
	if !ref.ghost {
		t.dropped[reasonNotSelected]++
	}
	b.release(ref.chunk, t)
}

// release gives up one reference to a chunk; the last one uncounts it.
func (b *stragglerBuffer) release(c *heldChunk, t *tally) {
	c.waiting--
	if c.waiting == 0 {
		b.held -= c.spans
		t.held -= int64(c.spans)
	}
}

// expirePending drops the pending spans that arrived at or before through
// and returns how many there were.
func (b *stragglerBuffer) expirePending(through time.Duration, t *tally) int {
	n := 0
	for _, st := range b.ranks {
		k := 0
		for k < len(st.unresolved) && st.unresolved[k].chunk.arrival <= through {
			if !st.unresolved[k].ghost {
				n++
			}
			b.drop(st.unresolved[k], t)
			k++
		}
		if k > 0 {
			st.unresolved = slices.Delete(st.unresolved, 0, k)
		}
	}
	return n
}

// forgetIdleRanks drops the state of ranks that have nothing pending and
// sent nothing for a decision_wait; more than max_buffered_spans of them
// are not kept even if they are not idle yet.
func (b *stragglerBuffer) forgetIdleRanks(now time.Duration) {
	crowded := len(b.ranks) > b.maxHeld
	for owner, st := range b.ranks {
		if len(st.unresolved) == 0 && (crowded || now-st.lastSeen >= b.wait) {
			delete(b.ranks, owner)
		}
	}
}

func (b *stragglerBuffer) oldestPending() (time.Duration, bool) {
	oldest, found := time.Duration(math.MaxInt64), false
	for _, st := range b.ranks {
		if len(st.unresolved) > 0 && st.unresolved[0].chunk.arrival < oldest {
			oldest, found = st.unresolved[0].chunk.arrival, true
		}
	}
	return oldest, found
}

func (b *stragglerBuffer) overBudget() bool {
	return b.held+b.out.count > b.maxHeld || b.observed > b.maxHeld
}

// enforceBudget keeps the buffer within max_buffered_spans: the oldest open
// step is decided early with what it has, or, when spans waiting for a step
// are older, the oldest of those are dropped (an eighth of decision_wait's
// worth at a time). Either way it is counted.
func (b *stragglerBuffer) enforceBudget(t *tally) {
	for b.overBudget() {
		oldest, pending := b.oldestPending()
		if len(b.queue) > 0 && (!pending || b.queue[0].created <= oldest) {
			b.decide(b.popOldest(), true, t)
			continue
		}
		if !pending {
			return // only kept spans waiting for the next tick are left
		}
		b.expirePending(oldest+max(b.wait/8, 1), t)
	}
}

func (b *stragglerBuffer) iteration(s ptrace.Span) (int64, bool) {
	v, ok := s.Attributes().Get(b.iterKey)
	if !ok {
		return 0, false
	}
	return rankattr.Parse(v)
}

// stepDuration is the span's duration in ns, -1 when its timestamps are
// missing or reversed.
func stepDuration(s ptrace.Span) int64 {
	start, end := s.StartTimestamp(), s.EndTimestamp()
	if start == 0 || end <= start {
		return -1
	}
	return int64(min(uint64(end-start), math.MaxInt64))
}

func foldTraceID(id pcommon.TraceID) uint64 {
	return binary.LittleEndian.Uint64(id[:8]) ^ binary.LittleEndian.Uint64(id[8:])
}
