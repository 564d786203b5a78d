// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Command loadgen replays NeMo Lens-shaped OTLP load at an OpenTelemetry
// Collector fast enough that the collector, not the generator, is measured.
//
// It builds the requests of a synthetic Megatron-LM job with pdata once
// (one request per rank: the rank's resource and several whole train steps),
// marshals them, and then only copies and patches those bytes per send: span
// ids, trace ids (per-step trace scope), timestamps and megatron.iteration
// change on every replay, each in place (see patch.go). Requests go over raw
// gRPC (a pass-through codec on several connections) or HTTP/protobuf
// (several keep-alive connections), paced to a fixed rate or as fast as the
// collector answers, for a duration or a count, whichever ends first. It prints
// a JSON report (see report) and exits 1 when the collector accepted nothing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// maxDuration bounds every run: the generator always stops by itself.
const maxDuration = time.Hour

// maxBatch bounds the items of one request (100,000 spans are ~18 MB, far
// over the OTLP receiver's default 4 MiB gRPC message limit already).
const maxBatch = 100_000

type options struct {
	endpoint       string
	protocol       string
	signal         string
	ranks          int
	tp, pp         int
	microbatches   int
	batch          int
	rate           float64
	duration       time.Duration
	count          int64
	conns          int
	workers        int
	timeout        time.Duration
	runID          string
	serviceName    string
	traceScope     string
	rankKeys       string
	extraAttrs     int
	stepDuration   time.Duration
	stragglers     int
	straggleFactor float64
	unsynchronised bool
	startIteration int
	seed           uint64
	headers        headerFlag
	errorBackoff   time.Duration
	out            string
}

type headerFlag map[string]string

func (h headerFlag) String() string {
	parts := make([]string, 0, len(h))
	for k, v := range h {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (h headerFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("header must be key=value, got %q", s)
	}
	h[k] = v
	return nil
}

const usageHeader = `loadgen replays NeMo Lens-shaped OTLP load (a Megatron-LM job: one resource per
rank, a megatron.train_step subtree of 8+3*microbatches spans per step) at an
OpenTelemetry Collector, from requests marshaled once and patched per send.
It stops by itself (-duration, -count) and prints a JSON report.

Usage: loadgen [flags]

Examples:
  loadgen -duration 10s                           # gRPC to 127.0.0.1:4317, as fast as accepted
  loadgen -rate 100000 -ranks 1000 -duration 30s  # 100k spans/s from 1,000 ranks
  loadgen -protocol http -endpoint 127.0.0.1:4318 -count 1000000
  loadgen -signal metrics -ranks 64 -rate 5000

Flags:
`

func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{headers: headerFlag{}}
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.endpoint, "endpoint", "", "collector OTLP address host:port (default 127.0.0.1:4317 for grpc, 127.0.0.1:4318 for http)")
	fs.StringVar(&o.protocol, "protocol", "grpc", "grpc or http (OTLP http/protobuf)")
	fs.StringVar(&o.signal, "signal", signalTraces, "traces, metrics or logs; the items counted are spans, data points or log records")
	fs.IntVar(&o.ranks, "ranks", 8, "number of training ranks (one resource and one pre-built request each)")
	fs.IntVar(&o.tp, "tp", 1, "tensor-parallel size; -ranks must be a multiple of tp*pp")
	fs.IntVar(&o.pp, "pp", 2, "pipeline-parallel size (stages > 0 link their recv_forward span to the previous stage)")
	fs.IntVar(&o.microbatches, "microbatches", 4, "micro-batches per step: a step has 8+3*microbatches spans (20 for 4)")
	fs.IntVar(&o.batch, "batch", 500, "items per request, rounded down to whole steps (at least one step)")
	fs.Float64Var(&o.rate, "rate", 0, "items per second to send; 0 sends as fast as the collector answers")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send (at most 1h)")
	fs.Int64Var(&o.count, "count", 0, "stop after sending this many items (rounded up to whole requests); 0: -duration only")
	fs.IntVar(&o.conns, "conns", 4, "connections to open")
	fs.IntVar(&o.workers, "workers", 8, "requests in flight at once, spread over the connections (http: at most one per connection)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of one request")
	fs.StringVar(&o.runID, "run-id", "5f3a9c1e2b7d", `nemo.run.id shared by all ranks; "" sends none; "random" gives every rank its own`)
	fs.StringVar(&o.serviceName, "service-name", "nemo", "service.name of every rank")
	fs.StringVar(&o.traceScope, "trace-scope", "rank", `"rank": one trace per rank, steps are children of the rank's long-lived megatron.train span (as Megatron does); "step": one trace per train step`)
	fs.StringVar(&o.rankKeys, "rank-keys", "nv", `rank attribute spelling: "nv" (nv.dl.rank, ...), "dl" (older dl.rank, ...), "mixed" (alternating, every third rank as strings)`)
	fs.IntVar(&o.extraAttrs, "extra-attrs", 0, "extra string attributes on every span, data point or log record")
	fs.DurationVar(&o.stepDuration, "step-duration", time.Second, "duration of one train step (timestamps are synthetic; the last step of a request ends at send time)")
	fs.IntVar(&o.stragglers, "stragglers", 0, "ranks whose compute (megatron.forward_backward) is -straggle-factor times longer; the others wait for them in grad sync")
	fs.Float64Var(&o.straggleFactor, "straggle-factor", 3, "compute factor of straggling ranks")
	fs.BoolVar(&o.unsynchronised, "unsynchronised", false, "steps of different ranks are independent (a straggler's whole step is longer) instead of synchronous data parallelism")
	fs.IntVar(&o.startIteration, "start-iteration", 1, "megatron.iteration of the first step")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of ids and jitter (same seed, same data)")
	fs.Var(o.headers, "header", "extra request header key=value (repeatable)")
	fs.DurationVar(&o.errorBackoff, "error-backoff", 10*time.Millisecond, "pause of a worker after a refused request")
	fs.StringVar(&o.out, "out", "", "write the JSON report to this file instead of stdout")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.endpoint == "" {
		o.endpoint = "127.0.0.1:4317"
		if o.protocol == "http" {
			o.endpoint = "127.0.0.1:4318"
		}
	}
	return o, o.validate()
}

