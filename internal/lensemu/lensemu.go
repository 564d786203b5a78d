// Package lensemu emulates the telemetry of one NeMo Lens training rank
// (Megatron-LM shaped) with the OpenTelemetry Go SDK, so that tests and
// benchmarks send the collector what a real job sends: the resource attributes,
// the span tree, the metrics and the logs described in REFERENCE.md §1.
//
// Every signal is exported through a wrapper that counts what the collector
// acknowledged, so a test can compare "accepted by the collector" with "found
// in the output" exactly.
package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/lensemu"

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"
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
	// Steps is the number of training iterations (megatron.train_step spans). Default 3.
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
	// NoMetrics and NoLogs turn those signals off.
	NoMetrics, NoLogs bool
	// Headers are sent with every export request (e.g. an auth token).
	Headers map[string]string
	// TLS, when set, connects with TLS using this client configuration;
	// otherwise the connection is plaintext.
	TLS *tls.Config

	// sched is the step schedule the rank shares with its run, set by Job.
	sched *schedule
}

// The fixed parts of a synchronous step, after the slowest rank's compute:
// the gradient all-reduce (5ms in grad_sync.start, 10ms in grad_sync.finish)
// and the optimizer.
const (
	GradSyncTime  = 15 * time.Millisecond
	OptimizerTime = 15 * time.Millisecond
	// DefaultComputeDuration makes a default step last 100ms.
	DefaultComputeDuration = 70 * time.Millisecond
	gradSyncStart          = 5 * time.Millisecond
	setupTime              = 2 * time.Second
)

// schedule is what the ranks of one run share in synchronous training: when
// the job started and every step's slowest compute.
type schedule struct {
	t0      time.Time
	slowest []time.Duration // by iteration - 1
}

// stepDuration is step it's wall duration on every rank.
func (s *schedule) stepDuration(it int) time.Duration {
	return s.slowest[it-1] + GradSyncTime + OptimizerTime
}

// newSchedule builds the schedule of ranks that train together.
func newSchedule(ranks []Rank) *schedule {
	s := &schedule{}
	for _, r := range ranks {
		r.defaults()
		for it := 1; it <= r.Steps; it++ {
			if len(s.slowest) < it {
				s.slowest = append(s.slowest, 0)
			}
			s.slowest[it-1] = max(s.slowest[it-1], r.ComputeDuration(it))
		}
	}
	var total time.Duration
	for it := 1; it <= len(s.slowest); it++ {
		total += s.stepDuration(it)
	}
	s.t0 = time.Now().Add(-(total + 2*setupTime))
	return s
}

// SpansPerStep is the number of spans one train step produces for the given
// number of micro-batches.
func SpansPerStep(microBatches int) int { return 1 + 1 + 3*microBatches + 3 }

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
	if r.ComputeDuration == nil {
		r.ComputeDuration = func(int) time.Duration { return DefaultComputeDuration }
	}
	if r.Unsynchronised && r.StepDuration == nil {
		r.StepDuration = func(int) time.Duration { return 100 * time.Millisecond }
	}
}

// check rejects a rank whose timing fields contradict each other.
func (r Rank) check() error {
	if r.StepDuration != nil && !r.Unsynchronised {
		return errors.New("lensemu: StepDuration is the step of an Unsynchronised rank; set Unsynchronised, " +
			"or set ComputeDuration for a rank of a synchronous job (the slowest rank's compute sets every rank's step)")
	}
	if r.ComputeDuration != nil && r.Unsynchronised {
		return errors.New("lensemu: ComputeDuration is for synchronous ranks; an Unsynchronised rank's step lasts StepDuration")
	}
	return nil
}

