// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/service/telemetry"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadata"
)

func TestFactoryDefaults(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.TracesStability())
	cfg := f.CreateDefaultConfig().(*Config)
	assert.Equal(t, "https://trace.wandb.ai/otel/v1/traces", cfg.ClientConfig.Endpoint)
	assert.Equal(t, 30*time.Second, cfg.ClientConfig.Timeout)
	assert.True(t, cfg.QueueConfig.HasValue())
	assert.True(t, cfg.RetryConfig.Enabled)
	require.ErrorIs(t, cfg.Validate(), errNoAPIKey, "the defaults alone are not enough: a key is needed")
}

func TestCreateTracesRefusesInvalidURL(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	cfg.Deployment = DeploymentDedicated
	_, err := NewFactory().CreateTraces(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.ErrorIs(t, err, errNoHost)
}

func TestExporterDoesNotMutate(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	exp, err := NewFactory().CreateTraces(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	assert.Equal(t, consumer.Capabilities{MutatesData: false}, exp.Capabilities())
	require.NoError(t, exp.Shutdown(t.Context()))
}

// Weave ingests traces only: the factory offers no metrics or logs exporter.
func TestFactoryIsTracesOnly(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, component.StabilityLevelUndefined, f.MetricsStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.LogsStability())

	cfg := f.CreateDefaultConfig()
	set := exportertest.NewNopSettings(metadata.Type)
	_, err := f.CreateMetrics(t.Context(), set, cfg)
	require.ErrorIs(t, err, pipeline.ErrSignalNotSupported)
	_, err = f.CreateLogs(t.Context(), set, cfg)
	require.ErrorIs(t, err, pipeline.ErrSignalNotSupported)
}

// staticProvider serves one configuration under the "test" scheme.
type staticProvider struct{ conf map[string]any }

func (p staticProvider) Retrieve(context.Context, string, confmap.WatcherFunc) (*confmap.Retrieved, error) {
	return confmap.NewRetrieved(p.conf)
}
func (staticProvider) Scheme() string                 { return "test" }
func (staticProvider) Shutdown(context.Context) error { return nil }

func newCollector(t *testing.T, pipelines map[string]any) *otelcol.Collector {
	conf := map[string]any{
		"receivers": map[string]any{"nop": nil},
		"exporters": map[string]any{"weave": map[string]any{"api_key": "test-key", "entity": "acme", "project": "llm", "dead_letter": map[string]any{"directory": t.TempDir()}}},
		"service":   map[string]any{"pipelines": pipelines},
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: func() (otelcol.Factories, error) {
			return otelcol.Factories{
				Receivers: map[component.Type]receiver.Factory{receivertest.NopType: receivertest.NewNopFactory()},
				Exporters: map[component.Type]exporter.Factory{metadata.Type: NewFactory()},
				// The collector's own telemetry plays no part in building
				// pipelines: a no-op factory keeps the test off port 8888.
				Telemetry: telemetry.NewFactory(func() component.Config { return &struct{}{} }),
			}, nil
		},
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs: []string{"test:config"},
			ProviderFactories: []confmap.ProviderFactory{confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
				return staticProvider{conf: conf}
			})},
		}},
		DisableGracefulShutdown: true,
	})
	require.NoError(t, err)
	return col
}

// The collector refuses weave outside a traces pipeline when it validates and
// when it starts.
func TestCollectorRefusesWeaveOutsideTraces(t *testing.T) {
	traces := map[string]any{"receivers": []any{"nop"}, "exporters": []any{"weave"}}
	for signal, want := range map[string]string{
		"metrics": `failed to create "weave" exporter for data type "metrics": telemetry type is not supported`,
		"logs":    `failed to create "weave" exporter for data type "logs": telemetry type is not supported`,
	} {
		t.Run(signal, func(t *testing.T) {
			pipelines := map[string]any{"traces": traces, signal: traces}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			err := newCollector(t, pipelines).DryRun(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)

			err = newCollector(t, pipelines).Run(ctx)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
			t.Logf("the collector stops with: %v", err)
		})
	}

	t.Run("traces only starts", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		pipelines := map[string]any{"traces": traces}
		require.NoError(t, newCollector(t, pipelines).DryRun(ctx))

		col := newCollector(t, pipelines)
		done := make(chan error, 1)
		go func() { done <- col.Run(ctx) }()
		require.Eventually(t, func() bool { return col.GetState() == otelcol.StateRunning }, 20*time.Second, 10*time.Millisecond)
		col.Shutdown()
		require.NoError(t, <-done)
	})
}

func TestStartFailsOnBadClientSettings(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.APIKey = "k"
	cfg.ClientConfig.TLS.CAFile = "/nonexistent/ca.pem"
	exp, err := NewFactory().CreateTraces(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err)
	err = exp.Start(t.Context(), componenttest.NewNopHost())
	assert.ErrorContains(t, err, "create weave HTTP client")
	require.NoError(t, exp.Shutdown(t.Context()))
}
