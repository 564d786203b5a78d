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
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter/internal/metadata"
)

// view is the exporter shared by the metrics and logs pipelines: the store
// of runs and the HTTP server showing them.
type view struct {
	cfg      *Config
	id       component.ID
	set      component.TelemetrySettings
	store    *store
	server   *http.Server
	serveErr sync.WaitGroup
	// telemetry reports the fleet's hosts.
	telemetry *metadata.TelemetryBuilder
	// persist saves the runs with storage set; stopSaving ends its loop.
	persist    *persister
	stopSaving chan struct{}
	saving     sync.WaitGroup
}

func newView(cfg *Config, id component.ID, set component.TelemetrySettings) *view {
	return &view{cfg: cfg, id: id, set: set, store: newStore(limitsOf(cfg), time.Now)}
}

// Start serves the pages on the configured endpoint.
func (v *view) Start(ctx context.Context, host component.Host) error {
	if !v.cfg.Enabled {
		return nil
	}
	if err := v.startSaving(ctx, host); err != nil {
		return fmt.Errorf("nemo_view: %w", err)
	}
	tb, err := metadata.NewTelemetryBuilder(v.set)
	if err != nil {
		return fmt.Errorf("nemo_view: %w", err)
	}
	v.telemetry = tb
	if err = hostMetrics(tb, v.store); err != nil {
		return fmt.Errorf("nemo_view: %w", err)
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

// Shutdown stops serving (pages open in a browser keep what they showed)
// and saves the runs.
func (v *view) Shutdown(ctx context.Context) error {
	var errs []error
	if v.telemetry != nil {
		v.telemetry.Shutdown()
	}
	if v.server != nil {
		errs = append(errs, v.server.Shutdown(ctx))
		v.serveErr.Wait()
	}
	if v.persist != nil {
		close(v.stopSaving)
		v.saving.Wait()
		errs = append(errs, v.persist.save(ctx, v.store), v.persist.client.Close(ctx))
		v.persist = nil
	}
	return errors.Join(errs...)
}

// startSaving reads the runs saved in the storage extension and saves
// them every save_interval, when storage is set.
func (v *view) startSaving(ctx context.Context, host component.Host) error {
	if v.cfg.Storage == nil {
		return nil
	}
	client, err := openStorage(ctx, host, *v.cfg.Storage, v.id)
	if err != nil {
		return err
	}
	v.persist = &persister{client: client, saved: map[string]time.Time{}}
	n, err := v.persist.load(ctx, v.store)
	if err != nil {
		// The pages start with what could be read; the next save
		// rewrites the runs.
		v.set.Logger.Warn("Could not read all the saved runs", zap.Int("runs", n), zap.Error(err))
	} else if n > 0 {
		v.set.Logger.Info("Read the saved runs", zap.Int("runs", n))
	}
	v.stopSaving = make(chan struct{})
	v.saving.Go(func() {
		ticker := time.NewTicker(v.cfg.SaveInterval)
		defer ticker.Stop()
		for {
			select {
			case <-v.stopSaving:
				return
			case <-ticker.C:
				if err := v.persist.save(context.Background(), v.store); err != nil {
					v.set.Logger.Warn("Could not save the runs; trying again at the next save_interval", zap.Error(err))
				}
			}
		}
	})
	return nil
}

func (v *view) consumeMetrics(_ context.Context, md pmetric.Metrics) error {
	if v.cfg.Enabled {
		v.store.addMetrics(md)
	}
	return nil
}

func (v *view) consumeTraces(_ context.Context, td ptrace.Traces) error {
	if v.cfg.Enabled {
		v.store.addTraces(td)
	}
	return nil
}

func (v *view) consumeLogs(_ context.Context, ld plog.Logs) error {
	if v.cfg.Enabled {
		v.store.addLogs(ld)
	}
	return nil
}
