// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package sharedcomponent shares one component between the components the
// collector creates for one id or config (one per signal or signal pair),
// as contrib's internal/sharedcomponent does: it is started by the first
// Start and shut down once, after which the next config gets a new one.
// Written here because contrib's package is internal to its modules; it
// adds type safety, errors from create, and the choice of when to shut
// down.
package sharedcomponent // import "github.com/nemo-lens/otelcol-nemo/internal/sharedcomponent"

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/component"
)

// Stop says which of its users' Shutdown shuts a shared component down.
type Stop uint8

const (
	// WithFirst: the first user's Shutdown, as contrib's helper does. For a
	// component that sends as it shuts down: the collector shuts a
	// component down before the pipelines it feeds, so those still run
	// then.
	WithFirst Stop = iota
	// WithLast: the last user's. For a component whose users keep using it
	// until their own Shutdown (an exporter's per-signal queues drain into
	// it).
	WithLast
)

// Map holds the shared components of one factory, by key. It belongs to
// the factory: there is no package state.
type Map[K comparable, V component.Component] struct {
	stop  Stop
	mu    sync.Mutex
	comps map[K]*Component[V]
}

// NewMap shares components shut down as stop says.
func NewMap[K comparable, V component.Component](stop Stop) *Map[K, V] {
	return &Map[K, V]{stop: stop, comps: make(map[K]*Component[V])}
}

// Acquire returns the shared component of key for one more user, creating
// it with create for the first.
func (m *Map[K, V]) Acquire(key K, create func() (V, error)) (*Component[V], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.comps[key]
	if !ok {
		v, err := create()
		if err != nil {
			return nil, err
		}
		c = &Component[V]{component: v, stop: m.stop}
		c.remove = func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.comps[key] == c {
				delete(m.comps, key)
			}
		}
		m.comps[key] = c
	}
	c.mu.Lock()
	c.users++
	c.mu.Unlock()
	return c, nil
}

// Component is one shared component. Each user calls Start and Shutdown
// once, as the collector calls them on the user.
type Component[V component.Component] struct {
	component V
	stop      Stop
	remove    func()

	mu               sync.Mutex
	users            int
	started, stopped bool
}

// Unwrap is the shared component.
func (c *Component[V]) Unwrap() V { return c.component }

// Start starts the component with its first user.
func (c *Component[V]) Start(ctx context.Context, host component.Host) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	c.started = true
	return c.component.Start(ctx, host)
}

// Shutdown counts a user gone, and shuts the component down with the first
// or the last one, as its map says, forgetting it so that a new config
// gets a new one.
func (c *Component[V]) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	c.users--
	now := !c.stopped && (c.stop == WithFirst || c.users <= 0)
	if now {
		c.stopped = true
	}
	c.mu.Unlock()
	if !now {
		return nil
	}
	c.remove()
	return c.component.Shutdown(ctx)
}
