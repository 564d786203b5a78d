// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// Why by hand: exporterhelper's persistent queue is one queue with one set
// of consumers, so behind one queue a run whose gateway is down holds every
// consumer (each retrying its batch) and the node's other runs wait; and
// load_balancing's per-gateway exporters all share one component id, so
// they cannot each have a persistent queue of their own (nor would one keep
// a run's items when its gateway leaves the ring). The spool keeps a
// persistent queue per slot, a slot being a hash of the run's routing
// attributes, and sends through one load balancer: each request is routed
// when it is sent, to the gateway its run hashes to then.

// slot is one persistent queue with its consumers, retrying into the load
// balancer.
type slot[T any] struct {
	component.Component
	consume func(context.Context, T) error
}

// spool spreads one signal's resources over the slots.
type spool[T any] struct {
	data     deadletter.Signal[T]
	letters  *deadletter.Writer
	keys     []string // routing attributes read from each resource
	balancer component.Component
	slots    []slot[T]
	drain    time.Duration
	// stopTelemetry ends the spool's own metrics at shutdown.
	stopTelemetry func()
	// pending counts the items this spool took and has not sent yet (sent
	// or refused for good), never below 0: what a stopping spool waits
	// for. Items read back at start were taken by another process: their
	// sending may hide some of this process's from it, which then stay on
	// disk for the next start.
	pending atomic.Int64
}

func newSpool[T any](c *Config, balancer component.Component, data deadletter.Signal[T], letters *deadletter.Writer, stopTelemetry func()) *spool[T] {
	s := &spool[T]{data: data, letters: letters, balancer: balancer, drain: c.DrainTimeout, stopTelemetry: stopTelemetry}
	if c.LoadBalancing.RoutingKey == "attributes" {
		s.keys = c.LoadBalancing.RoutingAttributes
	}
	return s
}

func (s *spool[T]) options() []exporterhelper.Option {
	return []exporterhelper.Option{
		exporterhelper.WithStart(s.start),
		exporterhelper.WithShutdown(s.shutdown),
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{}),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
	}
}

// start opens every slot's queue: what a slot held when the collector
// stopped is sent from then on.
func (s *spool[T]) start(ctx context.Context, host component.Host) error {
	if err := s.balancer.Start(ctx, host); err != nil {
		return err
	}
	for i, sl := range s.slots {
		if err := sl.Start(ctx, host); err != nil {
			return fmt.Errorf("spool slot %d: %w", i, err)
		}
	}
	return nil
}

// shutdown waits, at most drain, for what the spool took to reach the
// gateways, then stops the slots (what they still hold stays on disk) and
// the load balancer they send through.
func (s *spool[T]) shutdown(ctx context.Context) error {
	for deadline := time.Now().Add(s.drain); s.pending.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
	var errs []error
	for _, sl := range s.slots {
		errs = append(errs, sl.Shutdown(ctx))
	}
	errs = append(errs, s.balancer.Shutdown(ctx))
	s.stopTelemetry()
	return errors.Join(errs...)
}

// consume writes each resource into its slot's queue and returns once every
// part is on disk (or a slot refused: full, retryably). A request from one
// rank is one run, one slot: it is written as it came.
func (s *spool[T]) consume(ctx context.Context, data T) error {
	n := s.data.Len(data)
	if n == 0 {
		return nil
	}
	slots := make([]int, n)
	mixed := false
	for i := range n {
		slots[i] = s.slotOf(s.data.Resource(data, i))
		mixed = mixed || slots[i] != slots[0]
	}
	if !mixed {
		return s.take(ctx, slots[0], data)
	}
	parts := map[int]T{}
	var order []int
	for i, k := range slots {
		part, ok := parts[k]
		if !ok {
			part = s.data.Empty()
			parts[k] = part
			order = append(order, k)
		}
		s.data.CopyResource(data, i, part)
	}
	var errs []error
	for _, k := range order {
		errs = append(errs, s.take(ctx, k, parts[k]))
	}
	return errors.Join(errs...)
}

// take writes data into slot k, counting it pending once it is on disk.
func (s *spool[T]) take(ctx context.Context, k int, data T) error {
	err := s.slots[k].consume(ctx, data)
	if err == nil {
		s.pending.Add(int64(s.data.Items(data)))
	}
	return err
}

// sent wraps a slot's sending: what a gateway refused for good is written
// to its runs' dead-letter files (a letter that cannot be written keeps the
// request in the slot, retried), and what a gateway took or refused is no
// longer pending.
func (s *spool[T]) sent(send func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, data T) error {
		err := send(ctx, data)
		if consumererror.IsPermanent(err) {
			if werr := deadletter.Write(s.letters, s.data, data, deadletter.Refused, err.Error()); werr != nil {
				return werr
			}
			err = nil
		}
		if err == nil {
			n := int64(s.data.Items(data))
			for {
				old := s.pending.Load()
				if s.pending.CompareAndSwap(old, max(0, old-n)) {
					break
				}
			}
		}
		return err
	}
}

// slotOf hashes the resource's routing attributes (FNV-1a: the same slot
// after a restart) onto a slot. Without routing attributes (another
// routing_key) every resource is in slot 0.
func (s *spool[T]) slotOf(res pcommon.Resource) int {
	if len(s.keys) == 0 {
		return 0
	}
	h := fnv.New64a()
	attrs := res.Attributes()
	for _, k := range s.keys {
		if v, ok := attrs.Get(k); ok {
			_, _ = h.Write([]byte(v.AsString()))
		}
		_, _ = h.Write([]byte{0})
	}
	return int(h.Sum64() % uint64(len(s.slots)))
}
