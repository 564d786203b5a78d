package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"os"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

var processorCapabilities = consumer.Capabilities{MutatesData: true}

// runFactory carries what every processor it creates shares: how to read the
// collector's environment, and the id generated once per collector start, so
// that traces, metrics and logs (and every nemo_run instance) agree on it.
type runFactory struct {
	lookupEnv   func(string) (string, bool)
	generatedID func() string
}

// NewFactory returns the factory for the nemo_run processor.
func NewFactory() processor.Factory {
	return newFactory(os.LookupEnv)
}

func newFactory(lookupEnv func(string) (string, bool)) processor.Factory {
	f := &runFactory{lookupEnv: lookupEnv, generatedID: sync.OnceValue(generateRunID)}
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithMetrics(f.createMetrics, metadata.MetricsStability),
		processor.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func (f *runFactory) newProcessor(set processor.Settings, cfg component.Config, signal string) (*runProcessor, error) {
	return newRunProcessor(set, cfg.(*Config), signal, f.lookupEnv, f.generatedID())
}

func (f *runFactory) createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	p, err := f.newProcessor(set, cfg, "traces")
	if err != nil {
		return nil, err
	}
	return processorhelper.NewTraces(ctx, set, cfg, next, p.processTraces,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(p.shutdown))
}

func (f *runFactory) createMetrics(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	p, err := f.newProcessor(set, cfg, "metrics")
	if err != nil {
		return nil, err
	}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(p.shutdown))
}

func (f *runFactory) createLogs(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Logs) (processor.Logs, error) {
	p, err := f.newProcessor(set, cfg, "logs")
	if err != nil {
		return nil, err
	}
	return processorhelper.NewLogs(ctx, set, cfg, next, p.processLogs,
		processorhelper.WithCapabilities(processorCapabilities),
		processorhelper.WithShutdown(p.shutdown))
}
