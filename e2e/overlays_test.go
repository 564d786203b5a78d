// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// overlays are configs/overlays/*.yaml, each merged after a preset.
func overlays(t *testing.T) []string {
	t.Helper()
	list, err := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "*.yaml"))
	if err != nil || len(list) == 0 {
		t.Fatalf("no overlays in configs/overlays/: %v", err)
	}
	return list
}

// fitsRe reads an overlay's "# Fits: any preset" or "# Fits: a.yaml, b.yaml".
var fitsRe = regexp.MustCompile(`(?m)^# Fits: (.+)$`)

// TestOverlaysValidateOnEveryPreset: every overlay says which presets it
// fits (its "# Fits:" line); `validate` agrees for each of them.
func TestOverlaysValidateOnEveryPreset(t *testing.T) {
	presets, err := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "*.yaml"))
	if err != nil || len(presets) == 0 {
		t.Fatalf("no presets in configs/: %v", err)
	}
	for _, o := range overlays(t) {
		raw, err := os.ReadFile(o)
		if err != nil {
			t.Fatal(err)
		}
		m := fitsRe.FindSubmatch(raw)
		if m == nil {
			t.Errorf("%s has no \"# Fits:\" line naming the presets it fits", filepath.Base(o))
			continue
		}
		fits := presets
		if s := strings.TrimSpace(string(m[1])); s != "any preset" {
			fits = nil
			for name := range strings.SplitSeq(s, ",") {
				fits = append(fits, filepath.Join(testcollector.RepoRoot(t), "configs", strings.TrimSpace(name)))
			}
		}
		for _, p := range fits {
			t.Run(filepath.Base(o)+"+"+filepath.Base(p), func(t *testing.T) {
				if out, err := testcollector.Run(t, testEnv(t), "validate", "--config="+p, "--config="+o); err != nil {
					t.Fatalf("validate %s + %s: %v\n%s", filepath.Base(p), filepath.Base(o), err, out)
				}
			})
		}
	}
}

// TestDebugOverlay runs the file preset with the debug overlay: the
// collector's log shows every span it received (the debug exporter) at debug
// level, and the preset still writes every acknowledged item.
func TestDebugOverlay(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{
		Env:  env,
		Args: []string{"--config=" + filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "debug.yaml")},
	})
	sent := runJob(t, mixedJob(c, "run-debug", 2, 1))
	c.Stop()
	logs := c.Logs()
	for _, want := range []string{"megatron.train_step", "nemo.run.id", "megatron.training.loss", "\tdebug\t"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the collector's log does not show %q", want)
		}
	}
	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if got.Result != sent {
		t.Errorf("with the overlay the preset wrote %s, acknowledged %s", describe(got.Result), describe(sent))
	}
}
