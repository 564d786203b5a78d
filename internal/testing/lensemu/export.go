// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc/credentials"
)

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
		traceOpts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(r.Endpoint), otlptracegrpc.WithHeaders(r.Headers)}
		metricOpts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(r.Endpoint), otlpmetricgrpc.WithHeaders(r.Headers)}
		logOpts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(r.Endpoint), otlploggrpc.WithHeaders(r.Headers)}
		if !r.SDKDefaults {
			// Retries are off: a test of acknowledgement must see a
			// refusal, not a minute of backoff.
			traceOpts = append(traceOpts, otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
			metricOpts = append(metricOpts, otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false}))
			logOpts = append(logOpts, otlploggrpc.WithRetry(otlploggrpc.RetryConfig{Enabled: false}))
		}
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
		traceOpts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(r.Endpoint), otlptracehttp.WithHeaders(r.Headers)}
		metricOpts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(r.Endpoint), otlpmetrichttp.WithHeaders(r.Headers)}
		logOpts := []otlploghttp.Option{otlploghttp.WithEndpoint(r.Endpoint), otlploghttp.WithHeaders(r.Headers)}
		if !r.SDKDefaults {
			traceOpts = append(traceOpts, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
			metricOpts = append(metricOpts, otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
			logOpts = append(logOpts, otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
		}
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
	e.spans = &countingSpans{SpanExporter: se, owner: e, acked: r.Acked}
	e.metrics = &countingMetrics{Exporter: me, owner: e}
	e.logs = &countingLogs{Exporter: le, owner: e}
	return e, nil
}

type countingSpans struct {
	sdktrace.SpanExporter
	owner *exporters
	acked *AckLog
	n     atomic.Int64
}

func (c *countingSpans) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		c.n.Add(int64(len(spans)))
		c.acked.add(spans)
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
