// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// stepsProcessor reads every rank's spans with the step engine and hands
// what it finds to its feeds (feed.go): the step metrics, and the stall
// detector and goodput when on. It is the engine's Observer; it sends what
// the feeds collect from the engine's ticker. It is safe for concurrent
// use.
type stepsProcessor struct {
	engine *steps.Engine[none]
	reader *steps.Reader
	runs   *runTable
	// run is the run of the resource being walked.
	run   *runState
	steps *stepMetrics
	// feeds are steps, then the stall detector and goodput when on.
	feeds  []feed
	stalls bool // the stall detector is on
	logger *zap.Logger
	tel    *telemetry
	// next gets the step metrics and stall gauges, nextLogs the stall
	// records: the pipelines of the nemo_steps receiver, set before Start;
	// either may be nil (the receiver is not in a pipeline of that signal).
	next     consumer.Metrics
	nextLogs consumer.Logs

	// What the last tick collected, sent outside the engine's lock.
	out     *pointWriter
	batches pointBatches
	logs    plog.Logs
	stalled stallCounts
}

var _ steps.Observer[none] = (*stepsProcessor)(nil)

// newProcessor builds the processor of a config the collector validated.
func newProcessor(set processor.Settings, cfg *Config, clk clock.Clock) (*stepsProcessor, error) {
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	out := newPointWriter()
	runs := newRunTable(cfg)
	c := &stepsProcessor{
		reader: steps.NewReader(cfg.RankKeys, cfg.WorldSizeKeys, cfg.GroupKeys),
		runs:   runs,
		steps:  newStepMetrics(cfg, runs, out, clk.Now()),
		logger: set.Logger,
		tel:    tel,
		out:    out,
	}
	c.engine, err = steps.Observe(steps.Config{
		Spans: cfg.Spans, WaitSpans: cfg.WaitSpans, Waits: cfg.Waits,
		Scores: true, History: cfg.History, DecidedSize: decidedCacheSize,
		OverBudget: func(n steps.Counts) bool { return n.OpenRankSteps > cfg.MaxOpenRankSteps },
	}, c, clk, set.Logger)
	if err != nil {
		return nil, fmt.Errorf("nemo_steps: %w", err)
	}
	c.feeds = []feed{c.steps}
	if s := cfg.Stalls.Get(); s != nil {
		c.feeds = append(c.feeds, newStallFeed(s, c.engine.Recognizer(), runs, out, set.Logger))
		c.stalls = true
	}
	if g := cfg.Goodput.Get(); g != nil { // after the stall detector: it reads its events
		c.feeds = append(c.feeds, newGoodputFeed(g, cfg.DecisionWait, runs, out))
	}
	return c, nil
}

// decidedCacheSize is how many decided steps are remembered, so that a
// rank whose step span comes after its step's decision is scored against
// the ranks that came in time.
const decidedCacheSize = 16384

// Start starts the engine's ticker: a tenth of decision_wait, and of
// interval when set, so that a complete step is emitted soon after its
// last rank reported.
func (c *stepsProcessor) Start(context.Context, component.Host) error {
	if !c.stalls && c.nextLogs != nil {
		c.logger.Info("stall detection is off (stalls: enabled: false): the logs pipeline nemo_steps feeds gets no stall records")
	}
	every := c.steps.wait
	if c.steps.interval > 0 {
		every = min(every, c.steps.interval)
	}
	c.engine.Start(clock.TickEvery(every))
	return nil
}

// ConsumeTraces reads the batch's spans. It never holds or changes the
// traces and never fails: the points and records go out from the ticker,
// and the batch goes on unchanged.
func (c *stepsProcessor) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	st, ok := c.engine.Consume(func(b *steps.Batch[none]) {
		for _, rs := range td.ResourceSpans().All() {
			id, status := c.reader.Read(rs.Resource().Attributes())
			if status != rankattr.Valid {
				b.Skip(rs, status)
				continue
			}
			b.Walk(rs, id)
		}
	})
	if ok {
		c.tel.record(ctx, &tally{engine: st})
	}
	return nil
}

// Shutdown decides every open step with the ranks it has, flushes the
// interval, and sends the points and records before returning.
func (c *stepsProcessor) Shutdown(context.Context) error {
	err := c.engine.Shutdown()
	c.tel.shutdown()
	if err != nil {
		return fmt.Errorf("nemo_steps: send step metrics at shutdown: %w", err)
	}
	return nil
}

// Resource looks the resource's run up and tells every feed.
func (c *stepsProcessor) Resource(r *steps.Resource) {
	c.run = c.runs.at(r)
	for _, f := range c.feeds {
		f.resource(c.run, r)
	}
}

// Arrived: a step span gives its rank's labels, which the feeds read; then
// every feed gets the span.
func (c *stepsProcessor) Arrived(r *steps.Resource, s ptrace.Span, step steps.StepSpan) {
	if step.Is {
		c.runs.atStep(c.run, r)
	}
	for _, f := range c.feeds {
		f.arrived(c.run, r, s, step)
	}
}

// Decided hands a decided step to every feed.
func (c *stepsProcessor) Decided(d *steps.Decision[none]) {
	for _, f := range c.feeds {
		f.decided(d)
	}
}

// Tick has every feed collect what is due and keeps what to send; then the
// runs that are over are forgotten.
func (c *stepsProcessor) Tick(now time.Time, final bool) {
	var t tickOut
	for _, f := range c.feeds {
		f.tick(now, final, &t)
	}
	c.runs.forget(now)
	c.logs, c.stalled = t.logs, t.stalled
	c.batches = c.out.take()
}

// Send passes the points and records on and counts the engine's work.
func (c *stepsProcessor) Send(st *steps.Stats, _ bool) error {
	t := tally{engine: *st, stalls: c.stalled}
	batches, logs := c.batches, c.logs
	c.batches, c.logs, c.stalled = pointBatches{}, plog.Logs{}, stallCounts{}
	ctx := context.Background()
	err := c.sendPoints(ctx, batches, &t)
	c.sendLogs(ctx, logs)
	c.tel.record(ctx, &t)
	return err
}

func (c *stepsProcessor) sendPoints(ctx context.Context, batches pointBatches, t *tally) error {
	if c.next == nil {
		return nil // the receiver is only in logs pipelines
	}
	var errs []error
	for b := range batches.all {
		if err := c.next.ConsumeMetrics(ctx, b.md); err != nil {
			t.sendFailed += int64(b.points)
			c.logger.Error("the next consumer refused step metrics", zap.Int("data_points", b.points), zap.Error(err))
			errs = append(errs, err)
			continue
		}
		t.dataPoints += int64(b.points)
	}
	return errors.Join(errs...)
}

// sendLogs passes the stall records on; a refusal is logged (the records
// are also in the collector's own log).
func (c *stepsProcessor) sendLogs(ctx context.Context, logs plog.Logs) {
	if c.nextLogs == nil || logs == (plog.Logs{}) || logs.LogRecordCount() == 0 {
		return
	}
	if err := c.nextLogs.ConsumeLogs(ctx, logs); err != nil {
		c.logger.Error("the next consumer refused stall records", zap.Int("log_records", logs.LogRecordCount()), zap.Error(err))
	}
}
