// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"context"
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
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// NewFactory returns the factory of the weave exporter. Weave ingests traces
// only, so the factory offers traces only: the collector refuses weave in a
// metrics or logs pipeline at start, as for any traces-only exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
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
		DeadLetter:      deadletter.NewDefaultConfig(),
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
	// The exporter ends a request's retries itself (deadletter.Window): the
	// retry sender retries until then.
	retry := c.RetryConfig
	retry.MaxElapsedTime = 0
	return exporterhelper.NewTraces(ctx, deadletter.QueueSettings(set, e.telemetry.ExporterWeaveQueueItemsLost), cfg, e.pushTraces,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithShutdown(e.shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// timeout is the HTTP client's, per request: one push may send several.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		exporterhelper.WithRetry(retry),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}
