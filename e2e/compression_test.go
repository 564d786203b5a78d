// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestFilePresetCompressed: the file preset with NEMO_JSONL_COMPRESSION=zstd
// writes traces.jsonl.zst, metrics.jsonl.zst and logs.jsonl.zst per run,
// and they hold every item the ranks had acknowledged (read the way jq reads
// them through zstdcat), each line a JSON record.
func TestFilePresetCompressed(t *testing.T) {
	env := testEnv(t)
	env["NEMO_JSONL_COMPRESSION"] = "zstd"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(c, "run-zstd", 4, 3))
	c.Stop()

	files := 0
	err := filepath.WalkDir(env["NEMO_TELEMETRY_DIR"], func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(path, ".jsonl.zst") {
			t.Errorf("unexpected output file %s: want only .jsonl.zst", path)
		}
		files++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 3 {
		t.Errorf("want the run's three .jsonl.zst files, found %d", files)
	}
	if got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"]).Result; got != sent {
		t.Errorf("acknowledged %s, found %s in the compressed files", describe(sent), describe(got))
	}
}
