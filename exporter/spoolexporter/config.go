// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"errors"
	"fmt"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// maxSlots bounds slots: each slot is a file of the storage extension and
// num_consumers goroutines per signal, open for the collector's life.
const maxSlots = 256

// Config of the spool exporter.
type Config struct {
	// QueueConfig is each slot's persistent queue (exporterhelper's
	// sending_queue). storage is required; queue_size bounds each slot and
	// signal (in the unit of sizer: bytes in the agent preset).
	QueueConfig exporterhelper.QueueBatchConfig `mapstructure:"sending_queue"`
	// RetryConfig retries a slot's failed request to its gateway. With
	// max_elapsed_time 0 (the default) it retries until the gateway takes
	// it: the slot's queue, bounded on disk, holds the rest meanwhile.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// Slots is the number of queues the runs are spread over by a hash of
	// their routing attributes. Two runs share a queue (and wait for each
	// other's gateway) only when their hashes meet: with s slots and two
	// runs on a node, one chance in s.
	Slots int `mapstructure:"slots"`
	// DrainTimeout is how long a stopping spool waits for what it took
	// while it ran to reach the gateways; what is left stays on disk for
	// the next start.
	DrainTimeout time.Duration `mapstructure:"drain_timeout"`
	// LoadBalancing is contrib's load_balancing exporter's configuration
	// (routing_key, routing_attributes, resolver, protocol::otlp). Its own
	// queues and retries are turned off: the spool queues and retries.
	LoadBalancing loadbalancingexporter.Config `mapstructure:"load_balancing"`
	// DeadLetter places what a gateway refuses for good (a permanent error:
	// a rejected token, a request it cannot decode): written to the run's
	// dead-letter file on this node, not dropped.
	DeadLetter deadletter.Config `mapstructure:"dead_letter"`
}

// Validate checks the spool's own settings; sending_queue and
// load_balancing validate themselves.
func (c *Config) Validate() error {
	var errs []error
	if c.QueueConfig.StorageID == nil {
		errs = append(errs, errors.New("sending_queue::storage is required: the spool keeps what it acknowledges on the node's disk; name a file_storage extension with fsync: true (configs/agent.yaml: file_storage/spool)"))
	}
	if c.Slots < 1 || c.Slots > maxSlots {
		errs = append(errs, fmt.Errorf("slots: %d is out of range: use 1 to %d (default 32)", c.Slots, maxSlots))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("drain_timeout: %s is negative: use 0 (stop at once, what is held stays on disk) or a duration such as 10s", c.DrainTimeout))
	}
	return errors.Join(errs...)
}
