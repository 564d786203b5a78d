// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPatterns(t *testing.T) {
	p, err := ParsePatterns([]string{"megatron.grad_sync.*", "megatron.p2p.recv_*", " megatron.optimizer_step "})
	require.NoError(t, err)
	for name, want := range map[string]bool{
		"megatron.grad_sync.start":     true,
		"megatron.grad_sync.finish":    true,
		"megatron.grad_sync":           false,
		"megatron.p2p.recv_forward":    true,
		"megatron.p2p.send_forward":    false,
		"megatron.optimizer_step":      true,
		"megatron.optimizer_step.more": false,
		"":                             false,
	} {
		assert.Equal(t, want, p.Match(name), name)
	}
	assert.False(t, p.Empty())
	assert.True(t, Patterns{}.Empty())
	assert.False(t, Patterns{}.Match("x"))

	for kind, list := range map[error][]string{
		ErrEmptyPattern:     {"a", " "},
		ErrStarNotAtEnd:     {"a*b*"},
		ErrMatchesEverySpan: {"*"},
	} {
		_, perr := ParsePatterns(list)
		require.ErrorIs(t, perr, kind, list)
	}
	// The message names the entry and shows the fix.
	_, err = ParsePatterns([]string{"megatron.grad_sync.*", "megatron.*.recv"})
	require.EqualError(t, err, `entry 1 ("megatron.*.recv"): "*" is only allowed at the end, as in "megatron.grad_sync.*"`)
}
