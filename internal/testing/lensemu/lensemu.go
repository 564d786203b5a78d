// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package lensemu emulates the telemetry of one NeMo Lens training rank
// (Megatron-LM shaped) with the OpenTelemetry Go SDK, so that tests and
// benchmarks send the collector what a real job sends: NeMo Lens's resource
// attributes (nv.dl.* or dl.* rank identity, nemo.run.id, ...), Megatron-LM's
// per-step span tree (megatron.train_step with forward_backward, micro-batch,
// grad_sync and optimizer spans under megatron.pretrain/megatron.train), its
// training metrics and its log lines. The resource and the step span tree
// are internal/testing/lensfixture's, replayed through the SDK, so that e2e tests
// send what unit tests and benchmarks build.
//
// A Job is synchronous data parallelism by default: the gradient all-reduce
// at the end of each step waits for the slowest rank of the run, so every
// rank's step starts and ends together; a slow rank computes longer and the
// others wait in megatron.grad_sync.finish. Unsynchronised ranks keep their
// own clocks.
//
// Every signal is exported through a wrapper that counts what the collector
// acknowledged, so a test can compare "accepted by the collector" with "found
// in the output" exactly.
package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// Protocols a rank can export with.
const (
	GRPC = "grpc"
	HTTP = "http/protobuf"
)

