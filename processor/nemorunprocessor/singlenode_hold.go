// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor"

import (
	"context"
	"fmt"
)

// Holding: the requests of a launch not yet decided wait here, bounded in
// number and time, until the launch is decided or the state stops.

// await blocks until every launch of held is decided, ctx is done or the
// processor (stopped) or the state stops.
func (s *singleNode) await(ctx context.Context, stopped <-chan struct{}, held []heldResource) error {
	s.mu.Lock()
	if s.held >= s.maxHeld {
		s.mu.Unlock()
		return errTooManyHeld
	}
	s.held++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}()
	for _, h := range held {
		select {
		case <-h.launch.decided:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the single-node launch of run id %s to be decided: %w", h.launch.id, ctx.Err())
		case <-stopped:
			return errShuttingDown
		case <-s.stopped:
			return errShuttingDown
		}
	}
	return nil
}

// heldRequests is how many requests are waiting for a decision.
func (s *singleNode) heldRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// tick decides the pending launches whose settle or hold passed.
func (s *singleNode) tick() {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := range s.undecided {
		s.resolve(l, now)
	}
}
