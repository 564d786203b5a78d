// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"
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
	data     resources[T]
	keys     []string // routing attributes read from each resource
	balancer component.Component
	slots    []slot[T]
}

func newSpool[T any](c *Config, balancer component.Component, data resources[T]) *spool[T] {
	s := &spool[T]{data: data, balancer: balancer}
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

// shutdown stops the slots first (what they hold stays on disk), then the
// load balancer they send through.
func (s *spool[T]) shutdown(ctx context.Context) error {
	var errs []error
	for _, sl := range s.slots {
		errs = append(errs, sl.Shutdown(ctx))
	}
	return errors.Join(append(errs, s.balancer.Shutdown(ctx))...)
}

// consume writes each resource into its slot's queue and returns once every
// part is on disk (or a slot refused: full, retryably). A request from one
// rank is one run, one slot: it is written as it came.
func (s *spool[T]) consume(ctx context.Context, data T) error {
	n := s.data.len(data)
	if n == 0 {
		return nil
	}
	slots := make([]int, n)
	mixed := false
	for i := range n {
		slots[i] = s.slotOf(s.data.resource(data, i))
		mixed = mixed || slots[i] != slots[0]
	}
	if !mixed {
		return s.slots[slots[0]].consume(ctx, data)
	}
	parts := map[int]T{}
	var order []int
	for i, k := range slots {
		part, ok := parts[k]
		if !ok {
			part = s.data.empty()
			parts[k] = part
			order = append(order, k)
		}
		s.data.copyResource(data, i, part)
	}
	var errs []error
	for _, k := range order {
		errs = append(errs, s.slots[k].consume(ctx, parts[k]))
	}
	return errors.Join(errs...)
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
