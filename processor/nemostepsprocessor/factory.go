// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/receiver"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor/internal/metadata"
)

// defaultMaxOpenRankSteps holds a 10,000-rank job's steps for 100 steps
// (ten steps a second over decision_wait, while one rank is missing), about
// 160 MB at the ~160 bytes per open rank step README.md gives.
const defaultMaxOpenRankSteps = 1_000_000

// NewFactory returns the factory of the nemo_steps processor: it reads
// every span of a traces pipeline, passes the batch on unchanged, and sends
// its step metrics, stall gauges and records through the nemo_steps
// receiver of the same name (NewReceiverFactory).
//
// Why a processor and a receiver rather than a connector (as contrib's
// spanmetrics is): a connector is one of the consumers a pipeline's
// traces fan out to, next to the pipeline that drops ranks
// (rank_strategy); the collector then copies every batch for the consumer
// that changes it (core's fanoutconsumer), because one that only reads
// shares it. In the default preset at 100,000 spans/s that copy was a
// tenth of the collector's CPU. A processor reads the batch in line,
// before rank_strategy, and no copy is made.
func NewFactory() processor.Factory { return wallFactories.processor() }

// NewReceiverFactory returns the factory of the nemo_steps receiver: the
// metrics and logs pipelines it is in get what the nemo_steps processor of
// the same name finds. receiver/nemostepsreceiver registers it.
func NewReceiverFactory() receiver.Factory { return wallFactories.receiver() }

// wallFactories are the collector's: processor and receiver share one
// table of nemo_steps by id.
var wallFactories = newFactories(clock.Wall())

// factories makes processors and receivers that share one nemo_steps per
// id, on clk (tests decide steps and judge stalls without sleeping).
type factories struct {
	clk clock.Clock
	// Shut down with the first of its users: the collector shuts the
	// receiver down before the pipelines it feeds, and the processor
	// after every receiver upstream of it, so whichever goes first still
	// has both the receiver's pipelines and every span that came through
	// the processor before it.
	shared *sharedcomponent.Map[component.ID, *pair]
}

func newFactories(clk clock.Clock) *factories {
	return &factories{clk: clk, shared: sharedcomponent.NewMap[component.ID, *pair](sharedcomponent.WithFirst)}
}

func (f *factories) processor() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(f.createTraces, metadata.TracesStability))
}

func (f *factories) receiver() receiver.Factory {
	return receiver.NewFactory(metadata.Type, createReceiverConfig,
		receiver.WithMetrics(func(_ context.Context, set receiver.Settings, _ component.Config, next consumer.Metrics) (receiver.Metrics, error) {
			comp := f.acquire(set.ID)
			comp.Unwrap().metrics = next
			return comp, nil
		}, component.StabilityLevelAlpha),
		receiver.WithLogs(func(_ context.Context, set receiver.Settings, _ component.Config, next consumer.Logs) (receiver.Logs, error) {
			comp := f.acquire(set.ID)
			comp.Unwrap().logs = next
			return comp, nil
		}, component.StabilityLevelAlpha))
}

// createTraces makes the processor of one traces pipeline. A nemo_steps
// listed in several traces pipelines is one engine: every pipeline's spans
// count in the same runs.
func (f *factories) createTraces(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
	comp := f.acquire(set.ID)
	p := comp.Unwrap()
	if p.steps == nil {
		s, err := newProcessor(set, cfg.(*Config), f.clk)
		if err != nil {
			_ = comp.Shutdown(ctx) // let the id go: nothing was started
			return nil, err
		}
		p.steps = s
	}
	return processorhelper.NewTraces(ctx, set, cfg, next,
		func(ctx context.Context, td ptrace.Traces) (ptrace.Traces, error) {
			_ = p.steps.ConsumeTraces(ctx, td) // never fails
			return td, nil
		},
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		processorhelper.WithStart(comp.Start),
		processorhelper.WithShutdown(comp.Shutdown))
}

// acquire takes a share of id's nemo_steps, for its caller to fill in its
// half.
func (f *factories) acquire(id component.ID) *sharedcomponent.Component[*pair] {
	comp, _ := f.shared.Acquire(id, func() (*pair, error) { return &pair{id: id}, nil }) // creating a pair cannot fail
	return comp
}

// pair is one nemo_steps: the processor's engine and the receiver's
// pipelines. The collector creates every component before it starts any,
// so at Start both halves are known.
type pair struct {
	id      component.ID
	steps   *stepsProcessor
	metrics consumer.Metrics
	logs    consumer.Logs
}

// Start checks that both halves are in the configuration, naming the fix,
// and starts the engine.
func (p *pair) Start(ctx context.Context, host component.Host) error {
	if p.steps == nil {
		return fmt.Errorf("receiver %q: no processor %q in a traces pipeline: add processors: %s: {} and list it in the traces pipeline, before rank_strategy", p.id, p.id, p.id)
	}
	if p.metrics == nil && p.logs == nil {
		return fmt.Errorf("processor %q: no receiver %q in a metrics or logs pipeline, so its step metrics and records go nowhere: add receivers: %s: {} and list it in a metrics pipeline (and a logs pipeline for the stall and goodput records)", p.id, p.id, p.id)
	}
	p.steps.next, p.steps.nextLogs = p.metrics, p.logs
	return p.steps.Start(ctx, host)
}

// Shutdown decides every open step and sends the last points and records.
func (p *pair) Shutdown(ctx context.Context) error {
	if p.steps == nil {
		return nil
	}
	return p.steps.Shutdown(ctx)
}

// ReceiverConfig is the nemo_steps receiver's: it has no settings, the
// processor of the same name has them all.
type ReceiverConfig struct{}

func createReceiverConfig() component.Config { return &ReceiverConfig{} }

func createDefaultConfig() component.Config {
	return &Config{
		Settings: steps.DefaultSettings(),
		Waits:    steps.DefaultWaits(),
		Keys:     steps.DefaultKeys(),
		// Some: on when the block is absent; enabled: false turns it off.
		Stalls: configoptional.Some(StallsConfig{
			MinStall:     stall.DefaultMinStall,
			StallFactor:  stall.DefaultFactor,
			JobSpanNames: defaultJobSpanNames(),
		}),
		Goodput: configoptional.Some(GoodputConfig{
			Interval:                defaultGoodputInterval,
			CheckpointLoadSpanNames: []string{"megatron.checkpoint.load*", "megatron.load_checkpoint"},
			CheckpointSaveSpanNames: []string{"megatron.checkpoint.save*", "megatron.checkpoint.exposed_save*", "megatron.save_checkpoint"},
			EvaluationSpanNames:     []string{"megatron.evaluate*", "megatron.eval.*"},
			JobSpanNames:            defaultJobSpanNames(),
		}),
		MaxOpenRankSteps: defaultMaxOpenRankSteps,
	}
}

// defaultGoodputInterval is how often a running run's goodput is emitted.
const defaultGoodputInterval = 5 * time.Minute

// defaultJobSpanNames are Megatron-LM's run-long spans (both taxonomies)
// and NeMo Lens's workload span.
func defaultJobSpanNames() []string {
	return []string{"megatron.pretrain", "megatron.train", "workload"}
}
