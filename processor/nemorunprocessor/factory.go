// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
)

var processorCapabilities = consumer.Capabilities{MutatesData: true}

// runFactory carries what every processor it creates shares: the id
// generated once per collector start, so that traces, metrics and logs (and
// every nemo_run instance) agree on it, the clock, and each component's
// single-node launches, so that its signals agree on them.
type runFactory struct {
	generatedID func() string
	clock       clock.Clock
	// single is each component's single-node state, shared by its
	// processors (one per signal and pipeline) and stopped with the last
	// (a configuration reload starts afresh).
	single *sharedcomponent.Map[component.ID, *singleNode]
}

// NewFactory returns the factory for the nemo_run processor.
func NewFactory() processor.Factory {
	return newFactory(clock.Wall())
}

func newFactory(clk clock.Clock) processor.Factory {
	f := newRunFactory(clk)
	return processor.NewFactory(
		metadata.Type,
		createDefaultConfig,
		processor.WithTraces(f.createTraces, metadata.TracesStability),
		processor.WithMetrics(f.createMetrics, metadata.MetricsStability),
		processor.WithLogs(f.createLogs, metadata.LogsStability),
	)
}

func newRunFactory(clk clock.Clock) *runFactory {
	return &runFactory{
		generatedID: sync.OnceValue(generateRunID),
		clock:       clk,
		single:      sharedcomponent.NewMap[component.ID, *singleNode](sharedcomponent.WithLast),
	}
}

func (f *runFactory) newProcessor(set processor.Settings, cfg component.Config, signal string) (*runProcessor, error) {
	c := cfg.(*Config)
	if !usesSingleNode(c) {
		return newRunProcessor(set, c, signal, f.generatedID())
	}
	state, release := f.acquireSingleNode(set.ID, c)
	p, err := newRunProcessor(set, c, signal, f.generatedID(), withSingleNode(state, release))
	if err != nil {
		release()
	}
	return p, err
}

// acquireSingleNode returns the single-node state of component id,
// creating it for its first processor, and the function that releases this
// processor's share.
func (f *runFactory) acquireSingleNode(id component.ID, cfg *Config) (*singleNode, func()) {
	shared, _ := f.single.Acquire(id, func() (*singleNode, error) { return newSingleNode(cfg, f.clock), nil })
	var once sync.Once
	return shared.Unwrap(), func() { once.Do(func() { _ = shared.Shutdown(context.Background()) }) }
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