// ResourceAttributes returns the resource attributes the rank sends.
func (r Rank) ResourceAttributes() []attribute.KeyValue {
	r.defaults()
	prefix := "nv.dl."
	if r.LegacyKeys {
		prefix = "dl."
	}
	num := func(k string, v int) attribute.KeyValue {
		if r.RankAsString {
			return attribute.String(prefix+k, strconv.Itoa(v))
		}
		return attribute.Int(prefix+k, v)
	}
	instance := r.RunID
	if instance == "" {
		instance = "norun"
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", r.ServiceName),
		attribute.String("service.instance.id", fmt.Sprintf("%s-rank%d", instance, r.Rank)),
		attribute.String("host.name", fmt.Sprintf("node%03d", r.Rank/8)),
		attribute.Int("process.pid", 10000+r.Rank),
		num("rank", r.Rank),
		num("local_rank", r.LocalRank),
	}
	if !r.NoWorldSize {
		attrs = append(attrs, num("world_size", r.WorldSize))
	}
	if r.RunID != "" {
		attrs = append(attrs, attribute.String("nemo.run.id", r.RunID))
	}
	return append(attrs, r.Resource...)
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

	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithBatcher(exp.spans, sdktrace.WithBlocking(), sdktrace.WithMaxExportBatchSize(512), sdktrace.WithBatchTimeout(200*time.Millisecond)),
	)
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
	emitErr := r.emit(ctx, tp.Tracer("megatron"), mp.Meter("megatron"), reader, lp.Logger("megatron"))
	err = errors.Join(emitErr, tp.Shutdown(ctx), mp.Shutdown(ctx), lp.Shutdown(ctx))
	return exp.result(), errors.Join(err, exp.firstError())
}

func (r Rank) emit(ctx context.Context, tracer trace.Tracer, meter metric.Meter, reader *sdkmetric.PeriodicReader, logger otellog.Logger) error {
	inst, err := newInstruments(meter)
	if err != nil {
		return err
	}
	t0, stepDuration := r.timeline()
	setup := setupTime
	at := func(d time.Duration) trace.SpanStartEventOption { return trace.WithTimestamp(t0.Add(d)) }
	end := func(d time.Duration) trace.SpanEndOption { return trace.WithTimestamp(t0.Add(d)) }

	ctx, pretrain := tracer.Start(ctx, "megatron.pretrain", at(0))
	_, modelInit := tracer.Start(ctx, "megatron.model_init", at(0))
	modelInit.End(end(setup))
	trainCtx, train := tracer.Start(ctx, "megatron.train", at(setup))

	cursor := setup
	for it := 1; it <= r.Steps; it++ {
		d := stepDuration(it)
		if r.Unsynchronised {
			r.emitUnsynchronisedStep(trainCtx, tracer, it, t0.Add(cursor), d)
		} else {
			r.emitStep(trainCtx, tracer, it, t0.Add(cursor), r.ComputeDuration(it), r.sched.slowest[it-1])
		}
		cursor += d
		loss := 10.0 / float64(it+1)
		inst.stepDuration.Record(ctx, float64(d.Milliseconds()))
		inst.loss.Record(ctx, loss)
		inst.tflops.Record(ctx, 180.5)
		inst.tokens.Record(ctx, 51200)
		inst.gradNorm.Record(ctx, 1.25)
		inst.lr.Record(ctx, 3e-4)
		inst.memory.Record(ctx, 61.5)
		inst.skipped.Add(ctx, 0)
		if !r.NoMetrics {
			if err := reader.ForceFlush(ctx); err != nil {
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

// timeline is when the rank's job started and how long each of its steps
// lasts.
func (r Rank) timeline() (time.Time, func(int) time.Duration) {
	if !r.Unsynchronised {
		return r.sched.t0, r.sched.stepDuration
	}
	var total time.Duration
	for i := 1; i <= r.Steps; i++ {
		total += r.StepDuration(i)
	}
	return time.Now().Add(-(total + 2*setupTime)), r.StepDuration
}

// emitStep emits one megatron.train_step subtree of a synchronous step:
// the rank computes for compute (megatron.forward_backward), starts the
// gradient all-reduce, waits in megatron.grad_sync.finish until the slowest
// rank has computed too and the all-reduce is done, then runs the optimizer.
// Children end (and so are exported) before their parents, as in a real job.
func (r Rank) emitStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time, compute, slowest time.Duration) {
	at := func(d time.Duration) time.Time { return start.Add(d) }
	ctx, step := r.startStep(ctx, tracer, it, start)
	r.emitForwardBackward(ctx, tracer, start, compute)
	syncEnd := slowest + GradSyncTime
	r.emitSpan(ctx, tracer, "megatron.grad_sync.start", at(compute), at(compute+gradSyncStart))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.finish", at(compute+gradSyncStart), at(syncEnd))
	r.emitOptimizer(ctx, tracer, it, at(syncEnd), at(syncEnd+OptimizerTime))
	step.End(trace.WithTimestamp(at(syncEnd + OptimizerTime)))
}

// emitUnsynchronisedStep emits a step of d on the rank's own clock: compute
// 70%, gradient sync 15%, optimizer 15%.
func (r Rank) emitUnsynchronisedStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time, d time.Duration) {
	ts := func(f float64) time.Time { return start.Add(time.Duration(f * float64(d))) }
	ctx, step := r.startStep(ctx, tracer, it, start)
	r.emitForwardBackward(ctx, tracer, start, time.Duration(0.7*float64(d)))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.start", ts(0.7), ts(0.75))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.finish", ts(0.75), ts(0.85))
	r.emitOptimizer(ctx, tracer, it, ts(0.85), ts(1))
	step.End(trace.WithTimestamp(ts(1)))
}

func (r Rank) startStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time) (context.Context, trace.Span) {
	return tracer.Start(ctx, "megatron.train_step", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.Int("megatron.iteration", it),
		attribute.Int("megatron.num_microbatches", r.MicroBatches),
		attribute.Float64("megatron.loss", 10.0/float64(it+1)),
		attribute.Float64("megatron.grad_norm", 1.25),
		attribute.Bool("megatron.update_successful", it != r.ErrorAtIteration),
	))
}

