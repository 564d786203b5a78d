// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package memstorage is a storage extension held in memory, for tests that
// put a persistent sending queue in a given state: what a queue file holds
// after a crash, a damaged item.
package memstorage // import "github.com/nemo-lens/otelcol-nemo/internal/testing/memstorage"

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
)

// Extension is a storage extension whose every client shares one map.
type Extension struct {
	component.StartFunc
	component.ShutdownFunc

	mu   sync.Mutex
	data map[string][]byte
}

// New returns an empty extension.
func New() *Extension { return &Extension{data: map[string][]byte{}} }

// Set stores value at key, as a client would.
func (e *Extension) Set(key string, value []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.data[key] = value
}

// LegacyQueue stores exporterhelper's persistent queue in its legacy key
// layout (read index "ri", write index "wi", item i at key "i"), holding
// items, which need not be valid requests.
func (e *Extension) LegacyQueue(items ...[]byte) {
	index := func(i int) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(i)) }
	e.Set("ri", index(0))
	e.Set("wi", index(len(items)))
	for i, it := range items {
		e.Set(strconv.Itoa(i), it)
	}
}

// GetClient returns a client of the shared map.
func (e *Extension) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return client{e}, nil
}

type client struct{ e *Extension }

func (c client) Get(_ context.Context, key string) ([]byte, error) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.e.data[key], nil
}

func (c client) Set(_ context.Context, key string, value []byte) error {
	c.e.Set(key, value)
	return nil
}

func (c client) Delete(_ context.Context, key string) error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	delete(c.e.data, key)
	return nil
}

func (c client) Batch(_ context.Context, ops ...*storage.Operation) error {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value = c.e.data[op.Key]
		case storage.Set:
			c.e.data[op.Key] = op.Value
		case storage.Delete:
			delete(c.e.data, op.Key)
		}
	}
	return nil
}

func (client) Close(context.Context) error { return nil }

// Host is a component.Host offering extensions.
type Host struct {
	component.Host
	Extensions map[component.ID]component.Component
}

// GetExtensions returns h.Extensions.
func (h Host) GetExtensions() map[component.ID]component.Component { return h.Extensions }
