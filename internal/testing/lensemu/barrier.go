// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"

import (
	"context"
	"sync"
)

// NewBarrier is the gradient all-reduce of world ranks in one process, for
// Rank.Barrier: iteration it completes once world ranks arrived at it; a
// rank waiting there fails when its context ends (the rank was told to
// stop).
func NewBarrier(world int) func(context.Context, int) error {
	var mu sync.Mutex
	arrived, done := map[int]int{}, map[int]chan struct{}{}
	return func(ctx context.Context, it int) error {
		mu.Lock()
		ch := done[it]
		if ch == nil {
			ch = make(chan struct{})
			done[it] = ch
		}
		arrived[it]++
		if arrived[it] == world {
			close(ch)
			// Every rank has it already: the iteration is forgotten, so that
			// a long job holds nothing per iteration.
			delete(done, it)
			delete(arrived, it)
		}
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
