// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// none is what the processor remembers of a decided step: it decides rank
// steps itself, as their step spans come.
type none = struct{}

// stepSamplingProcessor keeps the sampled steps of every rank. The step
// engine (internal/steps) places every span in its rank's step; this
// processor is its holder and keeps only its policy: a rank step is kept
// when its iteration is in the sample, or it holds an error or a straggler
// (decide.go). Spans whose step span has not come wait in the engine; when
// it comes, they are passed on at once in a request of their own
// (steps.Output), sent again until the next consumer takes it. It is safe
// for concurrent use: batches from several receivers, and the engine's
// ticker.
type stepSamplingProcessor struct {
	steps.Base[none]
	keepAll  bool
	sampler  *stepSampler
	reader   *steps.Reader
	runIDKey string
	maxHeld  int
	engine   *steps.Engine[none]
	out      *steps.Output
	tel      *telemetry

	// Under the engine's lock.
	memory *exceptionMemory
	b      batch
	t      tally
	ticked tally
	// held counts the spans waiting for their step span, for the tests and
	// the budget's message.
	held atomic.Int64
}

// newStepSamplingProcessor builds the processor of a config the collector
// validated.
func newStepSamplingProcessor(set processor.Settings, cfg *Config, next consumer.Traces, clk clock.Clock) (*stepSamplingProcessor, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("step_sampling: %w", err)
	}
	groupKeys := cfg.GroupKeys
	if !slices.Contains(groupKeys, cfg.RunIDKey) {
		groupKeys = append([]string{cfg.RunIDKey}, groupKeys...)
	}
	p := &stepSamplingProcessor{
		keepAll:  cfg.keepsAll(),
		sampler:  newStepSampler(cfg),
		reader:   steps.NewReader(cfg.RankKeys, nil, groupKeys),
		runIDKey: cfg.RunIDKey,
		maxHeld:  cfg.MaxBufferedSpans,
		tel:      tel,
		memory:   newExceptionMemory(steps.MaxRememberedRanks),
		b:        newBatch(),
	}
	p.engine, err = steps.New(steps.Config{
		Spans: cfg.Spans, Waits: cfg.Waits,
		OverBudget: func(n steps.Counts) bool { return n.Waiting > cfg.MaxBufferedSpans },
		// A span that waited goes out right after the batch its step span
		// came in, in a request of its own: if it fails it is sent again at
		// the next tick, not lost with the batch's own request.
		Next: next, SpansName: "spans that waited for their step span", PassAtOnce: true,
	}, p, clk, set.Logger)
	if err != nil {
		return nil, fmt.Errorf("step_sampling: %w", err)
	}
	p.out = p.engine.Output()
	return p, nil
}

// errFull refuses a batch while the spans passed on cannot be: the next
// consumer refuses them, and max_buffered_spans of them wait already.
var errFull = errors.New("step_sampling: max_buffered_spans of acknowledged spans wait for the next consumer to take them; retry later")

func (p *stepSamplingProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	if p.keepAll {
		return td, nil
	}
	if p.out.Unsent() > p.maxHeld {
		return td, errFull
	}
	var t tally
	st, ok := p.engine.Consume(func(eb *steps.Batch[none]) {
		p.consume(eb, td.ResourceSpans())
		t, p.t = p.t, tally{}
	})
	if ok {
		p.count(&t, &st)
	}
	p.tel.record(ctx, &t)
	if td.ResourceSpans().Len() == 0 {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// consume walks the batch's resources with the engine, decides their rank
// steps and carries the decisions out.
func (p *stepSamplingProcessor) consume(eb *steps.Batch[none], rss ptrace.ResourceSpansSlice) {
	b := &p.b
	b.reset(rss)
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		attrs := rs.Resource().Attributes()
		id, status := p.reader.Read(attrs)
		// An agent's step summaries (internal/stepsummary) pass untouched:
		// they are not telemetry of the job's steps.
		ok := status == rankattr.Valid && !stepsummary.Has(rs)
		b.begin(rs, ok, p.runIDOf(attrs))
		if ok {
			b.cur().chunk = eb.Watch(rs, id)
		}
		b.end()
	}
	p.decideSteps()
	p.apply(rss)
}

// runIDOf is the run id the sample hashes: an int run id and its decimal
// string are one run.
func (p *stepSamplingProcessor) runIDOf(attrs pcommon.Map) string {
	v, ok := attrs.Get(p.runIDKey)
	if !ok {
		return ""
	}
	var num [20]byte
	return rankattr.GroupValue(v, num[:0])
}

func (p *stepSamplingProcessor) start(context.Context, component.Host) error {
	if !p.keepAll {
		p.engine.Start(0)
	}
	return nil
}

// shutdown passes on everything held before returning.
func (p *stepSamplingProcessor) shutdown(context.Context) error {
	var err error
	if !p.keepAll {
		err = p.engine.Shutdown()
	}
	p.tel.shutdown()
	if err != nil {
		return fmt.Errorf("step_sampling: pass on held spans at shutdown: %w", err)
	}
	return nil
}

// Tick: the spans that waited span_wait in vain were passed on undecided
// (Resolved); the engine sends them now.
func (p *stepSamplingProcessor) Tick(time.Time, bool) {
	p.ticked, p.t = p.t, tally{}
}

// Send counts what the tick did.
func (p *stepSamplingProcessor) Send(st *steps.Stats, _ bool) error {
	t := p.ticked
	p.count(&t, st)
	p.tel.record(context.Background(), &t)
	return nil
}

// count counts what the engine did for the processor: the change in spans
// it holds for their step span, and the spans the next consumer refused
// (sent again at the next tick).
func (p *stepSamplingProcessor) count(t *tally, st *steps.Stats) {
	t.held += st.Waiting
	p.held.Add(st.Waiting)
	t.sendFailed += st.SendFailed
}
