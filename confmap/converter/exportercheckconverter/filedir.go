// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// warnMissingDirectory warns about a stock `file` exporter whose directory
// does not exist: without create_directory the exporter fails at start
// with "no such file or directory", after `validate` passed (the NeMo Lens
// page's /var/log/otel/telemetry.jsonl on a machine without /var/log/otel).
// A warning, not an error: `validate` may run where the directory will
// exist only later (a volume mounted at start).
func (c converter) warnMissingDirectory(id string, cfg map[string]any) {
	path, _ := cfg["path"].(string)
	if path == "" || cfg["create_directory"] == true || lookup(cfg, "group_by", "enabled") == true {
		return
	}
	if dir := filepath.Dir(path); !c.statDir(dir) {
		c.logger.Warn("the file exporter's directory does not exist: the exporter will fail at start with \"no such file or directory\"; "+
			"create it (writable by the collector's user) or set create_directory: true",
			zap.String("exporter", id), zap.String("path", path), zap.String("directory", dir))
	}
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}
