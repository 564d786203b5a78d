// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/journal"
	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// balancers makes the load balancer each slot sends through.
var balancers = loadbalancingexporter.NewFactory()

// NewFactory returns the factory of the spool exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(
		metadata.Type,
		createDefaultConfig,
		exporter.WithTraces(createTraces, metadata.TracesStability),
		exporter.WithMetrics(createMetrics, metadata.MetricsStability),
		exporter.WithLogs(createLogs, metadata.LogsStability),
	)
}

// defaultQueueSize is queue_size's default: 1 GiB per slot and signal,
// an hour of a node of 8 ranks sending every span (about 300 KB/s).
const defaultQueueSize = 1 << 30

func createDefaultConfig() component.Config {
	retry := configretry.NewDefaultBackOffConfig()
	retry.MaxElapsedTime = 0
	return &Config{
		QueueSize:     defaultQueueSize,
		NumConsumers:  4,
		MaxBatchItems: 8192,
		FlushTimeout:  100 * time.Millisecond,
		RetryConfig:   retry,
		Slots:         DefaultSlots,
		DrainTimeout:  10 * time.Second,
		LoadBalancing: *balancers.CreateDefaultConfig().(*loadbalancingexporter.Config),
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

// create makes one signal's spool: its load balancer, a queue per slot
// sending into it through a retrying exporter, and the exporter that
// splits what it is given over the slots.
func create[T any, E component.Component](ctx context.Context, set exporter.Settings, c *Config, sig signal[T, E]) (E, error) {
	var none E
	balancer, err := sig.newBalancer(ctx, balancerSettings(set), c.balancerConfig())
	if err != nil {
		return none, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return none, err
	}
	letters := deadletter.NewWriter(c.DeadLetter, set.ID.String(), set.Logger, deadletter.Counted(tb.ExporterSpoolDeadLetters, set.ID.String()))
	s := newSpool(c, balancer, sig.Signal, sig.codec, letters, tb.Shutdown)
	memory := journal.NewMemory(memoryBudget) // shared by the slots
	for i := range c.Slots {
		sset := slotSettings(set, i)
		sender, err := sig.NewExporter(ctx, sset, c, s.sent(sig.Consume(balancer)), c.slotOptions()...)
		if err != nil {
			return none, err
		}
		s.slots = append(s.slots, &slot[T]{
			dir:    filepath.Join(c.Directory, fmt.Sprintf("exporter_%s_%s_%s.journal", set.ID.Type(), sset.ID.Name(), sig.Name)),
			sender: sender,
			send:   sig.Consume(sender),
			opts:   queueOptions(c, tb, sset, sig.Name, memory),
		})
	}
	return sig.NewExporter(ctx, set, c, s.consume, s.options()...)
}

// queueOptions bound a slot's queue (on disk, and in memory with the other
// slots of its spool) and report it: its bytes, and what of it could not
// be read back (logged at ERROR: acknowledged and lost).
func queueOptions(c *Config, tb *metadata.TelemetryBuilder, set exporter.Settings, signal string, memory *journal.Memory) journal.Options {
	attrs := metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", set.ID.String()), attribute.String("data_type", signal)))
	tb.ExporterSpoolQueueCapacity.Add(context.Background(), c.QueueSize, attrs)
	lost := metric.WithAttributeSet(attribute.NewSet(attribute.String("exporter", set.ID.String())))
	return journal.Options{
		MaxBytes: c.QueueSize,
		Memory:   memory,
		Held:     func(delta int64) { tb.ExporterSpoolQueueBytes.Add(context.Background(), delta, attrs) },
		Lost: func(path string, from, to int64) {
			set.Logger.Error("a part of the spool's queue could not be read back and is lost (a record torn by a crash, a damaged file or a read error): what it held was acknowledged to the ranks",
				zap.String("file", path), zap.Int64("from_byte", from), zap.Int64("to_byte", to))
			tb.ExporterSpoolQueueItemsLost.Add(context.Background(), 1, lost)
		},
	}
}

// balancerConfig is load_balancing without its own queues and retries:
// a slot's queue holds and its retry sender retries, so a request leaves
// the disk only once the gateway answered it.
func (c *Config) balancerConfig() *loadbalancingexporter.Config {
	lb := c.LoadBalancing
	lb.TimeoutSettings = exporterhelper.TimeoutConfig{}
	lb.QueueSettings = configoptional.None[exporterhelper.QueueBatchConfig]()
	lb.BackOffConfig.Enabled = false
	lb.Protocol.OTLP.QueueConfig = configoptional.None[exporterhelper.QueueBatchConfig]()
	lb.Protocol.OTLP.RetryConfig.Enabled = false
	return &lb
}

// slotOptions: each slot's sender retries into the load balancer. No
// queue (the slot's own is in front of it) and no timeout of its own:
// protocol::otlp::timeout bounds each request to a gateway.
func (c *Config) slotOptions() []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithRetry(c.RetryConfig),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	}
}

// balancerSettings names the load balancer after the spool (load_balancing/NAME):
// its own telemetry (otelcol_loadbalancer_*) is reported under that name.
func balancerSettings(set exporter.Settings) exporter.Settings {
	set.ID = component.NewIDWithName(balancers.Type(), set.ID.Name())
	return set
}

// DefaultSlots is the slots of the default config.
const DefaultSlots = 32

// SlotName is the component name of slot i of the spool named name:
// slotNN, or NAME_slotNN (spool/slotNN, spool/NAME_slotNN), in the name of
// its queue's directory (exporter_spool_slotNN_<signal>.journal) and of its
// otelcol_exporter_* series. It must not change between releases: a
// renamed slot strands what its queue held.
func SlotName(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("slot%02d", i)
	}
	return fmt.Sprintf("%s_slot%02d", name, i)
}

func slotSettings(set exporter.Settings, i int) exporter.Settings {
	set.ID = component.NewIDWithName(set.ID.Type(), SlotName(set.ID.Name(), i))
	set.Logger = set.Logger.With(zap.Int("slot", i))
	return set
}
