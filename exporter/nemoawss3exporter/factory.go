// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoawss3exporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter"

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/awss3exporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// NewFactory returns the factory of the nemo_awss3 exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

// createDefaultConfig is the awss3 exporter's defaults but the sending
// queue, on (in memory; a storage makes it persistent) as nemo_otlp's, and
// the dead letters' (a directory is required).
func createDefaultConfig() component.Config {
	c := &Config{
		stock:      *stock.CreateDefaultConfig().(*awss3exporter.Config),
		DeadLetter: deadletter.NewDefaultConfig(),
	}
	c.stock.QueueSettings = configoptional.Some(exporterhelper.NewDefaultQueueConfig())
	return c
}

// signal is what nemo_awss3 needs of one signal: its letters and
// exporters (deadletter.Exporting), and making the stock exporter.
type signal[T comparable, E component.Component] struct {
	deadletter.Exporting[T, E]
	stock func(context.Context, exporter.Settings, component.Config) (E, error)
}

// statusCoder is an AWS SDK error that carries the HTTP status of S3's answer.
type statusCoder interface {
	error
	HTTPStatusCode() int
}

var stock = awss3exporter.NewFactory()

var (
	traces  = signal[ptrace.Traces, exporter.Traces]{deadletter.TracesExporting, stock.CreateTraces}
	metrics = signal[pmetric.Metrics, exporter.Metrics]{deadletter.MetricsExporting, stock.CreateMetrics}
	logs    = signal[plog.Logs, exporter.Logs]{deadletter.LogsExporting, stock.CreateLogs}
)

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	return create(ctx, set, cfg.(*Config), traces)
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	return create(ctx, set, cfg.(*Config), metrics)
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	return create(ctx, set, cfg.(*Config), logs)
}

// create wraps the stock exporter, made without queue, retry or timeout
// (one attempt per call), in exporterhelper's queue, retry and timeout
// from c, with a deadletter.Deliverer as the push function.
//
// Why by hand: the stock exporter's push function is not exported, only
// the exporterhelper exporter around it; without a queue and a retry that
// one returns each attempt's error to the caller, which is all the
// deliverer needs.
func create[T comparable, E component.Component](ctx context.Context, set exporter.Settings, c *Config, sig signal[T, E]) (E, error) {
	var none E
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return none, err
	}
	inner := c.stock
	inner.QueueSettings = configoptional.None[exporterhelper.QueueBatchConfig]()
	inner.BackOffConfig.Enabled = false
	inner.TimeoutSettings = exporterhelper.TimeoutConfig{}
	s3, err := sig.stock(ctx, innerSettings(set), &inner)
	if err != nil {
		return none, err
	}
	letters := deadletter.NewWriter(c.DeadLetter, set.ID.String(), set.Logger, deadletter.Counted(tb.ExporterNemoAwss3DeadLetters, set.ID.String()))
	x := deadletter.NewDeliverer(sig.Signal, letters, c.stock.BackOffConfig, set.Logger)
	consume := sig.Consume(s3)
	x.Send = func(ctx context.Context, d T) (deadletter.Partial, error) {
		return deadletter.Partial{}, refusal(consume(ctx, d))
	}
	return sig.NewExporter(ctx, deadletter.QueueSettings(set, tb.ExporterNemoAwss3QueueItemsLost), c, x.Push,
		exporterhelper.WithQueue(c.stock.QueueSettings),
		exporterhelper.WithRetry(deadletter.RetrySender(c.stock.BackOffConfig)),
		exporterhelper.WithTimeout(c.stock.TimeoutSettings),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(s3.Start),
		exporterhelper.WithShutdown(func(ctx context.Context) error {
			tb.Shutdown()
			return s3.Shutdown(ctx)
		}),
	)
}

// innerSettings are the stock exporter's settings: its id of its own type
// and this one's name (the stock factory checks the type), its own telemetry off
// (this exporter's exporterhelper counts what is sent and failed, once)
// and its failure log dropped (it would say "Rejecting data" of every
// attempt the deliverer retries or dead-letters); its other logs kept.
func innerSettings(set exporter.Settings) exporter.Settings {
	set.ID = component.NewIDWithName(stock.Type(), set.ID.Name())
	set.MeterProvider = noopmetric.NewMeterProvider()
	set.TracerProvider = nooptrace.NewTracerProvider()
	set.Logger = set.Logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return withoutRejecting{c} }))
	return set
}

// withoutRejecting drops exporterhelper's "Exporting failed. Rejecting
// data." entries.
type withoutRejecting struct{ zapcore.Core }

func (c withoutRejecting) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if strings.HasPrefix(e.Message, "Exporting failed. Rejecting data.") {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c withoutRejecting) With(fields []zapcore.Field) zapcore.Core {
	return withoutRejecting{c.Core.With(fields)}
}

// refusal marks an answer of S3 that no retry changes as permanent: a 4xx
// but 408 and 429 (AccessDenied, NoSuchBucket, InvalidAccessKeyId, ...).
// The AWS SDK has already retried what it retries; anything else (5xx, no
// answer, no credentials) is retried until the retry window runs out.
func refusal(err error) error {
	if err == nil || consumererror.IsPermanent(err) {
		return err
	}
	if re, ok := errors.AsType[statusCoder](err); ok {
		code := re.HTTPStatusCode()
		if code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests {
			return consumererror.NewPermanent(err)
		}
	}
	return err
}
