// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/ratelog"
)

const (
	headerAPIKey    = "wandb-api-key" //nolint:gosec // G101: the name of the header that carries the key, not a credential
	headerProjectID = "project_id"

	noticeInterval = time.Minute
	// maxLoggedRenames bounds the distinct renames logged, and the memory
	// used to remember them.
	maxLoggedRenames = 100
)

type weaveExporter struct {
	cfg       *Config
	url       string
	router    router
	logger    *zap.Logger
	settings  component.TelemetrySettings
	telemetry *metadata.TelemetryBuilder
	userAgent string
	authName  string
	authValue string
	now       func() time.Time

	client *http.Client
	// maxRequestBytes starts at max_request_bytes and halves below the size
	// of any request Weave refuses with 413, so later batches do not pay
	// for the same refusal.
	maxRequestBytes atomic.Int64

	letters *deadletter.Writer
	// window is retry_on_failure::max_elapsed_time.
	window *deadletter.Window[ptrace.Traces]

	warnings      ratelog.Limiter[struct{}] // Weave's warnings in a full success
	runIDProblems ratelog.Limiter[struct{}]
	renames       ratelog.Limiter[renamedKey]
}

func newWeaveExporter(cfg *Config, set exporter.Settings) (*weaveExporter, error) {
	url, err := cfg.tracesURL()
	if err != nil {
		return nil, err
	}
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		return nil, fmt.Errorf("create weave exporter telemetry: %w", err)
	}
	e := &weaveExporter{
		cfg:       cfg,
		url:       url,
		router:    router{entity: cfg.Entity, project: cfg.Project, runIDAttribute: cfg.RunIDAttribute},
		logger:    set.Logger,
		settings:  set.TelemetrySettings,
		telemetry: tb,
		userAgent: fmt.Sprintf("%s/%s (%s/%s)", set.BuildInfo.Description, set.BuildInfo.Version, runtime.GOOS, runtime.GOARCH),
		now:       time.Now,

		letters:       deadletter.NewWriter(cfg.DeadLetter, set.ID.String(), set.Logger, deadletter.Counted(tb.ExporterWeaveDeadLetters, set.ID.String())),
		window:        deadletter.NewWindow[ptrace.Traces](cfg.RetryConfig.MaxElapsedTime),
		warnings:      ratelog.Limiter[struct{}]{Every: noticeInterval},
		runIDProblems: ratelog.Limiter[struct{}]{Every: noticeInterval},
		renames:       ratelog.Limiter[renamedKey]{Every: ratelog.Never, MaxKeys: maxLoggedRenames},
	}
	switch cfg.AuthMode {
	case AuthModeBasic:
		e.authName = "Authorization"
		e.authValue = "Basic " + basicCredentials(cfg.APIKey)
	default:
		e.authName = headerAPIKey
		e.authValue = string(cfg.APIKey)
	}
	e.maxRequestBytes.Store(int64(cfg.MaxRequestBytes))
	return e, nil
}

// start creates the HTTP client: only now are the extensions it may use
// (authenticators, middlewares) available.
func (e *weaveExporter) start(ctx context.Context, host component.Host) error {
	client, err := e.cfg.ClientConfig.ToClient(ctx, host.GetExtensions(), e.settings)
	if err != nil {
		return fmt.Errorf("create weave HTTP client: %w", err)
	}
	e.client = client
	return nil
}

func (e *weaveExporter) shutdown(context.Context) error {
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	e.telemetry.Shutdown()
	return nil
}

// letter is a part of a push Weave did not take, dead-lettered as it was
// sent (so a replay to Weave's OTLP endpoint sends what this exporter
// would have), or, for the resources without a project, as they came.
type letter struct {
	reason     deadletter.Reason
	detail     string
	req        request
	unroutable bool
}

// pushState accumulates, over one push, what Weave did not take.
type pushState struct {
	letters []letter
}

func (st *pushState) add(reason deadletter.Reason, detail string, reqs ...request) {
	for _, req := range reqs {
		if len(req.refs) > 0 {
			st.letters = append(st.letters, letter{reason: reason, detail: detail, req: req})
		}
	}
}

// noProject is the letter's error for spans without a W&B project.
const noProject = "no W&B entity or project: the resource has no wandb.entity or wandb.project and the weave exporter no entity/project default, so Weave would discard these spans without a word. " +
	"Set WANDB_ENTITY and WANDB_PROJECT in the training job, or entity and project in the weave exporter; replay these letters with a project_id header (entity/project)"

