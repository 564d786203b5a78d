// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// maxRememberedRuns bounds the runs whose straggler counts are kept (about
// twice this many); a run forgotten and seen again starts its count over,
// with a new start time.
const maxRememberedRuns = 4096

// decidedCacheSize is how many decided steps are remembered so that a rank
// whose step span comes after its step's decision is scored against the
// ranks that came in time.
const decidedCacheSize = 16384

// stepsConnector records the step and wait spans of every rank, decides
// each step when all its ranks reported or at decision_wait, and sends the
// data points from its ticker. It is safe for concurrent use.
//
// The step machinery (placing spans, the table of open steps, the decided
// FIFO, reading a rank) is internal/steps'. This file runs the lifecycle
// and the ticker; record.go feeds it the step and wait spans; steps.go
// scores the steps it decides; aggregate.go turns decisions into points or
// interval aggregates; emit.go builds the metrics; identity.go keeps the
// labels of a rank's series.
type stepsConnector struct {
	spans      steps.Recognizer
	thresholds stepbusy.Thresholds
	wait       time.Duration
	spanWait   time.Duration
	interval   time.Duration
	maxOpen    int
	id         identity
	clk        clock.Clock
	epoch      time.Time
	logger     *zap.Logger
	// next gets the step metrics and stall gauges, nextLogs the stall
	// records; either may be nil (its signal pair is not in a pipeline).
	next     consumer.Metrics
	nextLogs consumer.Logs
	tel      *telemetry
	jobSpans []string

	mu            sync.Mutex
	closed        bool
	ranks         *stepbusy.Generations[steps.Rank, *rankState]
	placer        *stepbusy.Timeline[steps.Rank]
	history       *stepbusy.History[steps.Rank]
	open          *steps.Table[steps.Step, stepRanks]
	openRankSteps int
	decided       *steps.Decided[steps.Step, *decidedStep]
	runs          *stepbusy.Generations[uint64, *runCount]
	aggs          map[steps.Rank]*rankAgg
	lastFlush     time.Duration
	out           *pointWriter
	scores        []stepbusy.Score                  // scratch, used under mu
	placed        []steps.Placed[stepbusy.Interval] // scratch, used under mu
	// stalls finds stalled runs (stalls.go), nil when stall detection is
	// off; runLabels are each run's labels, for its records and gauges.
	stalls    *stall.Detector
	runLabels *stepbusy.Generations[uint64, *rankLabels]
	batchTime time.Time // the wall clock of the batch being read, under mu

	loop *clock.Loop
}

var _ connector.Traces = (*stepsConnector)(nil)

// newConnector builds the connector of a config the collector validated.
func newConnector(set connector.Settings, cfg *Config, next consumer.Metrics, clk clock.Clock) (*stepsConnector, error) {
	recognizer, err := steps.NewRecognizer(cfg.Spans, cfg.WaitSpans)
	if err != nil {
		return nil, fmt.Errorf("nemo_steps: %w", err)
	}
	tel, err := newTelemetry(set.TelemetrySettings)
	if err != nil {
		return nil, err
	}
	c := &stepsConnector{
		spans:      recognizer,
		thresholds: cfg.Thresholds(0),
		wait:       cfg.DecisionWait,
		spanWait:   cfg.Span(),
		interval:   cfg.Interval,
		maxOpen:    cfg.MaxOpenRankSteps,
		id:         newIdentity(cfg),
		clk:        clk,
		epoch:      clk.Now(),
		logger:     set.Logger,
		next:       next,
		tel:        tel,
		ranks:      stepbusy.NewGenerations[steps.Rank, *rankState](steps.MaxRememberedRanks),
		placer:     stepbusy.NewTimeline[steps.Rank](steps.MaxRememberedRanks),
		history:    stepbusy.NewHistory[steps.Rank](cfg.History, steps.MaxRememberedRanks),
		open:       steps.NewTable[steps.Step, stepRanks](cfg.DecisionWait),
		decided:    steps.NewDecided[steps.Step, *decidedStep](decidedCacheSize),
		runs:       stepbusy.NewGenerations[uint64, *runCount](maxRememberedRuns),
		aggs:       make(map[steps.Rank]*rankAgg),
		out:        newPointWriter(),
		runLabels:  stepbusy.NewGenerations[uint64, *rankLabels](maxRememberedRuns),
	}
	if s := cfg.Stalls.Get(); s != nil {
		c.jobSpans = s.JobSpanNames
		c.stalls = stall.New(stall.Config{
			MinStall: s.MinStall, Factor: s.StallFactor,
			WarmupSteps: stall.DefaultWarmupSteps, History: stall.DefaultHistory,
		}, 0)
	}
	return c, nil
}

