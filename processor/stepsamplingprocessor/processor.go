// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor"

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stepSamplingProcessor keeps the sampled steps of every rank. It is safe
// for concurrent use: ConsumeTraces from several receivers, and the ticker
// that passes on held spans whose wait is over.
//
// This file receives batches and runs the ticker; place.go ties spans to
// their steps through internal/steps' placer; decide.go decides steps (the
// sample) and carries the decisions out; held.go keeps the spans that wait
// for their step span.
type stepSamplingProcessor struct {
	keepAll   bool
	sampler   *stepSampler
	reader    rankReader
	spans     steps.Recognizer
	wait      time.Duration
	maxHeld   int
	clk       clock.Clock
	epoch     time.Time
	logger    *zap.Logger
	next      consumer.Traces
	telemetry *telemetry

	mu           sync.Mutex
	closed       bool
	placer       *stepbusy.Timeline[steps.Rank]
	memory       *exceptionMemory
	held         heldStore
	scratch      *batch
	stepSeen     bool
	warnedNoStep bool

	loop *clock.Loop
}

// newStepSamplingProcessor builds the processor of a config the collector
// validated.
func newStepSamplingProcessor(set processor.Settings, cfg *Config, next consumer.Traces, clk clock.Clock) (*stepSamplingProcessor, error) {
	recognizer, err := steps.NewRecognizer(cfg.Spans, nil)
	if err != nil {
		return nil, fmt.Errorf("step_sampling: %w", err)
	}
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("step_sampling: %w", err)
	}
	return &stepSamplingProcessor{
		keepAll:   cfg.keepsAll(),
		sampler:   newStepSampler(cfg),
		reader:    newRankReader(cfg.RunIDKey, cfg.RankKeys, cfg.GroupKeys),
		spans:     recognizer,
		wait:      cfg.SpanWait,
		maxHeld:   cfg.MaxBufferedSpans,
		clk:       clk,
		epoch:     clk.Now(),
		logger:    set.Logger,
		next:      next,
		telemetry: tel,
		placer:    stepbusy.NewTimeline[steps.Rank](steps.MaxRememberedRanks),
		memory:    newExceptionMemory(steps.MaxRememberedRanks),
		held:      newHeldStore(),
		scratch:   newBatch(),
	}, nil
}

// now is the processor's monotonic time.
func (p *stepSamplingProcessor) now() time.Duration { return p.clk.Now().Sub(p.epoch) }

func (p *stepSamplingProcessor) processTraces(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
	if p.keepAll {
		return td, nil
	}
	var t tally
	p.mu.Lock()
	p.consume(td.ResourceSpans(), &t)
	p.mu.Unlock()
	p.telemetry.record(ctx, &t)
	if td.ResourceSpans().Len() == 0 {
		return td, processorhelper.ErrSkipProcessingData
	}
	return td, nil
}

// consume decides what it can of the batch at once: most spans come with
// their step span. The rest is held; held spans whose step span came now
// join the batch if kept.
func (p *stepSamplingProcessor) consume(rss ptrace.ResourceSpansSlice, t *tally) {
	b := p.scratch
	b.reset()
	p.placeBatch(rss, b)
	p.decideSteps(b)
	p.applyBatch(rss, b, p.now(), t)
	p.emitResolved(rss, b, t)
	p.enforceBudget(rss, t)
}

func (p *stepSamplingProcessor) start(context.Context, component.Host) error {
	if p.keepAll {
		return nil
	}
	p.loop = clock.StartLoop(p.clk, clock.TickEvery(p.wait), func() { p.tick(context.Background()) })
	return nil
}

// tick passes on, undecided, the held spans whose span_wait is over.
func (p *stepSamplingProcessor) tick(ctx context.Context) {
	var t tally
	td := ptrace.NewTraces()
	p.mu.Lock()
	through := p.now() - p.wait
	for c := p.held.oldest(); c != nil && c.Arrival <= through; c = p.held.oldest() {
		n := int64(p.held.passOn(c, td.ResourceSpans()))
		p.held.pop()
		t.undecided[causeWaitExpired] += n
		t.held -= n
	}
	p.held.sweep()
	warn := t.undecided[causeWaitExpired] > 0 && !p.stepSeen && !p.warnedNoStep
	if warn {
		p.warnedNoStep = true
	}
	p.mu.Unlock()
	if warn {
		p.logger.Warn("no span named in step_span_names with a usable iteration_attribute has come yet, "+
			"so spans are held for span_wait and then passed on undecided; logged once",
			zap.Strings("step_span_names", p.spans.StepSpanNames()),
			zap.String("iteration_attribute", p.spans.IterationAttribute()),
			zap.Int64("spans", t.undecided[causeWaitExpired]),
			zap.String("fix", "check step_span_names and iteration_attribute"))
	}
	_ = p.send(ctx, td, causeWaitExpired)
	p.telemetry.record(ctx, &t)
}

// shutdown stops the ticker and passes on everything held before returning.
func (p *stepSamplingProcessor) shutdown(ctx context.Context) error {
	p.loop.Stop()
	var t tally
	td := ptrace.NewTraces()
	p.mu.Lock()
	p.closed = true
	for c := p.held.oldest(); c != nil; c = p.held.oldest() {
		n := int64(p.held.passOn(c, td.ResourceSpans()))
		p.held.pop()
		t.undecided[causeShutdown] += n
		t.held -= n
	}
	p.mu.Unlock()
	err := p.send(ctx, td, causeShutdown)
	p.telemetry.record(ctx, &t)
	p.telemetry.shutdown()
	if err != nil {
		return fmt.Errorf("step_sampling: pass on held spans at shutdown: %w", err)
	}
	return nil
}

// send passes on held spans undecided, for the reason cause.
func (p *stepSamplingProcessor) send(ctx context.Context, td ptrace.Traces, cause undecidedCause) error {
	if td.ResourceSpans().Len() == 0 {
		return nil
	}
	if err := p.next.ConsumeTraces(ctx, td); err != nil {
		p.logger.Error("the next consumer refused held spans passed on undecided",
			zap.String("cause", cause.String()), zap.Int("spans", td.SpanCount()), zap.Error(err))
		return err
	}
	return nil
}
