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

// warnStrandedQueues warns about the persistent queues no exporter of this
// config opens: the exporter was renamed or removed (OTLP_BACKEND_PROTOCOL
// picks otlp_grpc or otlp_http), the spool has fewer slots now, or a
// spool's queue of a release that kept it in file_storage. What such a
// queue still holds is never sent; the warning says where it is.
//   - In a file_storage extension's directory, a file per queue named
//     <kind>_<type>_<name>[_<client>] (`exporter_otlp_grpc_backend_traces`).
//   - In a spool's directory, a directory per slot and signal
//     (`exporter_spool_slot07_logs.journal`).
func (c converter) warnStrandedQueues(conf *confmap.Conf, exporters map[string]any) {
	extensions, _ := conf.Get("extensions").(map[string]any)
	storagePrefixes, spoolDirs := queuePrefixes(exporters)
	for _, id := range slices.Sorted(maps.Keys(extensions)) {
		if typ, _, _ := strings.Cut(id, "/"); typ == "file_storage" {
			cfg, _ := extensions[id].(map[string]any)
			dir, _ := cfg["directory"].(string)
			c.warnStranded(dir, false, storagePrefixes, zap.String("extension", id))
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(spoolDirs)) {
		c.warnStranded(dir, true, spoolDirs[dir], zap.String("spool_directory", dir))
	}
}

// warnStranded warns about each queue in dir (files, or directories for
// dirs) whose name starts with none of prefixes.
func (c converter) warnStranded(dir string, dirs bool, prefixes []string, where zap.Field) {
	entries, err := os.ReadDir(dir)
	if dir == "" || err != nil {
		return // the extension's default directory, or none yet
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() != dirs || !strings.HasPrefix(name, "exporter_") || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		c.logger.Warn("a persistent queue of an exporter this config does not have: what it still holds will not be sent. "+
			"Run the config (and release) that had that exporter until its queue is empty, or move it away once you have kept what it holds",
			where, zap.String("file", filepath.Join(dir, name)))
	}
}

// queuePrefixes are the starts of the queue names the config's exporters
// open: in file_storage, exporter_<type>_<name>_ of each exporter but the
// spools; in each spool directory, exporter_spool_<slot>_ of each slot of
// the spools writing there.
func queuePrefixes(exporters map[string]any) (storage []string, spoolDirs map[string][]string) {
	spoolDirs = map[string][]string{}
	for id, v := range exporters {
		typ, name, _ := strings.Cut(id, "/")
		if typ != "spool" {
			storage = append(storage, fmt.Sprintf("exporter_%s_%s_", typ, name))
			continue
		}
		cfg, _ := v.(map[string]any)
		dir, _ := cfg["directory"].(string)
		if dir == "" {
			continue // refused at start
		}
		slots := spoolexporter.DefaultSlots
		if n, err := strconv.Atoi(fmt.Sprint(cfg["slots"])); err == nil {
			slots = n
		}
		for i := range slots {
			spoolDirs[dir] = append(spoolDirs[dir], fmt.Sprintf("exporter_spool_%s_", spoolexporter.SlotName(name, i)))
		}
	}
	return storage, spoolDirs
}
