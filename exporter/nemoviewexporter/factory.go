// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

const (
	defaultEndpoint = "localhost:8890"
	// A 1,000-rank run's last 500 steps take about 8 MiB (BENCHMARKS.md:
	// 12 bytes per rank step and the maps); the defaults bound the view at
	// 5 runs of 2,048 ranks, about 80 MiB.
	defaultMaxRuns  = 5
	defaultMaxSteps = 500
	defaultMaxRanks = 2048
	defaultRefresh  = 2 * time.Second
	// defaultSaveInterval is how often the runs are saved with storage set.
	defaultSaveInterval = time.Minute
)

// NewFactory returns the factory of the nemo_view exporter.
func NewFactory() exporter.Factory {
	views := sharedcomponent.NewMap[component.Config, *view](sharedcomponent.WithLast)
	f := &factory{views: views}
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithMetrics(f.createMetrics, metadata.MetricsStability),
		exporter.WithLogs(f.createLogs, metadata.LogsStability),
		exporter.WithTraces(f.createTraces, metadata.TracesStability),
	)
}

func createDefaultConfig() component.Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = defaultEndpoint
	return &Config{
		ServerConfig: srv,
		Enabled:      true,
		MaxRuns:      defaultMaxRuns,
		MaxSteps:     defaultMaxSteps,
		MaxRanks:     defaultMaxRanks,
		// nemo_steps' and rank_strategy's defaults: one definition.
		RelativeThreshold:   steps.DefaultRelativeThreshold,
		IndividualThreshold: steps.DefaultIndividualThreshold,
		RefreshInterval:     defaultRefresh,
		SaveInterval:        defaultSaveInterval,
		Hosts: HostsConfig{
			Window: 7 * 24 * time.Hour, MaxHosts: 10000,
			DrainAfterRuns: 2, StragglerStepsPerRun: 3,
		},
	}
}

// factory hands the metrics and logs exporters of one configuration the
// same view (one store, one HTTP server), shut down with the last of them.
type factory struct {
	views *sharedcomponent.Map[component.Config, *view]
}

func (f *factory) acquire(set exporter.Settings, cfg *Config) (*sharedcomponent.Component[*view], []exporterhelper.Option, error) {
	shared, err := f.views.Acquire(cfg, func() (*view, error) { return newView(cfg, set.ID, set.TelemetrySettings), nil })
	if err != nil {
		return nil, nil, err
	}
	return shared, []exporterhelper.Option{
		exporterhelper.WithStart(shared.Start),
		exporterhelper.WithShutdown(shared.Shutdown),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// No queue and no timeout: taking a batch is a few map updates in
		// memory; it is never refused, so nothing upstream waits on it.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}),
	}, nil
}

// create builds one signal's exporter on the shared view with build,
// releasing the view when that fails.
func create[T any](ctx context.Context, f *factory, set exporter.Settings, cfg component.Config,
	build func(v *view, opts ...exporterhelper.Option) (T, error),
) (T, error) {
	shared, opts, err := f.acquire(set, cfg.(*Config))
	if err != nil {
		var zero T
		return zero, err
	}
	exp, err := build(shared.Unwrap(), opts...)
	if err != nil {
		_ = shared.Shutdown(ctx) // release this user: the view was never started
	}
	return exp, err
}

func (f *factory) createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	return create(ctx, f, set, cfg, func(v *view, opts ...exporterhelper.Option) (exporter.Metrics, error) {
		return exporterhelper.NewMetrics(ctx, set, cfg, v.consumeMetrics, opts...)
	})
}

func (f *factory) createLogs(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Logs, error) {
	return create(ctx, f, set, cfg, func(v *view, opts ...exporterhelper.Option) (exporter.Logs, error) {
		return exporterhelper.NewLogs(ctx, set, cfg, v.consumeLogs, opts...)
	})
}

// createTraces takes the spans the collector kept (after rank_strategy),
// for the step timelines.
func (f *factory) createTraces(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Traces, error) {
	return create(ctx, f, set, cfg, func(v *view, opts ...exporterhelper.Option) (exporter.Traces, error) {
		return exporterhelper.NewTraces(ctx, set, cfg, v.consumeTraces, opts...)
	})
}
