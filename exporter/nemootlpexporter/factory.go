// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

// NewFactory returns the factory of the nemo_otlp exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

// createDefaultConfig has the stock exporters' client defaults: gzip, a
// 512 KiB write buffer, and for HTTP a 30 s client timeout.
func createDefaultConfig() component.Config {
	grpcClient := configgrpc.NewDefaultClientConfig()
	grpcClient.Compression = configcompression.TypeGzip
	grpcClient.WriteBufferSize = 512 * 1024
	httpClient := confighttp.NewDefaultClientConfig()
	httpClient.Compression = configcompression.TypeGzip
	httpClient.WriteBufferSize = 512 * 1024
	httpClient.Timeout = 30 * time.Second
	return &Config{
		Protocol:      protocolGRPC,
		GRPC:          grpcClient,
		HTTP:          HTTPConfig{ClientConfig: httpClient},
		TimeoutConfig: exporterhelper.NewDefaultTimeoutConfig(),
		QueueConfig:   configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		RetryConfig:   configretry.NewDefaultBackOffConfig(),
		DeadLetter:    deadletter.NewDefaultConfig(),
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	return create(ctx, set, cfg.(*Config), traces)
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	return create(ctx, set, cfg.(*Config), metrics)
}

func createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	return create(ctx, set, cfg.(*Config), logs)
}

// The pdata types nemo_otlp's deliverer keys its retried requests by.
var (
	_ = map[ptrace.Traces]struct{}{}
	_ = map[pmetric.Metrics]struct{}{}
	_ = map[plog.Logs]struct{}{}
)

func create[T comparable, E component.Component](ctx context.Context, set exporter.Settings, c *Config, sig signal[T, E]) (E, error) {
	var none E
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return none, err
	}
	x := &deliverer[T, E]{
		sig:     sig,
		letters: deadletter.NewWriter(c.DeadLetter, set.ID.String(), set.Logger, deadletter.Counted(tb.ExporterNemoOtlpDeadLetters, set.ID.String())),
		window:  deadletter.NewWindow[T](c.RetryConfig.MaxElapsedTime),
		retry:   c.RetryConfig.Enabled,
		logger:  set.Logger,
		warn:    ratelog.Limiter[struct{}]{Every: time.Minute},
	}
	userAgent := fmt.Sprintf("%s/%s (%s/%s)", set.BuildInfo.Description, set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH)
	// The deliverer ends a request's retries itself (see deliverer): the
	// retry sender retries until then.
	retry := c.RetryConfig
	retry.MaxElapsedTime = 0
	return sig.newExporter(ctx, set, c, x.push,
		exporterhelper.WithQueue(c.QueueConfig),
		exporterhelper.WithRetry(retry),
		exporterhelper.WithTimeout(c.TimeoutConfig),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(func(ctx context.Context, host component.Host) error {
			cl, err := newClient(ctx, host, set.TelemetrySettings, c, sig, userAgent)
			x.client = cl
			return err
		}),
		exporterhelper.WithShutdown(func(context.Context) error {
			tb.Shutdown()
			if x.client.close == nil {
				return nil
			}
			return x.client.close()
		}),
	)
}
