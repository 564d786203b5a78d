package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadata"
)

// NewFactory returns the factory of the weave exporter.
//
// Weave ingests traces only. The factory still answers for metrics and logs,
// with an error naming the alternatives: without it the collector would only
// say "telemetry type is not supported".
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, component.StabilityLevelUndefined),
		exporter.WithLogs(createLogs, component.StabilityLevelUndefined),
	)
}

func createDefaultConfig() component.Config {
	client := confighttp.NewDefaultClientConfig()
	client.Endpoint = defaultEndpoint
	client.Timeout = 30 * time.Second
	client.Compression = configcompression.TypeGzip
	// Requests are large and responses nearly empty.
	client.WriteBufferSize = 512 * 1024
	return &Config{
		ClientConfig:    client,
		QueueConfig:     configoptional.Some(exporterhelper.NewDefaultQueueConfig()),
		RetryConfig:     configretry.NewDefaultBackOffConfig(),
		Deployment:      DeploymentMultiTenant,
		AuthMode:        AuthModeHeader,
		MaxRequestBytes: defaultMaxRequestBytes,
	}
}

func createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	c := cfg.(*Config)
	e, err := newWeaveExporter(c, set)
	if err != nil {
		return nil, err
	}
	return exporterhelper.NewTraces(ctx, set, cfg, e.pushTraces,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// timeout is the HTTP client's, per request: one push may send several.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}

func createMetrics(context.Context, exporter.Settings, component.Config) (exporter.Metrics, error) {
	return nil, errors.New("the weave exporter takes traces only: W&B Weave ingests traces, not metrics; " +
		"remove weave from the metrics pipeline and export metrics with prometheus, with otlp_http (e.g. to Honeycomb) or with jsonl_file")
}

func createLogs(context.Context, exporter.Settings, component.Config) (exporter.Logs, error) {
	return nil, errors.New("the weave exporter takes traces only: W&B Weave ingests traces, not logs; " +
		"remove weave from the logs pipeline and export logs with otlp_http (e.g. to Honeycomb) or with jsonl_file")
}
