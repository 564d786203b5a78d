// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package sharedcomponent

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
)

type counted struct {
	starts, stops int
}

func (c *counted) Start(context.Context, component.Host) error { c.starts++; return nil }
func (c *counted) Shutdown(context.Context) error              { c.stops++; return nil }

func TestSharedByTwoUsers(t *testing.T) {
	for _, tc := range []struct {
		stop        Stop
		stoppedBy   int // the user whose Shutdown stops it: 1 or 2
		description string
	}{
		{WithFirst, 1, "a connector that sends as it stops"},
		{WithLast, 2, "an exporter whose signals drain into it"},
	} {
		t.Run(tc.description, func(t *testing.T) {
			m := NewMap[string, *counted](tc.stop)
			created := 0
			create := func() (*counted, error) { created++; return &counted{}, nil }
			a, err := m.Acquire("id", create)
			require.NoError(t, err)
			b, err := m.Acquire("id", create)
			require.NoError(t, err)
			assert.Same(t, a, b)
			assert.Equal(t, 1, created)
			ctx, host := t.Context(), componenttest.NewNopHost()
			require.NoError(t, a.Start(ctx, host))
			require.NoError(t, b.Start(ctx, host))
			assert.Equal(t, 1, a.Unwrap().starts, "started once")

			require.NoError(t, a.Shutdown(ctx))
			wantStops := 0
			if tc.stoppedBy == 1 {
				wantStops = 1
			}
			assert.Equal(t, wantStops, a.Unwrap().stops, "stopped by user %d", tc.stoppedBy)
			require.NoError(t, b.Shutdown(ctx))
			assert.Equal(t, 1, a.Unwrap().stops, "stopped once")

			c, err := m.Acquire("id", create)
			require.NoError(t, err)
			assert.NotSame(t, a, c, "a new config gets a new component")
		})
	}
}

func TestCreateErrorIsReturned(t *testing.T) {
	m := NewMap[int, *counted](WithFirst)
	boom := errors.New("boom")
	_, err := m.Acquire(1, func() (*counted, error) { return nil, boom })
	require.ErrorIs(t, err, boom)
	c, err := m.Acquire(1, func() (*counted, error) { return &counted{}, nil })
	require.NoError(t, err)
	assert.NotNil(t, c.Unwrap(), "a failed create leaves nothing behind")
}
