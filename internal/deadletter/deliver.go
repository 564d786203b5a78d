// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter // import "github.com/nemo-lens/otelcol-nemo/internal/deadletter"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

// Partial is the partial-success part of a destination's answer: how many
// items it rejected (0: it took them all), and what it said.
type Partial struct {
	Rejected int64
	Message  string
}

// Deliverer is one signal's push function behind exporterhelper's queue and
// retry sender: one attempt per call, and the decision what becomes of the
// request. An exporter gives it Send (one attempt: the destination's
// answer, a permanent error for a refusal) and hands Push to
// exporterhelper, with RetrySender's retry settings.
//
// Why by hand: exporterhelper drops a request on a permanent error or when
// its retry window (max_elapsed_time) runs out, with a log line and no
// hook. Here exporterhelper retries forever (it keeps the backoff, the
// server-given delays and, when the collector stops, the request in the
// persistent queue), and the deliverer ends the request itself: delivered,
// or dead-lettered for a refusal, a partial success or a window that ran
// out; only then does Push return nil and the request leave the queue.
type Deliverer[T comparable] struct {
	// Send makes one attempt; set before the first Push (at start, once
	// the exporter's client exists).
	Send func(ctx context.Context, d T) (Partial, error)

	sig     Signal[T]
	letters *Writer
	window  *Window[T]
	retry   bool
	logger  *zap.Logger
	warn    ratelog.Limiter[struct{}] // a destination's warnings, once a minute
}

// NewDeliverer returns the deliverer of sig, writing letters with letters,
// under retry (retry_on_failure: enabled, and max_elapsed_time as the
// window).
func NewDeliverer[T comparable](sig Signal[T], letters *Writer, retry configretry.BackOffConfig, logger *zap.Logger) *Deliverer[T] {
	return &Deliverer[T]{
		sig: sig, letters: letters, logger: logger,
		window: NewWindow[T](retry.MaxElapsedTime),
		retry:  retry.Enabled,
		warn:   ratelog.Limiter[struct{}]{Every: time.Minute},
	}
}

// RetrySender is retry as exporterhelper's retry sender must run behind a
// Deliverer: with no window of its own, so it retries until Push ends the
// request.
func RetrySender(retry configretry.BackOffConfig) configretry.BackOffConfig {
	retry.MaxElapsedTime = 0
	return retry
}

// Push makes one attempt to deliver d and ends it when it can: nil once d
// is delivered or dead-lettered, else the error exporterhelper's retry
// sender retries.
func (x *Deliverer[T]) Push(ctx context.Context, d T) error {
	p, err := x.Send(ctx, d)
	switch {
	case err == nil && p.Rejected == 0:
		if p.Message != "" && x.warn.Allow(struct{}{}, time.Now()) {
			x.logger.Warn("The destination took every item but sent a warning", zap.String("message", p.Message))
		}
		x.window.Forget(d)
		return nil
	case err == nil:
		return x.deadLetter(d, PartialSuccess,
			fmt.Sprintf("partial success: the backend rejected %d of %d items: %s", p.Rejected, x.sig.Items(d), p.Message))
	case consumererror.IsPermanent(err):
		return x.deadLetter(d, Refused, Answer(err))
	case !x.retry:
		return x.deadLetter(d, RetryWindow, "retry_on_failure is disabled: "+err.Error())
	}
	if since, over := x.window.Failed(d, time.Now()); over {
		return x.deadLetter(d, RetryWindow, WindowDetail(since, x.window.Length(), err))
	}
	return err // exporterhelper's retry sender tries again after its backoff
}

// Answer is a refusal's text for its letter: the destination's answer,
// without consumererror's "Permanent error: " (and any wrapper of it).
func Answer(err error) string {
	for consumererror.IsPermanent(err) {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	return err.Error()
}

// deadLetter writes d to its runs' dead-letter files; written, d leaves
// the queue. A write that fails returns an error the retry sender retries:
// d is never dropped.
func (x *Deliverer[T]) deadLetter(d T, r Reason, detail string) error {
	if err := Write(x.letters, x.sig, d, r, detail); err != nil {
		return err
	}
	x.window.Forget(d)
	return nil
}
