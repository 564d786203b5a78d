// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
)

// view is the exporter shared by the metrics and logs pipelines: the store
// of runs and the HTTP server showing them.
type view struct {
	cfg      *Config
	set      component.TelemetrySettings
	store    *store
	server   *http.Server
	serveErr sync.WaitGroup
}

func newView(cfg *Config, set component.TelemetrySettings) *view {
	return &view{cfg: cfg, set: set, store: newStore(limitsOf(cfg), time.Now)}
}

// Start serves the pages on the configured endpoint.
func (v *view) Start(ctx context.Context, host component.Host) error {
	if !v.cfg.Enabled {
		return nil
	}
	ln, err := v.cfg.ServerConfig.ToListener(ctx)
	if err != nil {
		return fmt.Errorf("nemo_view: listen on %s: %w (set endpoint, or NEMO_VIEW_PORT in the presets, to a free port; or enabled: false)", v.cfg.ServerConfig.NetAddr.Endpoint, err)
	}
	srv, err := v.cfg.ServerConfig.ToServer(ctx, host.GetExtensions(), v.set, newHandler(v.store, v.cfg))
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("nemo_view: %w", err)
	}
	v.server = srv
	v.set.Logger.Info("Serving the run pages", zap.String("url", "http://"+ln.Addr().String()+"/"))
	v.serveErr.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			componentstatus.ReportStatus(host, componentstatus.NewFatalErrorEvent(err))
		}
	})
	return nil
}

// Shutdown stops serving; pages open in a browser keep what they showed.
func (v *view) Shutdown(ctx context.Context) error {
	if v.server == nil {
		return nil
	}
	err := v.server.Shutdown(ctx)
	v.serveErr.Wait()
	return err
}

func (v *view) consumeMetrics(_ context.Context, md pmetric.Metrics) error {
	if v.cfg.Enabled {
		v.store.addMetrics(md)
	}
	return nil
}

func (v *view) consumeLogs(_ context.Context, ld plog.Logs) error {
	if v.cfg.Enabled {
		v.store.addLogs(ld)
	}
	return nil
}
