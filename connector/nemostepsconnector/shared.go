// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsconnector // import "github.com/nemo-lens/otelcol-nemo/connector/nemostepsconnector"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
)

// sharedConnectors gives the traces-to-metrics and traces-to-logs halves of
// one nemo_steps id a single connector: the stall records and gauges come
// from the same state as the step metrics, and a job's spans are read once.
// Written by hand: the collector's own sharedcomponent package is internal
// to its modules. It is the factory's state (no global), keyed by id.
type sharedConnectors struct {
	clk  clock.Clock
	mu   sync.Mutex
	byID map[component.ID]*sharedConnector
}

func newSharedConnectors(clk clock.Clock) *sharedConnectors {
	return &sharedConnectors{clk: clk, byID: map[component.ID]*sharedConnector{}}
}

type sharedConnector struct {
	c       *stepsConnector
	mu      sync.Mutex
	started int
	stopped bool
	halves  int
}

// get returns a half of the id's connector, creating the connector with
// the first half; attach wires the half's next consumer.
func (s *sharedConnectors) get(set connector.Settings, cfg *Config, attach func(*stepsConnector)) (connector.Traces, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := s.byID[set.ID]
	if sc == nil {
		c, err := newConnector(set, cfg, nil, s.clk)
		if err != nil {
			return nil, err
		}
		sc = &sharedConnector{c: c}
		s.byID[set.ID] = sc
	}
	attach(sc.c)
	sc.halves++
	// The collector sends the traces to each half: the first half created
	// reads them, the other only starts and stops the shared connector.
	return &half{shared: sc, owner: s, id: set.ID, reads: sc.halves == 1}, nil
}

// half is one signal pair's view of the shared connector.
type half struct {
	shared *sharedConnector
	owner  *sharedConnectors
	id     component.ID
	reads  bool
}

func (h *half) Capabilities() consumer.Capabilities { return h.shared.c.Capabilities() }

func (h *half) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if !h.reads {
		return nil
	}
	return h.shared.c.ConsumeTraces(ctx, td)
}

// Start starts the connector with its first half.
func (h *half) Start(ctx context.Context, host component.Host) error {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	h.shared.started++
	if h.shared.started > 1 {
		return nil
	}
	return h.shared.c.Start(ctx, host)
}

// Shutdown shuts the connector down with its first half, and forgets it,
// so that a new config gets a new one. The first, not the last: the
// collector shuts a node down before the pipelines it feeds, so when the
// first half goes both halves' pipelines still run and take the last
// points and records; by the last half's turn the first one's exporters
// may be gone (a send to them would block the shutdown).
func (h *half) Shutdown(ctx context.Context) error {
	h.shared.mu.Lock()
	first := !h.shared.stopped
	h.shared.stopped = true
	h.shared.mu.Unlock()
	if !first {
		return nil
	}
	h.owner.mu.Lock()
	if h.owner.byID[h.id] == h.shared {
		delete(h.owner.byID, h.id)
	}
	h.owner.mu.Unlock()
	return h.shared.c.Shutdown(ctx)
}

var _ connector.Traces = (*half)(nil)
