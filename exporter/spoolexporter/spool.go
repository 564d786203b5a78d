// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/journal"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// Why by hand: exporterhelper's persistent queue is one queue with one set
// of consumers, so behind one queue a run whose gateway is down holds every
// consumer (each retrying its batch) and the node's other runs wait; and
// load_balancing's per-gateway exporters all share one component id, so
// they cannot each have a persistent queue of their own (nor would one keep
// a run's items when its gateway leaves the ring). The spool keeps a queue
// per slot, a slot being a hash of the run's routing attributes, and sends
// through one load balancer: each request is routed when it is sent, to the
// gateway its run hashes to then. The queue is a journal of our own (see
// internal/journal for why not exporterhelper's persistent queue), read
// by the slot's consumers into an exporterhelper exporter that retries.

// slot is one queue on disk and its consumers, retrying into the load
// balancer through an exporterhelper exporter of their own.
type slot[T any] struct {
	dir     string
	queue   *journal.Journal
	sender  component.Component
	send    func(context.Context, T) error
	opts    journal.Options
	stopped chan struct{}
	wg      sync.WaitGroup
}

// spool spreads one signal's resources over the slots.
type spool[T any] struct {
	data     deadletter.Signal[T]
	codec    codec[T]
	letters  *deadletter.Writer
	keys     []string // routing attributes read from each resource
	balancer component.Component
	slots    []*slot[T]
	cfg      *Config
	// stopTelemetry ends the spool's own metrics at shutdown.
	stopTelemetry func()
}

// memoryBudget bounds the records a spool (one signal, all its slots)
// keeps in memory until a sender takes them, in protobuf bytes: about a
// second of the agent's traffic at 100,000 spans/s. Such a record is sent
// without being read back and decoded; past the budget (a gateway out: its
// slot fills) records are read back from disk.
const memoryBudget = 32 << 20

func newSpool[T any](c *Config, balancer component.Component, data deadletter.Signal[T], codec codec[T], letters *deadletter.Writer, stopTelemetry func()) *spool[T] {
	s := &spool[T]{data: data, codec: codec, letters: letters, balancer: balancer, cfg: c, stopTelemetry: stopTelemetry}
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
		// A record kept in memory is merged into its batch by moving its
		// resources: the pipeline gives the spool data of its own (a
		// fanout clones it when other consumers share it).
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
	}
}

// start opens every slot's queue and starts its consumers: what a slot
// held when the collector stopped is sent from then on.
func (s *spool[T]) start(ctx context.Context, host component.Host) error {
	if err := s.balancer.Start(ctx, host); err != nil {
		return err
	}
	for i, sl := range s.slots {
		if err := sl.sender.Start(ctx, host); err != nil {
			return fmt.Errorf("spool slot %d: %w", i, err)
		}
		q, err := journal.Open(sl.dir, sl.opts)
		if err != nil {
			return fmt.Errorf("spool slot %d: open its queue %s: %w", i, sl.dir, err)
		}
		sl.queue = q
		sl.stopped = make(chan struct{})
		for range s.cfg.NumConsumers {
			sl.wg.Go(func() { s.forward(sl) })
		}
	}
	return nil
}

// forward sends what slot sl holds, batch by batch, until the spool
// stops. A batch leaves the queue once the gateway took it or it was
// dead-lettered (sent says which); one the spool stopped sending stays.
func (s *spool[T]) forward(sl *slot[T]) {
	for {
		b, ok := sl.queue.Read(s.cfg.MaxBatchItems, s.cfg.FlushTimeout)
		if !ok {
			return
		}
		d, err := s.batch(b)
		if err != nil { // damaged past its checksum: nothing can send it
			sl.opts.Lost(b.Path, b.From, b.To)
			sl.queue.Done(b)
			continue
		}
		for {
			err = sl.send(context.Background(), d)
			if err == nil {
				sl.queue.Done(b)
				break
			}
			// The spool never drops: a stopping slot's retry sender gives
			// up (the batch stays on disk); otherwise (retry_on_failure
			// disabled or given a max_elapsed_time) try again.
			select {
			case <-sl.stopped:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// batch is b's records as one request: those in memory merged, or those
// read back decoded. Records are OTLP requests in protobuf one after the
// other: together they decode as one request holding all their resources.
func (s *spool[T]) batch(b journal.Batch) (T, error) {
	if b.Mem == nil {
		return s.codec.unmarshal(b.Payload)
	}
	d := b.Mem[0].(T)
	for _, m := range b.Mem[1:] {
		s.codec.moveTo(m.(T), d)
	}
	return d, nil
}

// shutdown waits, at most drain_timeout, for the slots to empty, then
// stops them (what they still hold stays on disk) and the load balancer
// they send through.
func (s *spool[T]) shutdown(ctx context.Context) error {
	for deadline := time.Now().Add(s.cfg.DrainTimeout); s.held() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
	var errs []error
	for _, sl := range s.slots {
		if sl.queue == nil {
			continue // never started
		}
		sl.queue.Stop()
		close(sl.stopped)
	}
	for _, sl := range s.slots {
		errs = append(errs, sl.sender.Shutdown(ctx)) // ends its retries
		sl.wg.Wait()
		if sl.queue != nil {
			errs = append(errs, sl.queue.Close())
		}
	}
	errs = append(errs, s.balancer.Shutdown(ctx))
	s.stopTelemetry()
	return errors.Join(errs...)
}

func (s *spool[T]) held() int64 {
	var n int64
	for _, sl := range s.slots {
		if sl.queue != nil {
			n += sl.queue.Held()
		}
	}
	return n
}

// consume writes each resource into its slot's queue and returns once every
// part is on disk (or a slot refused: full, retryably). A request from one
// rank is one run, one slot: it is written as it came.
func (s *spool[T]) consume(_ context.Context, data T) error {
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
		return s.take(slots[0], data)
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
		errs = append(errs, s.take(k, parts[k]))
	}
	return errors.Join(errs...)
}

// take writes data into slot k's queue, keeping it in memory too while the
// spool's memory budget allows.
func (s *spool[T]) take(k int, data T) error {
	b, err := s.codec.marshal(data)
	if err != nil {
		return consumererror.NewPermanent(err)
	}
	if err := s.slots[k].queue.Append(b, s.data.Items(data), data); err != nil {
		return fmt.Errorf("spool slot %d: %w", k, err)
	}
	return nil
}

// sent wraps a slot's sending: what a gateway refused for good is written
// to its runs' dead-letter files (a letter that cannot be written keeps the
// request in the slot, retried).
func (s *spool[T]) sent(send func(context.Context, T) error) func(context.Context, T) error {
	return func(ctx context.Context, data T) error {
		err := send(ctx, data)
		if consumererror.IsPermanent(err) {
			return deadletter.Write(s.letters, s.data, data, deadletter.Refused, err.Error())
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
	return int(h.Sum64() % uint64(s.cfg.Slots))
}