// pushTraces sends td and ends it as nemo_otlp does (see
// deadletter.Window): every span delivered or dead-lettered before it
// returns nil and td leaves the queue; a retryable failure hands back
// what is left (and what could not be dead-lettered) to the retry sender.
func (e *weaveExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	b, err := e.router.split(td)
	if err != nil {
		// Weave would not read it either.
		if werr := e.write(td, deadletter.Refused, "cannot regroup the batch by project: "+err.Error()); werr != nil {
			return werr
		}
		e.window.Forget(td)
		return nil
	}
	e.report(b)

	var st pushState
	if len(b.unroutable) > 0 {
		st.letters = append(st.letters, letter{reason: deadletter.Unroutable, detail: noProject, unroutable: true})
	}
	reqs := b.requests(int(e.maxRequestBytes.Load()))
	for i, req := range reqs {
		done, err := e.deliver(ctx, &st, b, req)
		if err == nil {
			continue
		}
		rest := append([]request{{key: req.key, refs: req.refs[done:]}}, reqs[i+1:]...)
		if stopsPush(err) {
			st.add(deadletter.Refused, deadletter.Answer(err), rest...)
			break
		}
		if !e.cfg.RetryConfig.Enabled {
			st.add(deadletter.RetryWindow, "retry_on_failure is disabled: "+err.Error(), rest...)
			break
		}
		if since, over := e.window.Failed(td, e.now()); over {
			st.add(deadletter.RetryWindow, deadletter.WindowDetail(since, e.window.Length(), err), rest...)
			break
		}
		return e.finish(td, b, &st, rest, err)
	}
	return e.finish(td, b, &st, nil, nil)
}

// finish dead-letters st's letters and, after a retryable failure (err),
// returns what is left to the retry sender: rest and the letters that
// could not be written, as they came.
func (e *weaveExporter) finish(td ptrace.Traces, b *batch, st *pushState, rest []request, err error) error {
	unwritten, werr := e.writeLetters(b, st.letters)
	if werr != nil {
		err = werr
	}
	if err == nil {
		e.window.Forget(td)
		return nil
	}
	left := 0
	for _, r := range rest {
		left += len(r.refs)
	}
	if left == b.refCount && len(b.unroutable) == 0 && len(st.letters) == 0 {
		return err // nothing sent or written: td itself again, its window going on
	}
	out := ptrace.NewTraces()
	for _, l := range unwritten {
		if l.unroutable {
			b.unroutableTraces(out)
		} else {
			b.tracesOf(out, l.req.refs)
		}
	}
	for _, r := range rest {
		b.tracesOf(out, r.refs)
	}
	e.window.Carry(td, out)
	return consumererror.NewTraces(err, out)
}

// writeLetters writes letters, those in a row with the same reason and
// answer as one; it returns the letters not written when a write failed.
func (e *weaveExporter) writeLetters(b *batch, letters []letter) ([]letter, error) {
	for i := 0; i < len(letters); {
		j := i + 1
		for j < len(letters) && !letters[j].unroutable && !letters[i].unroutable &&
			letters[j].reason == letters[i].reason && letters[j].detail == letters[i].detail {
			j++
		}
		td := ptrace.NewTraces()
		for _, l := range letters[i:j] {
			if l.unroutable {
				b.unroutableTraces(td)
				continue
			}
			sent, err := b.sent(l.req)
			if err != nil {
				// Not expected (b encoded it); as it came rather than lost.
				b.tracesOf(td, l.req.refs)
				continue
			}
			sent.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		if err := e.write(td, letters[i].reason, letters[i].detail); err != nil {
			return letters[i:], err
		}
		i = j
	}
	return nil, nil
}

func (e *weaveExporter) write(td ptrace.Traces, r deadletter.Reason, detail string) error {
	return deadletter.Write(e.letters, deadletter.Traces, td, r, cleanMessage(detail, e.secrets()...))
}

// deliver sends req, halving it on 413. It returns how many of req.refs
// were dealt with (delivered, or refused for good and recorded in st) and,
// if it stopped before the end, why.
func (e *weaveExporter) deliver(ctx context.Context, st *pushState, b *batch, req request) (int, error) {
	res, size, err := e.post(ctx, b, req)
	if err != nil {
		return 0, err
	}
	switch {
	case res.status >= 200 && res.status < 300:
		e.delivered(ctx, st, req, res)
		return len(req.refs), nil
	case res.status == http.StatusRequestEntityTooLarge:
		e.telemetry.ExporterWeaveRequestsTooLarge.Add(ctx, 1)
		if len(req.refs) == 1 {
			st.add(deadletter.Refused, fmt.Sprintf("weave refused a request holding a single span (%q, %d bytes) as too large (HTTP 413)", b.spanName(req.refs[0]), size), req)
			return 1, nil
		}
		e.lowerMaxRequestBytes(size)
		half := len(req.refs) / 2
		done, err := e.deliver(ctx, st, b, request{key: req.key, refs: req.refs[:half]})
		if err != nil {
			return done, err
		}
		done, err = e.deliver(ctx, st, b, request{key: req.key, refs: req.refs[half:]})
		return half + done, err
	default:
		err := e.refusal(res, req.key, len(req.refs))
		if stopsPush(err) || !consumererror.IsPermanent(err) {
			return 0, err
		}
		st.add(deadletter.Refused, deadletter.Answer(err), req)
		return len(req.refs), nil
	}
}

// secrets are the strings no message may carry: the key, and its base64
// form sent in auth_mode basic.
func (e *weaveExporter) secrets() []string {
	return []string{string(e.cfg.APIKey), basicCredentials(e.cfg.APIKey)}
}

func basicCredentials(key configopaque.String) string {
	return base64.StdEncoding.EncodeToString([]byte("api:" + string(key)))
}

func (e *weaveExporter) lowerMaxRequestBytes(refused int) {
	target := int64(max(refused/2, minMaxRequestBytes))
	for {
		cur := e.maxRequestBytes.Load()
		if target >= cur {
			return
		}
		if e.maxRequestBytes.CompareAndSwap(cur, target) {
			e.logger.Warn("Weave refused a request as too large (HTTP 413); sending smaller requests from now on. Lower max_request_bytes to avoid the first refusal.",
				zap.Int("refused_request_bytes", refused), zap.Int64("max_request_bytes", target))
			return
		}
	}
}

// post sends one request and returns Weave's answer and the size of the
// request body.
func (e *weaveExporter) post(ctx context.Context, b *batch, r request) (response, int, error) {
	body, size := b.stream(r)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, body)
	if err != nil {
		return response{}, size, consumererror.NewPermanent(fmt.Errorf("build weave request: %w", err))
	}
	req.ContentLength = int64(size)
	// For a replay (redirect, HTTP/2 connection lost): the batch stays
	// readable while the request lives.
	req.GetBody = func() (io.ReadCloser, error) {
		again, _ := b.stream(r)
		return io.NopCloser(again), nil
	}
	req.Header.Set("Content-Type", protobufContentType)
	req.Header.Set("User-Agent", e.userAgent)
	req.Header.Set(e.authName, e.authValue)
	// Weave reads the project from the resource attributes first; the header
	// says the same for anything in between that routes on it. Set verbatim:
	// Weave documents the lower-case name.
	req.Header[headerProjectID] = []string{r.key.String()}
	resp, err := e.client.Do(req)
	if err != nil {
		return response{}, size, fmt.Errorf("send to weave: %w", err)
	}
	res := readResponse(resp)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseBytes))
	_ = resp.Body.Close()
	return res, size, nil
}

