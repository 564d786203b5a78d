// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"context"
	"encoding/base64"
	"errors"
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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter/internal/metadata"
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

var (
	reasonMissingProject = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "missing_project")))
	reasonTooLarge       = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "too_large")))
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

	missingProject ratelog.Limiter[struct{}]
	runIDProblems  ratelog.Limiter[struct{}]
	renames        ratelog.Limiter[renamedKey]
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

		missingProject: ratelog.Limiter[struct{}]{Every: noticeInterval},
		runIDProblems:  ratelog.Limiter[struct{}]{Every: noticeInterval},
		renames:        ratelog.Limiter[renamedKey]{Every: ratelog.Never, MaxKeys: maxLoggedRenames},
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

// pushState accumulates, over one push, the requests Weave refused for
// good while the push went on.
type pushState struct {
	refused []error
	lost    int
}

func (e *weaveExporter) pushTraces(ctx context.Context, td ptrace.Traces) error {
	b, err := e.router.split(td)
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("cannot regroup the batch by project: %w", err))
	}
	e.report(ctx, b)

	var st pushState
	reqs := b.requests(int(e.maxRequestBytes.Load()))
	for i, req := range reqs {
		done, err := e.deliver(ctx, &st, b, req)
		if err == nil {
			continue
		}
		pending := make([]spanRef, 0, len(req.refs)-done)
		pending = append(pending, req.refs[done:]...)
		for _, later := range reqs[i+1:] {
			pending = append(pending, later.refs...)
		}
		if stopsPush(err) {
			st.lost += len(pending)
			st.refused = append(st.refused, err)
			return e.refusedError(&st, b)
		}
		if len(st.refused) > 0 {
			// The returned error is about what is retried; say here what
			// will not be.
			e.logger.Error("Weave refused part of a batch; those spans are dropped, the rest is retried",
				zap.Int("dropped_spans", st.lost), zap.Error(errors.Join(st.refused...)))
		}
		if len(pending) == b.refCount && b.dropped.count == 0 {
			return err
		}
		return consumererror.NewTraces(err, b.tracesOf(pending))
	}
	if len(st.refused) > 0 {
		return e.refusedError(&st, b)
	}
	return nil
}

func (*weaveExporter) refusedError(st *pushState, b *batch) error {
	return consumererror.NewPermanent(fmt.Errorf("weave did not take %d of %d spans: %w", st.lost, b.refCount, errors.Join(st.refused...)))
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
		e.delivered(ctx, req, res)
		return len(req.refs), nil
	case res.status == http.StatusRequestEntityTooLarge:
		e.telemetry.ExporterWeaveRequestsTooLarge.Add(ctx, 1)
		if len(req.refs) == 1 {
			e.telemetry.ExporterWeaveSpansDropped.Add(ctx, 1, reasonTooLarge)
			st.lost++
			st.refused = append(st.refused, fmt.Errorf("weave refused a request holding a single span (%q, %d bytes) as too large (HTTP 413); the span is dropped", b.spanName(req.refs[0]), size))
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
		st.lost += len(req.refs)
		st.refused = append(st.refused, err)
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

// delivered accounts for an accepted request and reports a partial success.
func (e *weaveExporter) delivered(ctx context.Context, req request, res response) {
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
	if !ok || (rejected == 0 && msg == "") {
		return
	}
	if rejected > 0 {
		e.telemetry.ExporterWeaveSpansRejected.Add(ctx, rejected)
	}
	e.logger.Warn("Weave accepted the request but rejected some spans (OTLP partial success); they are not retried",
		zap.Int64("rejected_spans", rejected),
		zap.Int("sent_spans", len(req.refs)),
		zap.String("message", cleanMessage(msg, e.secrets()...)),
		zap.String("entity", req.key.entity),
		zap.String("project", req.key.project))
}

// report counts and logs what split found: spans without a project, key
// renames and spans that could not be linked to a run.
func (e *weaveExporter) report(ctx context.Context, b *batch) {
	if d := b.dropped; d.count > 0 {
		e.telemetry.ExporterWeaveSpansDropped.Add(ctx, int64(d.count), reasonMissingProject)
		if total, ok := e.missingProject.AllowN(struct{}{}, e.now(), int64(d.count)); ok {
			e.logger.Warn("Dropping spans that have no W&B entity or project: Weave would discard them without a word. "+
				"Set WANDB_ENTITY and WANDB_PROJECT in the training job (they arrive as the resource attributes wandb.entity and wandb.project), "+
				"or set entity and project in the weave exporter.",
				zap.Int64("dropped_spans", total),
				zap.String("missing", d.missing),
				zap.String("example_service.name", d.service),
				zap.String("example_service.instance.id", d.instance))
		}
	}
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
