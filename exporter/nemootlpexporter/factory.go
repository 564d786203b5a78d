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

	"github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
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

func create[T comparable, E component.Component](ctx context.Context, set exporter.Settings, c *Config, sig signal[T, E]) (E, error) {
	var none E
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return none, err
	}
	letters := deadletter.NewWriter(c.DeadLetter, set.ID.String(), set.Logger, deadletter.Counted(tb.ExporterNemoOtlpDeadLetters, set.ID.String()))
	x := deadletter.NewDeliverer(sig.Signal, letters, c.RetryConfig, set.Logger)
	var cl client[T]
	userAgent := fmt.Sprintf("%s/%s (%s/%s)", set.BuildInfo.Description, set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH)
	return sig.NewExporter(ctx, deadletter.QueueSettings(set, tb.ExporterNemoOtlpQueueItemsLost), c, x.Push,
		exporterhelper.WithQueue(c.QueueConfig),
		exporterhelper.WithRetry(deadletter.RetrySender(c.RetryConfig)),
		exporterhelper.WithTimeout(c.TimeoutConfig),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		exporterhelper.WithStart(func(ctx context.Context, host component.Host) error {
			var err error
			cl, err = newClient(ctx, host, set.TelemetrySettings, c, sig, userAgent)
			x.Send = cl.send
			return err
		}),
		exporterhelper.WithShutdown(func(context.Context) error {
			tb.Shutdown()
			if cl.close == nil {
				return nil
			}
			return cl.close()
		}),
	)
}