// delivered accounts for an accepted request; a partial success that
// rejects spans dead-letters the whole request (OTLP says how many, not
// which).
func (e *weaveExporter) delivered(ctx context.Context, st *pushState, req request, res response) {
	var renamed, linked int64
	for _, ref := range req.refs {
		if ref.flags&spanRenamed != 0 {
			renamed++
		}
		if ref.flags&spanLinked != 0 {
			linked++
		}
	}
	if renamed > 0 {
		e.telemetry.ExporterWeaveSpansRenamed.Add(ctx, renamed)
	}
	if linked > 0 {
		e.telemetry.ExporterWeaveSpansRunLinked.Add(ctx, linked)
	}
	rejected, msg, ok := partialSuccess(res)
	msg = cleanMessage(msg, e.secrets()...)
	switch {
	case !ok || (rejected == 0 && msg == ""):
	case rejected > 0:
		e.telemetry.ExporterWeaveSpansRejected.Add(ctx, rejected)
		st.add(deadletter.PartialSuccess, fmt.Sprintf("partial success: weave rejected %d of %d spans for %s: %s", rejected, len(req.refs), req.key, msg), req)
	case e.warnings.Allow(struct{}{}, e.now()):
		e.logger.Warn("Weave took every span but sent a warning", zap.String("message", msg),
			zap.String("entity", req.key.entity), zap.String("project", req.key.project))
	}
}

// report logs what split found: key renames and spans that could not be
// linked to a run.
func (e *weaveExporter) report(b *batch) {
	for k := range b.renamed {
		if e.renames.Allow(k, e.now()) {
			e.logger.Info("Renamed an attribute key before sending: Weave nests dotted keys and cannot store a key next to keys below it",
				zap.String("attributes", k.where), zap.String("from", k.from), zap.String("to", k.to))
		}
	}
	if len(b.runIDs) > 0 {
		spans := 0
		for _, p := range b.runIDs {
			spans += p.spans
		}
		if total, ok := e.runIDProblems.AllowN(struct{}{}, e.now(), int64(spans)); ok {
			p := b.runIDs[0]
			e.logger.Warn("Spans not linked to a W&B run: run_id_attribute names a resource attribute that must hold the bare W&B run id",
				zap.Int64("unlinked_spans", total),
				zap.String("reason", p.reason),
				zap.String("example_service.name", p.service))
		}
	}
}