// Rank describes one emulated training process.
type Rank struct {
	// Endpoint is the collector's OTLP address, host:port (gRPC or HTTP per Protocol).
	Endpoint string
	// Protocol is GRPC (default) or HTTP.
	Protocol string
	// RunID is sent as nemo.run.id; empty sends no run id at all.
	RunID string
	// Rank, WorldSize and LocalRank are the rank identity.
	Rank, WorldSize, LocalRank int
	// LegacyKeys sends dl.rank/dl.world_size/dl.local_rank instead of the nv.dl.* spelling.
	LegacyKeys bool
	// RankAsString sends the rank identity as strings ("3"), as OTEL_RESOURCE_ATTRIBUTES does.
	RankAsString bool
	// NoWorldSize omits the world-size attribute.
	NoWorldSize bool
	// ServiceName defaults to "nemo".
	ServiceName string
	// Resource holds extra resource attributes (slurm.*, k8s.*, wandb.*, rl.worker_group, ...).
	Resource []attribute.KeyValue
	// Steps is the number of training iterations (step spans). Default 3.
	Steps int
	// MicroBatches per step (default 2); each has a forward (with one layer span) and a backward.
	MicroBatches int
	// ComputeDuration gives the rank's compute time on step i (1-based
	// iteration): its megatron.forward_backward span; default 70ms each.
	// Training is synchronous data parallelism: the ranks of one run (RunID)
	// in one Job share every step's start and end, which the slowest rank's
	// compute sets (plus GradSyncTime and OptimizerTime), and the others wait
	// for it inside megatron.grad_sync.finish. With the defaults a step lasts
	// 100ms. Timestamps are synthetic: the emulator never sleeps.
	ComputeDuration func(iteration int) time.Duration
	// Unsynchronised emits every rank's steps on its own clock, each step
	// lasting StepDuration, as if there were no gradient all-reduce.
	Unsynchronised bool
	// StepDuration gives the duration of step i of an Unsynchronised rank;
	// default 100ms each. Setting it without Unsynchronised is an error.
	StepDuration func(iteration int) time.Duration
	// ErrorAtIteration marks that iteration's optimizer step span as ERROR and
	// emits an ERROR log record; 0 means never.
	ErrorAtIteration int
	// StepSpanName names the step span: megatron.train_step (default), or
	// megatron.train.iteration as in Megatron-LM's newer span names.
	StepSpanName string
	// StepsAreRoots makes every step span the root of its own trace instead
	// of a child of megatron.train.
	StepsAreRoots bool
	// NoMetrics and NoLogs turn those signals off.
	NoMetrics, NoLogs bool
	// Headers are sent with every export request (e.g. an auth token).
	Headers map[string]string
	// Acked, when set, records the id of every span the collector
	// acknowledged, for tests that check acknowledged ⊆ delivered item by
	// item. One AckLog may be shared by many ranks.
	Acked *AckLog
	// SDKDefaults runs the OpenTelemetry SDK as a training job runs it, at
	// its defaults: the exporters retry a refusal only within their 10s
	// export timeout, and the batch span processor exports every 5s or 512
	// spans from a queue of 2,048 spans, dropping new spans while that queue
	// is full. Without it (the tests of acknowledgement) retries are off and
	// the queue blocks the rank instead of dropping.
	SDKDefaults bool
	// Produced, when set, records the id of every span the rank ended: what
	// the job produced, whether its SDK managed to export it or not. One
	// AckLog may be shared by many ranks.
	Produced *AckLog
	// StepEvery paces the rank in real time: iteration i starts no earlier
	// than (i - FirstIteration) x StepEvery after the rank started; 0: as
	// fast as the collector takes the spans.
	StepEvery time.Duration
	// TLS, when set, connects with TLS using this client configuration;
	// otherwise the connection is plaintext.
	TLS *tls.Config
	// HangAt is the iteration at which the rank's run hangs (0: never), as
	// a synchronous job hangs when one rank stops: a rank whose HangRole is
	// Stopped ends only the spans of that iteration that end before its
	// first backward (it stops in its forward), a Dead one ends nothing of
	// it (its process is gone), and every other (Blocked, the default)
	// finishes its compute and grad_sync.start and blocks in the gradient
	// all-reduce: grad_sync.finish, the optimizer and the step span stay
	// open. Open spans are never exported; nothing after the hang is sent
	// and the job spans never end. Every rank of the run gets the same
	// HangAt.
	HangAt   int
	HangRole HangRole
	// PauseBefore pauses the rank for Pause of real time before iteration
	// PauseBefore (0: never), after exporting what it ended: an even pause,
	// as every rank of a run makes while it saves a checkpoint. PauseEvery
	// (0: once) pauses it again every PauseEvery iterations after that, as
	// Megatron-LM saves every --save-interval iterations.
	PauseBefore int
	PauseEvery  int
	Pause       time.Duration
	// Start is when the rank's job starts (its megatron.pretrain span), the
	// same for every rank of a run; zero: early enough that its last step
	// ends about now. A relaunch of a run sets it after the hung attempt.
	Start time.Time
	// Setup is the time from the job's start to its first step (model
	// set-up, then CheckpointLoad); default 2s.
	Setup time.Duration
	// FirstIteration is the iteration the job starts from (default 1): a
	// relaunch resumes after the checkpoint it loaded.
	FirstIteration int
	// CheckpointLoad is how long the rank loads a checkpoint at the end of
	// its set-up (megatron.load_checkpoint); 0: none.
	CheckpointLoad time.Duration
	// SaveEvery saves a checkpoint (megatron.save_checkpoint, lasting
	// SaveDuration) after every iteration divisible by it; 0: never.
	// EvalEvery evaluates (megatron.evaluate, lasting EvalDuration) after
	// them, likewise. Both take synthetic time between the steps.
	SaveEvery, EvalEvery       int
	SaveDuration, EvalDuration time.Duration
	// Barrier, when set, is the run's gradient all-reduce across
	// processes, and the rank trains in real time: it sleeps until each
	// span's end before ending it, and in every step, once its
	// grad_sync.start has ended, it calls Barrier and goes on only when
	// Barrier returns, as every rank of a run waits in the all-reduce for
	// the others. The time it waited beyond its own schedule is measured,
	// not assumed: its grad_sync.finish and everything after lasts that much
	// longer. A rank whose peer died blocks there; when Barrier returns an
	// error (the rank was told to stop) the rank ends as a Blocked rank of a
	// hang: its open spans never end. Each process has a schedule of its
	// own (its ComputeDuration), so ranks of one run may be separate
	// processes on separate hosts.
	Barrier func(ctx context.Context, iteration int) error

	// sched is the step schedule the rank shares with its run, set by Job.
	sched *schedule
}

// HangRole is a rank's part in its run's hang (Rank.HangAt): the
// fixture's, so that unit tests and the emulator hang alike.
type HangRole = lensfixture.HangRole

// The hang roles.
const (
	Blocked = lensfixture.Blocked
	Stopped = lensfixture.Stopped
	Dead    = lensfixture.Dead
)

// SpansPerStep is the number of spans one train step produces for the given
// number of micro-batches: the fixture's step tree, without a pipeline
// receive.
func SpansPerStep(microBatches int) int { return lensfixture.SpansPerStep(microBatches, false) }

// JobSpans is the number of spans outside steps: megatron.pretrain,
// megatron.model_init and megatron.train.
const JobSpans = 3

// Result counts what the collector acknowledged.
type Result struct {
	Spans, DataPoints, LogRecords int64
}