// emitForwardBackward emits megatron.forward_backward lasting compute, with
// a forward (holding one layer span) and a backward per micro-batch.
func (r Rank) emitForwardBackward(ctx context.Context, tracer trace.Tracer, start time.Time, compute time.Duration) {
	ts := func(f float64) time.Time { return start.Add(time.Duration(f * float64(compute))) }
	fbCtx, fb := tracer.Start(ctx, "megatron.forward_backward", trace.WithTimestamp(start))
	per := 1 / float64(r.MicroBatches)
	for mb := 0; mb < r.MicroBatches; mb++ {
		base := float64(mb) * per
		mbAttr := trace.WithAttributes(attribute.Int("megatron.microbatch_id", mb))
		fwdCtx, fwd := tracer.Start(fbCtx, "megatron.microbatch.forward", trace.WithTimestamp(ts(base)), mbAttr)
		_, layer := tracer.Start(fwdCtx, "megatron.layer.forward", trace.WithTimestamp(ts(base)))
		layer.End(trace.WithTimestamp(ts(base + per*0.3)))
		fwd.End(trace.WithTimestamp(ts(base + per*0.4)))
		_, bwd := tracer.Start(fbCtx, "megatron.microbatch.backward", trace.WithTimestamp(ts(base+per*0.4)), mbAttr)
		bwd.End(trace.WithTimestamp(ts(base + per)))
	}
	fb.End(trace.WithTimestamp(ts(1)))
}

func (r Rank) emitOptimizer(ctx context.Context, tracer trace.Tracer, it int, from, to time.Time) {
	_, opt := tracer.Start(ctx, "megatron.optimizer_step", trace.WithTimestamp(from))
	if it == r.ErrorAtIteration {
		opt.SetStatus(codes.Error, "optimizer step failed")
	}
	opt.End(trace.WithTimestamp(to))
}

