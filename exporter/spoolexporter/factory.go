// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"
	"fmt"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.uber.org/zap"

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

func createDefaultConfig() component.Config {
	queue := exporterhelper.NewDefaultQueueConfig()
	queue.Sizer = exporterhelper.RequestSizerTypeBytes
	queue.QueueSize = 1 << 30
	queue.NumConsumers = 4
	retry := configretry.NewDefaultBackOffConfig()
	retry.MaxElapsedTime = 0
	return &Config{
		QueueConfig:   queue,
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

// create makes one signal's spool: its load balancer, a persistent queue
// per slot sending into it, and the exporter that splits what it is given
// over the slots.
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
	s := newSpool(c, balancer, sig.Signal, letters, tb.Shutdown)
	for i := range c.Slots {
		q, err := sig.NewExporter(ctx, deadletter.QueueSettings(slotSettings(set, i), tb.ExporterSpoolQueueItemsLost), c, s.sent(sig.Consume(balancer)), c.slotOptions()...)
		if err != nil {
			return none, err
		}
		s.slots = append(s.slots, slot[T]{q, sig.Consume(q)})
	}
	return sig.NewExporter(ctx, set, c, s.consume, s.options()...)
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

// slotOptions: each slot is a persistent queue with retries in front of the
// load balancer. No timeout of its own: protocol::otlp::timeout bounds each
// request to a gateway.
func (c *Config) slotOptions() []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithQueue(configoptional.Some(c.QueueConfig)),
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
// slotNN, or NAME_slotNN (spool/slotNN, spool/NAME_slotNN), the name of its
// queue in the storage extension and of its otelcol_exporter_* series. It
// must not change between releases: a renamed slot strands what its queue
// held.
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