// Add sums two results.
func (r Result) Add(o Result) Result {
	return Result{Spans: r.Spans + o.Spans, DataPoints: r.DataPoints + o.DataPoints, LogRecords: r.LogRecords + o.LogRecords}
}

// Sub returns r minus o, signal by signal.
func (r Result) Sub(o Result) Result {
	return Result{Spans: r.Spans - o.Spans, DataPoints: r.DataPoints - o.DataPoints, LogRecords: r.LogRecords - o.LogRecords}
}

// Covers reports whether r holds at least o of every signal.
func (r Result) Covers(o Result) bool {
	return r.Spans >= o.Spans && r.DataPoints >= o.DataPoints && r.LogRecords >= o.LogRecords
}

func (r *Rank) defaults() {
	if r.Protocol == "" {
		r.Protocol = GRPC
	}
	if r.ServiceName == "" {
		r.ServiceName = "nemo"
	}
	if r.Steps == 0 {
		r.Steps = 3
	}
	if r.MicroBatches == 0 {
		r.MicroBatches = 2
	}
	if r.FirstIteration == 0 {
		r.FirstIteration = 1
	}
	if r.Setup == 0 {
		r.Setup = setupTime
	}
	if r.StepSpanName == "" {
		r.StepSpanName = attrkey.MegatronTrainStep
	}
	if r.ComputeDuration == nil {
		r.ComputeDuration = func(int) time.Duration { return DefaultComputeDuration }
	}
	if r.Unsynchronised && r.StepDuration == nil {
		r.StepDuration = func(int) time.Duration { return lensfixture.DefaultStep.Duration() }
	}
}

// check rejects a rank whose timing fields contradict each other.
func (r Rank) check() error {
	if r.StepDuration != nil && !r.Unsynchronised {
		return errors.New("lensemu: StepDuration is the step of an Unsynchronised rank; set Unsynchronised, " +
			"or set ComputeDuration for a rank of a synchronous job (the slowest rank's compute sets every rank's step)")
	}
	if r.Barrier != nil && r.Unsynchronised {
		return errors.New("lensemu: Barrier is the all-reduce of synchronous ranks; an Unsynchronised rank waits for nobody")
	}
	if r.ComputeDuration != nil && r.Unsynchronised {
		return errors.New("lensemu: ComputeDuration is for synchronous ranks; an Unsynchronised rank's step lasts StepDuration")
	}
	return nil
}

// ResourceAttributes returns the resource attributes the rank sends: the
// fixture's rank identity (lensfixture.Rank), then Resource, whose keys win
// over the identity's (lensrank sends the real host.name there).
func (r Rank) ResourceAttributes() []attribute.KeyValue {
	r.defaults()
	id := lensfixture.Rank{
		Run: r.RunID, Rank: int64(r.Rank), WorldSize: int64(r.WorldSize),
		AsString: r.RankAsString, LegacyKeys: r.LegacyKeys, ServiceName: r.ServiceName,
	}
	switch {
	case r.NoWorldSize:
		id.WorldSize = 0
	case r.WorldSize == 0:
		// The fixture leaves a zero world size out; the emulator sends what
		// it is given, so it asks for one and rewrites it to 0 below.
		id.WorldSize = 1
	}
	fixture := id.Attributes()
	attrs := make([]attribute.KeyValue, 0, len(fixture)+len(r.Resource))
	for _, kv := range fixture {
		switch kv.Key {
		case attrkey.DLLocalRank, attrkey.LegacyDLLocalRank:
			// The launcher's local rank, which need not be Rank mod 8.
			kv.Value = sameType(kv.Value, r.LocalRank)
		case attrkey.DLWorldSize, attrkey.LegacyDLWorldSize:
			kv.Value = sameType(kv.Value, r.WorldSize) // 0 where it asked for 1
		}
		attrs = append(attrs, toAttribute(kv))
	}
	return append(attrs, r.Resource...)
}

// sameType is n as the fixture typed v: a string ("3") or an int64.
func sameType(v any, n int) any {
	if _, ok := v.(string); ok {
		return strconv.Itoa(n)
	}
	return int64(n)
}

// toAttribute converts a fixture attribute (a string or an int64) for the SDK.
func toAttribute(kv lensfixture.KeyValue) attribute.KeyValue {
	switch v := kv.Value.(type) {
	case string:
		return attribute.String(kv.Key, v)
	case int64:
		return attribute.Int64(kv.Key, v)
	default:
		return attribute.String(kv.Key, fmt.Sprint(v))
	}
}

