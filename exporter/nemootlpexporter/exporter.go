// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

// deliverer is one signal's push function behind exporterhelper's queue and
// retry sender: one attempt per call, and the decision what becomes of the
// request.
//
// Why by hand: exporterhelper drops a request on a permanent error or when
// its retry window (max_elapsed_time) runs out, with a log line and no
// hook. Here exporterhelper retries forever (it keeps the backoff, the
// server-given delays and, when the collector stops, the request in the
// persistent queue), and the deliverer ends the request itself: delivered,
// or dead-lettered for a refusal, a partial success or a window that ran
// out; only then does it return nil and the request leave the queue.
type deliverer[T comparable, E component.Component] struct {
	sig     signal[T, E]
	client  client[T]
	letters *deadletter.Writer
	// window is retry_on_failure::max_elapsed_time; retry is
	// retry_on_failure::enabled.
	window *deadletter.Window[T]
	retry  bool
	logger *zap.Logger
	warn   ratelog.Limiter[struct{}] // a backend's warnings, once a minute
}

func (x *deliverer[T, E]) push(ctx context.Context, d T) error {
	p, err := x.client.send(ctx, d)
	switch {
	case err == nil && p.rejected == 0:
		if p.message != "" && x.warn.Allow(struct{}{}, time.Now()) {
			x.logger.Warn("The backend took every item but sent a warning", zap.String("message", p.message))
		}
		x.window.Forget(d)
		return nil
	case err == nil:
		return x.deadLetter(d, deadletter.PartialSuccess,
			fmt.Sprintf("partial success: the backend rejected %d of %d items: %s", p.rejected, x.sig.letter.Items(d), p.message))
	case consumererror.IsPermanent(err):
		// The backend's answer, without consumererror's "Permanent error: ".
		answer := err
		if inner := errors.Unwrap(err); inner != nil {
			answer = inner
		}
		return x.deadLetter(d, deadletter.Refused, answer.Error())
	case !x.retry:
		return x.deadLetter(d, deadletter.RetryWindow, "retry_on_failure is disabled: "+err.Error())
	}
	if since, over := x.window.Failed(d, time.Now()); over {
		return x.deadLetter(d, deadletter.RetryWindow, deadletter.WindowDetail(since, x.window.Length(), err))
	}
	return err // exporterhelper's retry sender tries again after its backoff
}

// deadLetter writes d to its runs' dead-letter files; written, d leaves
// the queue. A write that fails returns an error the retry sender retries:
// d is never dropped.
func (x *deliverer[T, E]) deadLetter(d T, r deadletter.Reason, detail string) error {
	if err := deadletter.Write(x.letters, x.sig.letter, d, r, detail); err != nil {
		return err
	}
	x.window.Forget(d)
	return nil
}