func (r Rank) emitSpan(ctx context.Context, tracer trace.Tracer, name string, from, to time.Time) {
	_, s := tracer.Start(ctx, name, trace.WithTimestamp(from))
	s.End(trace.WithTimestamp(to))
}

func (r Rank) emitLog(ctx context.Context, logger otellog.Logger, sev otellog.Severity, at time.Time, msg string, it int) {
	var rec otellog.Record
	rec.SetTimestamp(at)
	rec.SetSeverity(sev)
	rec.SetSeverityText(sev.String())
	rec.SetBody(attribute.StringValue(msg))
	rec.AddAttributes(attribute.Int("megatron.iteration", it))
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
	in.stepDuration, errs[0] = m.Float64Histogram("megatron.training.step_duration_ms", metric.WithUnit("ms"))
	in.loss, errs[1] = m.Float64Gauge("megatron.training.loss")
	in.tflops, errs[2] = m.Float64Gauge("megatron.training.throughput_tflops")
	in.tokens, errs[3] = m.Float64Gauge("megatron.training.tokens_per_sec")
	in.gradNorm, errs[4] = m.Float64Gauge("megatron.training.grad_norm")
	in.lr, errs[5] = m.Float64Gauge("megatron.training.learning_rate")
	in.memory, errs[6] = m.Float64Gauge("megatron.training.memory_allocated_gb", metric.WithUnit("GBy"))
	in.skipped, errs[7] = m.Int64Counter("megatron.training.skipped_iters")
	return in, errors.Join(errs[:]...)
}

// exporters wraps the OTLP exporters so that only acknowledged items are counted.
type exporters struct {
	spans   *countingSpans
	metrics *countingMetrics
	logs    *countingLogs
	mu      sync.Mutex
	err     error
}

func (e *exporters) record(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *exporters) firstError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func (e *exporters) result() Result {
	return Result{Spans: e.spans.n.Load(), DataPoints: e.metrics.n.Load(), LogRecords: e.logs.n.Load()}
}

func (r Rank) newExporters(ctx context.Context) (*exporters, error) {
	e := &exporters{}
	var (
		se  sdktrace.SpanExporter
		me  sdkmetric.Exporter
		le  sdklog.Exporter
		err error
	)
	switch r.Protocol {
	case GRPC:
		// Retries are off: a test must see a refusal, not a minute of backoff.
		traceOpts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(r.Endpoint), otlptracegrpc.WithHeaders(r.Headers), otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false})}
		metricOpts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(r.Endpoint), otlpmetricgrpc.WithHeaders(r.Headers), otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false})}
		logOpts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(r.Endpoint), otlploggrpc.WithHeaders(r.Headers), otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false})}
		if r.TLS != nil {
			creds := credentials.NewTLS(r.TLS)
			traceOpts = append(traceOpts, otlptracegrpc.WithTLSCredentials(creds))
			metricOpts = append(metricOpts, otlpmetricgrpc.WithTLSCredentials(creds))
			logOpts = append(logOpts, otlploggrpc.WithTLSCredentials(creds))
		} else {
			traceOpts = append(traceOpts, otlptracegrpc.WithInsecure())
			metricOpts = append(metricOpts, otlpmetricgrpc.WithInsecure())
			logOpts = append(logOpts, otlploggrpc.WithInsecure())
		}
		if se, err = otlptracegrpc.New(ctx, traceOpts...); err != nil {
			return nil, err
		}
		if me, err = otlpmetricgrpc.New(ctx, metricOpts...); err != nil {
			return nil, err
		}
		if le, err = otlploggrpc.New(ctx, logOpts...); err != nil {
			return nil, err
		}
	case HTTP:
		traceOpts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(r.Endpoint), otlptracehttp.WithHeaders(r.Headers), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}
		metricOpts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(r.Endpoint), otlpmetrichttp.WithHeaders(r.Headers), otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
		logOpts := []otlploghttp.Option{otlploghttp.WithEndpoint(r.Endpoint), otlploghttp.WithHeaders(r.Headers), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false})}
		if r.TLS != nil {
			traceOpts = append(traceOpts, otlptracehttp.WithTLSClientConfig(r.TLS))
			metricOpts = append(metricOpts, otlpmetrichttp.WithTLSClientConfig(r.TLS))
			logOpts = append(logOpts, otlploghttp.WithTLSClientConfig(r.TLS))
		} else {
			traceOpts = append(traceOpts, otlptracehttp.WithInsecure())
			metricOpts = append(metricOpts, otlpmetrichttp.WithInsecure())
			logOpts = append(logOpts, otlploghttp.WithInsecure())
		}
		if se, err = otlptracehttp.New(ctx, traceOpts...); err != nil {
			return nil, err
		}
		if me, err = otlpmetrichttp.New(ctx, metricOpts...); err != nil {
			return nil, err
		}
		if le, err = otlploghttp.New(ctx, logOpts...); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown protocol %q: use %q or %q", r.Protocol, GRPC, HTTP)
	}
	e.spans = &countingSpans{SpanExporter: se, owner: e}
	e.metrics = &countingMetrics{Exporter: me, owner: e}
	e.logs = &countingLogs{Exporter: le, owner: e}
	return e, nil
}