// Run emits the rank's whole job and shuts its SDK down, flushing everything.
// It returns what the collector acknowledged and the first export error.
func (r Rank) Run(ctx context.Context) (Result, error) {
	if err := r.check(); err != nil {
		return Result{}, err
	}
	r.defaults()
	if !r.Unsynchronised && r.sched == nil {
		r.sched = newSchedule([]Rank{r})
	}
	res := resource.NewSchemaless(r.ResourceAttributes()...)
	exp, err := r.newExporters(ctx)
	if err != nil {
		return Result{}, err
	}

	batcher := sdktrace.WithBatcher(exp.spans, sdktrace.WithBlocking(), sdktrace.WithMaxExportBatchSize(512), sdktrace.WithBatchTimeout(200*time.Millisecond))
	if r.SDKDefaults {
		batcher = sdktrace.WithBatcher(exp.spans)
	}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), batcher}
	if r.Produced != nil {
		tpOpts = append(tpOpts, sdktrace.WithSpanProcessor(producedSpans{r.Produced}))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	// Metrics are exported once per step (Megatron's log interval) and at shutdown.
	// The reader is only made when it is registered: the meter provider's
	// shutdown is what stops its goroutine.
	var reader *sdkmetric.PeriodicReader
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if !r.NoMetrics {
		reader = sdkmetric.NewPeriodicReader(exp.metrics, sdkmetric.WithInterval(time.Hour))
		mpOpts = append(mpOpts, sdkmetric.WithReader(reader))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res),
		sdklog.WithProcessor(sdklog.NewBatchProcessor(exp.logs, sdklog.WithExportInterval(200*time.Millisecond))))

	// On an error the rank stops sending, but what was acknowledged until then
	// still counts.
	emitErr := r.emit(ctx, tp.Tracer(lensfixture.ScopeName), mp.Meter(lensfixture.ScopeName), reader, lp.Logger(lensfixture.ScopeName))
	err = errors.Join(emitErr, tp.Shutdown(ctx), mp.Shutdown(ctx), lp.Shutdown(ctx))
	return exp.result(), errors.Join(err, exp.firstError())
}

func (r Rank) emit(ctx context.Context, tracer trace.Tracer, meter metric.Meter, reader *sdkmetric.PeriodicReader, logger otellog.Logger) error {
	inst, err := newInstruments(meter)
	if err != nil {
		return err
	}
	t0 := r.jobStart()
	setup := r.Setup
	at := func(d time.Duration) trace.SpanStartEventOption { return trace.WithTimestamp(t0.Add(d)) }
	end := func(d time.Duration) trace.SpanEndOption { return trace.WithTimestamp(t0.Add(d)) }

	ctx, pretrain := tracer.Start(ctx, lensfixture.Pretrain, at(0))
	_, modelInit := tracer.Start(ctx, lensfixture.ModelInit, at(0))
	modelInit.End(end(setup - r.CheckpointLoad))
	if r.CheckpointLoad > 0 {
		_, load := tracer.Start(ctx, lensfixture.LoadCheckpoint, at(setup-r.CheckpointLoad))
		load.End(end(setup))
	}
	trainCtx, train := tracer.Start(ctx, lensfixture.Train, at(setup))

	cursor := setup
	started := time.Now()
	for it := r.FirstIteration; it <= r.Steps; it++ {
		if r.StepEvery > 0 {
			if err := sleepCtx(ctx, time.Until(started.Add(time.Duration(it-r.FirstIteration)*r.StepEvery))); err != nil {
				return err
			}
		}
		step := r.stepOf(it)
		if r.PausesBefore(it) {
			if err := r.pause(ctx); err != nil {
				return err
			}
		}
		if r.Barrier != nil {
			// Real time: the step starts now, after a pause too.
			cursor = max(cursor, time.Since(t0))
		}
		if it == r.HangAt {
			r.emitStep(trainCtx, tracer, it, t0.Add(cursor), step, step.HangCutoff(r.StepSpanName, r.HangRole))
			return nil // hung: the job spans stay open
		}
		var d time.Duration
		if r.Barrier != nil {
			var blocked bool
			if d, blocked = r.emitRealStep(ctx, trainCtx, tracer, it, t0.Add(cursor), step); blocked {
				return nil // hung in the all-reduce: the job spans stay open
			}
		} else {
			r.emitStep(trainCtx, tracer, it, t0.Add(cursor), step, step.Duration())
			d = step.Duration()
		}
		cursor += d
		cursor = r.emitBetweenSteps(trainCtx, tracer, it, t0, cursor)
		loss := lossAt(it)
		inst.stepDuration.Record(ctx, float64(d.Milliseconds()))
		inst.loss.Record(ctx, loss)
		inst.tflops.Record(ctx, 180.5)
		inst.tokens.Record(ctx, 51200)
		inst.gradNorm.Record(ctx, 1.25)
		inst.lr.Record(ctx, 3e-4)
		inst.memory.Record(ctx, 61.5)
		inst.skipped.Add(ctx, 0)
		// A job at SDKDefaults trains on when its telemetry fails (the
		// failure is counted in the exporters' first error).
		if !r.NoMetrics {
			if err := reader.ForceFlush(ctx); err != nil && !r.SDKDefaults {
				return fmt.Errorf("flush metrics: %w", err)
			}
		}
		if !r.NoLogs {
			r.emitLog(ctx, logger, otellog.SeverityInfo, t0.Add(cursor), fmt.Sprintf("iteration %d | loss %.4f", it, loss), it)
			if it == r.ErrorAtIteration {
				r.emitLog(ctx, logger, otellog.SeverityError, t0.Add(cursor), fmt.Sprintf("iteration %d: optimizer step failed", it), it)
			}
		}
	}
	train.End(end(cursor))
	pretrain.End(end(cursor + setup))
	return nil
}