func (o options) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if o.protocol != "grpc" && o.protocol != "http" {
		bad("-protocol must be grpc or http, got %q", o.protocol)
	}
	if _, ok := grpcMethods[o.signal]; !ok {
		bad("-signal must be traces, metrics or logs, got %q", o.signal)
	}
	if o.tp < 1 || o.pp < 1 {
		bad("-tp and -pp must be at least 1, got %d and %d", o.tp, o.pp)
	} else if o.ranks < 1 || o.ranks%(o.tp*o.pp) != 0 {
		bad("-ranks must be a positive multiple of tp*pp (%d), got %d", o.tp*o.pp, o.ranks)
	}
	if o.microbatches < 1 || o.microbatches > 1024 {
		bad("-microbatches must be in [1,1024], got %d", o.microbatches)
	}
	if o.batch < 1 || o.batch > maxBatch {
		bad("-batch must be in [1,%d], got %d", maxBatch, o.batch)
	}
	if o.rate < 0 {
		bad("-rate must be >= 0, got %g", o.rate)
	}
	if o.duration <= 0 || o.duration > maxDuration {
		bad("-duration must be in (0,%s], got %s", maxDuration, o.duration)
	}
	if o.count < 0 {
		bad("-count must be >= 0, got %d", o.count)
	}
	if o.conns < 1 || o.workers < 1 {
		bad("-conns and -workers must be at least 1, got %d and %d", o.conns, o.workers)
	}
	if o.timeout <= 0 {
		bad("-timeout must be positive, got %s", o.timeout)
	}
	if o.traceScope != "rank" && o.traceScope != "step" {
		bad(`-trace-scope must be "rank" or "step", got %q`, o.traceScope)
	}
	if o.rankKeys != "nv" && o.rankKeys != "dl" && o.rankKeys != "mixed" {
		bad(`-rank-keys must be "nv", "dl" or "mixed", got %q`, o.rankKeys)
	}
	if o.extraAttrs < 0 || o.extraAttrs > 1000 {
		bad("-extra-attrs must be in [0,1000], got %d", o.extraAttrs)
	}
	if o.stepDuration <= 0 {
		bad("-step-duration must be positive, got %s", o.stepDuration)
	}
	if o.stragglers < 0 || o.stragglers > o.ranks {
		bad("-stragglers must be in [0,ranks], got %d", o.stragglers)
	}
	if o.straggleFactor <= 0 {
		bad("-straggle-factor must be positive, got %g", o.straggleFactor)
	}
	if o.startIteration < 0 || o.startIteration > maxIteration/2 {
		bad("-start-iteration must be in [0,%d], got %d", maxIteration/2, o.startIteration)
	}
	if o.errorBackoff < 0 {
		bad("-error-backoff must be >= 0, got %s", o.errorBackoff)
	}
	return errors.Join(errs...)
}