type countingSpans struct {
	sdktrace.SpanExporter
	owner *exporters
	n     atomic.Int64
}

func (c *countingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.n.Add(int64(len(spans)))
	}
	c.owner.record(err)
	return err
}

type countingMetrics struct {
	sdkmetric.Exporter
	owner *exporters
	n     atomic.Int64
}

func (c *countingMetrics) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	if err == nil {
		c.n.Add(int64(DataPoints(rm)))
	}
	c.owner.record(err)
	return err
}

// DataPoints counts the data points in rm.
func DataPoints(rm *metricdata.ResourceMetrics) int {
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				n += len(d.DataPoints)
			case metricdata.Gauge[int64]:
				n += len(d.DataPoints)
			case metricdata.Sum[float64]:
				n += len(d.DataPoints)
			case metricdata.Sum[int64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[float64]:
				n += len(d.DataPoints)
			case metricdata.Histogram[int64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[float64]:
				n += len(d.DataPoints)
			case metricdata.ExponentialHistogram[int64]:
				n += len(d.DataPoints)
			case metricdata.Summary:
				n += len(d.DataPoints)
			}
		}
	}
	return n
}

type countingLogs struct {
	sdklog.Exporter
	owner *exporters
	n     atomic.Int64
}

func (c *countingLogs) Export(ctx context.Context, records []sdklog.Record) error {
	err := c.Exporter.Export(ctx, records)
	if err == nil {
		c.n.Add(int64(len(records)))
	}
	c.owner.record(err)
	return err
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
	for i, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctx)
			results[i] = res
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("rank %d: %w", r.Rank, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// withSchedules returns a copy of ranks in which the synchronous ranks of
// each run share one schedule.
func withSchedules(ranks []Rank) []Rank {
	ranks = slices.Clone(ranks)
	byRun := map[string][]Rank{}
	for _, r := range ranks {
		if !r.Unsynchronised {
			byRun[r.RunID] = append(byRun[r.RunID], r)
		}
	}
	scheds := make(map[string]*schedule, len(byRun))
	for run, rs := range byRun {
		scheds[run] = newSchedule(rs)
	}
	for i := range ranks {
		if !ranks[i].Unsynchronised {
			ranks[i].sched = scheds[ranks[i].RunID]
		}
	}
	return ranks
}

// Sum adds results up.
func Sum(results []Result) Result {
	var total Result
	for _, r := range results {
		total = total.Add(r)
	}
	return total
}