// Capabilities: the connector only reads the traces.
func (*stepsConnector) Capabilities() consumer.Capabilities {
	return consumer.Capabilities{MutatesData: false}
}

// now is the connector's monotonic time.
func (c *stepsConnector) now() time.Duration { return c.clk.Now().Sub(c.epoch) }

// Start starts the decision ticker.
func (c *stepsConnector) Start(context.Context, component.Host) error {
	if c.stalls == nil && c.nextLogs != nil {
		c.logger.Info("stall detection is off (stalls: enabled: false): the logs pipeline nemo_steps feeds gets no stall records")
	}
	// A tenth of decision_wait, and of interval when set, so that a
	// complete step is emitted soon after its last rank reported.
	every := c.wait
	if c.interval > 0 {
		every = min(every, c.interval)
	}
	c.loop = clock.StartLoop(c.clk, clock.TickEvery(every), func() { c.tick(context.Background()) })
	return nil
}

// ConsumeTraces records the batch's step and wait spans. It never holds or
// changes the traces and never fails: the points go out from the ticker.
func (c *stepsConnector) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	var t tally
	now := c.now()
	c.mu.Lock()
	if !c.closed {
		c.batchTime = c.clk.Now()
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			c.recordResource(rss.At(i), now, &t)
		}
		c.enforceBudget(&t)
	}
	c.mu.Unlock()
	c.tel.record(ctx, &t)
	return nil
}

// tick decides the steps that are complete or whose wait is over, flushes
// the interval when it is over, judges the runs for stalls, and sends the
// points and the stall records.
func (c *stepsConnector) tick(ctx context.Context) {
	var t tally
	batches, logs := c.decideDue(&t)
	_ = c.send(ctx, batches, &t)
	c.sendLogs(ctx, logs)
	c.tel.record(ctx, &t)
}

func (c *stepsConnector) decideDue(t *tally) ([]batch, plog.Logs) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.open.Due(now, c.decider(t))
	if c.interval > 0 && now-c.lastFlush >= c.interval {
		c.flush()
		c.lastFlush = now
	}
	logs := c.checkStalls(t)
	return c.out.take(), logs
}

// sendLogs passes the stall records on; a refusal is logged (the records
// are also in the collector's own log).
func (c *stepsConnector) sendLogs(ctx context.Context, logs plog.Logs) {
	if c.nextLogs == nil || logs == (plog.Logs{}) || logs.LogRecordCount() == 0 {
		return
	}
	if err := c.nextLogs.ConsumeLogs(ctx, logs); err != nil {
		c.logger.Error("the next consumer refused stall records", zap.Int("log_records", logs.LogRecordCount()), zap.Error(err))
	}
}

// Shutdown stops the ticker, decides every open step with the ranks it
// has, flushes the interval and sends the points before returning.
func (c *stepsConnector) Shutdown(ctx context.Context) error {
	c.loop.Stop()
	var t tally
	err := c.send(ctx, c.drain(&t), &t)
	c.tel.record(ctx, &t)
	c.tel.shutdown()
	if err != nil {
		return fmt.Errorf("nemo_steps: send step metrics at shutdown: %w", err)
	}
	return nil
}

func (c *stepsConnector) drain(t *tally) []batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.open.Drain(c.decider(t))
	if c.interval > 0 {
		c.flush()
	}
	c.ranks.All(func(_ steps.Rank, st *rankState) {
		t.skipped[skipPendingExpired] += int64(st.pending.Clear())
	})
	return c.out.take()
}

func (c *stepsConnector) send(ctx context.Context, batches []batch, t *tally) error {
	if c.next == nil {
		return nil // only the stall records' half is in a pipeline
	}
	var errs []error
	for _, b := range batches {
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
