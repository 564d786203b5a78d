// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"errors"
	"fmt"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// maxSlots bounds slots: each slot is a directory of segment files and
// num_consumers goroutines per signal, open for the collector's life.
const maxSlots = 256

// Config of the spool exporter.
type Config struct {
	// Directory holds each slot's queue on the node's disk: a directory
	// per slot and signal, exporter_spool_<slot>_<signal>.journal.
	Directory string `mapstructure:"directory"`
	// QueueSize bounds each slot and signal's queue, in bytes: past it
	// the slot refuses, retryably.
	QueueSize int64 `mapstructure:"queue_size"`
	// NumConsumers is each slot and signal's senders to the gateways.
	NumConsumers int `mapstructure:"num_consumers"`
	// MaxBatchItems bounds the items of one request to a gateway: a
	// sender takes what its slot holds, in order, up to this many items
	// (at least one of the ranks' requests).
	MaxBatchItems int `mapstructure:"max_batch_items"`
	// FlushTimeout is how long a sender waits for its slot to hold
	// max_batch_items before it sends what there is, counted from the
	// oldest record: fewer, larger requests to the gateways. The ranks do
	// not wait for it: they are answered once on disk.
	FlushTimeout time.Duration `mapstructure:"flush_timeout"`
	// RetryConfig retries a slot's failed request to its gateway. With
	// max_elapsed_time 0 (the default) it retries until the gateway takes
	// it: the slot's queue, bounded on disk, holds the rest meanwhile.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`
	// Slots is the number of queues the runs are spread over by a hash of
	// their routing attributes. Two runs share a queue (and wait for each
	// other's gateway) only when their hashes meet: with s slots and two
	// runs on a node, one chance in s.
	Slots int `mapstructure:"slots"`
	// DrainTimeout is how long a stopping spool waits for what its slots
	// hold to reach the gateways; what is left stays on disk for the next
	// start.
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

// Unmarshal names the fix for a config written for the spool before it
// kept its own queue (exporterhelper's sending_queue on a storage
// extension), instead of the collector's bare "invalid keys".
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet("sending_queue") {
		return errors.New("sending_queue: the spool keeps its own queue on disk now: replace sending_queue with directory (the storage extension's directory), queue_size (bytes), num_consumers, max_batch_items (batch::max_size) and flush_timeout (batch::flush_timeout), as in configs/agent.yaml")
	}
	return conf.Unmarshal(c)
}

// Validate checks the spool's own settings; load_balancing validates
// itself.
func (c *Config) Validate() error {
	var errs []error
	if c.Directory == "" {
		errs = append(errs, errors.New("directory is required: the spool keeps what it acknowledges on the node's disk; name a directory on a local disk (configs/agent.yaml: ${env:NEMO_QUEUE_DIR:-./queue})"))
	}
	if c.QueueSize < 1 {
		errs = append(errs, fmt.Errorf("queue_size: %d is too small: use the bytes each slot may hold per signal (default %d, 1 GiB)", c.QueueSize, defaultQueueSize))
	}
	if c.NumConsumers < 1 {
		errs = append(errs, fmt.Errorf("num_consumers: %d is too small: use 1 or more (default 4)", c.NumConsumers))
	}
	if c.MaxBatchItems < 1 {
		errs = append(errs, fmt.Errorf("max_batch_items: %d is too small: use 1 or more (default 8192)", c.MaxBatchItems))
	}
	if c.FlushTimeout < 0 {
		errs = append(errs, fmt.Errorf("flush_timeout: %s is negative: use 0 (send what there is at once) or a duration such as 100ms", c.FlushTimeout))
	}
	if c.Slots < 1 || c.Slots > maxSlots {
		errs = append(errs, fmt.Errorf("slots: %d is out of range: use 1 to %d (default 32)", c.Slots, maxSlots))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("drain_timeout: %s is negative: use 0 (stop at once, what is held stays on disk) or a duration such as 10s", c.DrainTimeout))
	}
	return errors.Join(errs...)
}