// inFlight is the number of workers, each with one request in flight: an
// HTTP/1.1 connection carries one request at a time.
func (o options) inFlight() int {
	if o.protocol == "http" {
		return min(o.workers, o.conns)
	}
	return o.workers
}

func (o options) job() job {
	j := job{
		signal:         o.signal,
		ranks:          o.ranks,
		tp:             o.tp,
		pp:             o.pp,
		microbatches:   o.microbatches,
		stepDuration:   o.stepDuration,
		stragglers:     o.stragglers,
		straggleFactor: o.straggleFactor,
		unsynchronised: o.unsynchronised,
		traceScope:     o.traceScope,
		rankKeys:       o.rankKeys,
		extraAttrs:     o.extraAttrs,
		runID:          o.runID,
		serviceName:    o.serviceName,
		seed:           o.seed,
	}
	j.stepsPerRequest = max(1, o.batch/j.itemsPerStep())
	return j
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
	os.Exit(runAndReport(o))
}

// runAndReport sends the load until done or interrupted, writes the report,
// and returns the exit code: 1 when the run failed or nothing was accepted.
func runAndReport(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 1
	}
	if err := writeReport(o.out, rep); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		return 1
	}
	if rep.ItemsAccepted == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: the collector accepted nothing")
		return 1
	}
	return 0
}

func writeReport(path string, rep report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	b = append(b, '\n')
	if path == "" {
		_, err = os.Stdout.Write(b)
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // G306: a benchmark report with no secrets, meant to be readable like any output file
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// run builds the templates, sends, and returns the report.
func run(ctx context.Context, o options) (report, error) {
	j := o.job()
	buildStart := time.Now()
	templates, err := buildTemplates(j, buildStart.UnixNano())
	if err != nil {
		return report{}, err
	}
	buildTime := time.Since(buildStart)
	runtime.GC()

	senders, err := openSenders(o)
	if err != nil {
		return report{}, err
	}
	defer func() {
		for _, s := range senders {
			_ = s.close()
		}
	}()

	cpu0 := cpuTime()
	res := drive(ctx, o, j, templates, buildStart.UnixNano(), senders)
	cpu := cpuTime() - cpu0

	var templateBytes int
	for _, t := range templates {
		templateBytes += len(t.data)
	}
	return newReport(o, j, res, cpu, buildTime, len(templates), templateBytes), nil
}

// buildTemplates builds and marshals one request per rank, its steps ending
// at ref, on every core (1,000 ranks of 500 spans take seconds on one).
func buildTemplates(j job, ref int64) ([]*template, error) {
	templates := make([]*template, j.ranks)
	errs := make([]error, j.ranks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), j.ranks) {
		wg.Go(func() {
			for r := int(next.Add(1) - 1); r < j.ranks; r = int(next.Add(1) - 1) {
				templates[r], errs[r] = buildTemplate(j, r, ref)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return templates, nil
}

func buildTemplate(j job, rank int, ref int64) (*template, error) {
	data, err := j.buildRequest(rank, ref)
	if err != nil {
		return nil, fmt.Errorf("marshal rank %d: %w", rank, err)
	}
	patches, err := findPatches(j.signal, data, j.traceScope == "step")
	if err != nil {
		return nil, fmt.Errorf("locate fields of rank %d: %w", rank, err)
	}
	return &template{data: data, patches: patches, items: j.itemsPerRequest()}, nil
}

func openSenders(o options) ([]sender, error) {
	senders := make([]sender, 0, o.conns)
	for range o.conns {
		if o.protocol == "http" {
			senders = append(senders, newHTTPSender(o.endpoint, o.signal, o.headers, o.timeout))
			continue
		}
		s, err := newGRPCSender(o.endpoint, o.signal, o.headers)
		if err != nil {
			for _, s := range senders {
				_ = s.close()
			}
			return nil, err
		}
		senders = append(senders, s)
	}
	return senders, nil
}

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