// PausesBefore says whether the rank pauses before iteration it.
func (r Rank) PausesBefore(it int) bool {
	switch {
	case r.PauseBefore <= 0 || it < r.PauseBefore:
		return false
	case it == r.PauseBefore:
		return true
	}
	return r.PauseEvery > 0 && (it-r.PauseBefore)%r.PauseEvery == 0
}

// pause waits Pause of real time; the batch processors (200ms) export
// what the rank ended meanwhile.
func (r Rank) pause(ctx context.Context) error { return sleepCtx(ctx, r.Pause) }

// sleepCtx sleeps d (nothing when d <= 0), or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func (Rank) emitLog(ctx context.Context, logger otellog.Logger, sev otellog.Severity, at time.Time, msg string, it int) {
	var rec otellog.Record
	rec.SetTimestamp(at)
	rec.SetSeverity(sev)
	rec.SetSeverityText(sev.String())
	rec.SetBody(attribute.StringValue(msg))
	rec.AddAttributes(attribute.Int(attrkey.MegatronIteration, it))
	logger.Emit(ctx, rec)
}

type instruments struct {
	stepDuration                               metric.Float64Histogram
	loss, tflops, tokens, gradNorm, lr, memory metric.Float64Gauge
	skipped                                    metric.Int64Counter
}

func newInstruments(m metric.Meter) (instruments, error) {
	var in instruments
	var errs [9]error
	in.stepDuration, errs[0] = m.Float64Histogram(lensfixture.StepDurationMetric, metric.WithUnit("ms"))
	in.loss, errs[1] = m.Float64Gauge(lensfixture.LossMetric)
	in.tflops, errs[2] = m.Float64Gauge(lensfixture.TFLOPSMetric)
	in.tokens, errs[3] = m.Float64Gauge(lensfixture.TokensPerSecMetric)
	in.gradNorm, errs[4] = m.Float64Gauge(lensfixture.GradNormMetric)
	in.lr, errs[5] = m.Float64Gauge(lensfixture.LearningRateMetric)
	in.memory, errs[6] = m.Float64Gauge(lensfixture.MemoryMetric, metric.WithUnit("GBy"))
	in.skipped, errs[7] = m.Int64Counter(lensfixture.SkippedItersMetric)
	return in, errors.Join(errs[:]...)
}

// Job runs ranks concurrently and returns what the collector acknowledged
// from each, in the order of ranks.
func Job(ctx context.Context, ranks []Rank) ([]Result, error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	results := make([]Result, len(ranks))
	ranks = withSchedules(ranks)
	for i := range ranks {
		r := &ranks[i]
		wg.Go(func() {
			res, err := r.Run(ctx)
			results[i] = res
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("rank %d: %w", r.Rank, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// Sum adds results up.
func Sum(results []Result) Result {
	var total Result
	for _, r := range results {
		total = total.Add(r)
	}
	return total
}
