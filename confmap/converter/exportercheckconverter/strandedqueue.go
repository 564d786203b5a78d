// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"
)

// warnStrandedQueues warns about the persistent queues in a file_storage
// extension's directory that no exporter of this config opens: the
// exporter was renamed or removed (OTLP_BACKEND_PROTOCOL picks otlp_grpc
// or otlp_http), or the spool has fewer slots now. What such a queue still
// holds is never sent; the warning says where it is. file_storage names a
// component's file <kind>_<type>_<name>[_<client>] (`exporter_otlp_grpc_backend_traces`,
// `exporter_spool_slot07_logs`).
func (c converter) warnStrandedQueues(conf *confmap.Conf, exporters map[string]any) {
	extensions, _ := conf.Get("extensions").(map[string]any)
	prefixes := queuePrefixes(exporters)
	for _, id := range slices.Sorted(maps.Keys(extensions)) {
		if typ, _, _ := strings.Cut(id, "/"); typ != "file_storage" {
			continue
		}
		cfg, _ := extensions[id].(map[string]any)
		dir, _ := cfg["directory"].(string)
		entries, err := os.ReadDir(dir)
		if dir == "" || err != nil {
			continue // the extension's default directory, or none yet
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasPrefix(name, "exporter_") || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
				continue
			}
			c.logger.Warn("a persistent queue of an exporter this config does not have: what it still holds will not be sent. "+
				"Run the config that had that exporter until its queue is empty (otelcol_exporter_queue_size 0), or move the file away once you have kept what it holds",
				zap.String("extension", id), zap.String("file", filepath.Join(dir, name)))
		}
	}
}

// queuePrefixes are the starts of the file names the config's exporters
// open: exporter_<type>_<name>_, and for a spool one per slot.
func queuePrefixes(exporters map[string]any) []string {
	var out []string
	for id, v := range exporters {
		typ, name, _ := strings.Cut(id, "/")
		if typ != "spool" {
			out = append(out, fmt.Sprintf("exporter_%s_%s_", typ, name))
			continue
		}
		slots := spoolexporter.DefaultSlots
		if cfg, _ := v.(map[string]any); cfg != nil {
			if n, err := strconv.Atoi(fmt.Sprint(cfg["slots"])); err == nil {
				slots = n
			}
		}
		for i := range slots {
			out = append(out, fmt.Sprintf("exporter_spool_%s_", spoolexporter.SlotName(name, i)))
		}
	}
	return out
}
