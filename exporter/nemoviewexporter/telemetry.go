// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter/internal/metadata"
)

// hostMetrics registers the fleet's per-host gauges (nemo.host.cost,
// .costly_runs, .drain) on the collector's own telemetry, read from /hosts
// at each collection: only the hosts that cost something, so the series
// stay as few as the hosts worth a look.
func hostMetrics(tb *metadata.TelemetryBuilder, s *store) error {
	// The three callbacks of one collection read one report (building it
	// sorts every host).
	var mu sync.Mutex
	var at time.Time
	var report []hostJSON
	hosts := func() []hostJSON {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(at) > time.Second {
			report, at = s.hosts().Hosts, time.Now()
		}
		return report
	}
	attrs := func(h *hostJSON) metric.MeasurementOption {
		return metric.WithAttributes(attribute.String("host.name", h.Host))
	}
	return errors.Join(
		tb.RegisterNemoHostCostCallback(func(_ context.Context, o metric.Float64Observer) error {
			hs := hosts()
			for i := range hs {
				h := &hs[i]
				if h.CostSeconds > 0 {
					o.Observe(h.CostSeconds, attrs(h))
				}
			}
			return nil
		}),
		tb.RegisterNemoHostCostlyRunsCallback(func(_ context.Context, o metric.Int64Observer) error {
			hs := hosts()
			for i := range hs {
				h := &hs[i]
				if h.CostlyRuns > 0 {
					o.Observe(int64(h.CostlyRuns), attrs(h))
				}
			}
			return nil
		}),
		tb.RegisterNemoHostDrainCallback(func(_ context.Context, o metric.Int64Observer) error {
			hs := hosts()
			for i := range hs {
				h := &hs[i]
				if h.Drain {
					o.Observe(1, attrs(h))
				}
			}
			return nil
		}),
	)
}
