// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestFilePresetKeepsEverySignal sends traces, metrics and logs from eight
// ranks over gRPC and http/protobuf through the default preset, and finds
// every acknowledged item in the output files after shutdown.
func TestFilePresetKeepsEverySignal(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(c, "run-a", 8, 4))
	c.Stop()

	t.Logf("acknowledged by the collector: %s", describe(sent))
	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if got.Result != sent {
		t.Fatalf("acknowledged %s, found %s in the files", describe(sent), describe(got.Result))
	}
	for rank := range 8 {
		if got.ByRank[int64(rank)].Spans == 0 {
			t.Errorf("no span from rank %d in the output", rank)
		}
	}
}

// TestPresetsValidate runs `otelcol-nemo validate` on every preset with its
// environment variables set to test values.
func TestPresetsValidate(t *testing.T) {
	presets, err := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "*.yaml"))
	if err != nil || len(presets) == 0 {
		t.Fatalf("no presets found in configs/: %v", err)
	}
	for _, p := range presets {
		t.Run(filepath.Base(p), func(t *testing.T) {
			out, err := testcollector.Run(t, testEnv(t), "validate", "--config="+p)
			if err != nil {
				t.Fatalf("validate %s: %v\n%s", p, err, out)
			}
		})
	}
}

// TestValidateNamesTheBadKey checks that a config mistake fails validation
// with a message naming the key.
func TestValidateNamesTheBadKey(t *testing.T) {
	broken := `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:0
processors:
  batch:
    send_batch_sise: 100
exporters:
  debug:
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
`
	path := filepath.Join(t.TempDir(), "broken.yaml")
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testcollector.Run(t, nil, "validate", "--config="+path)
	if err == nil {
		t.Fatalf("validate accepted a config with an unknown key:\n%s", out)
	}
	if !strings.Contains(out, "send_batch_sise") {
		t.Fatalf("validate's message does not name the bad key send_batch_sise:\n%s", out)
	}
}

// TestComponentsMatchManifest checks that `otelcol-nemo components` lists a
// component from every module in builder-config.yaml, at the manifest's version.
func TestComponentsMatchManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), "builder-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest map[string]any
	if err = yaml.Unmarshal(raw, &manifest); err != nil {
		t.Fatalf("parse builder-config.yaml: %v", err)
	}
	out, err := testcollector.Run(t, nil, "components")
	if err != nil {
		t.Fatalf("components: %v\n%s", err, out)
	}
	var listed map[string]any
	if err := yaml.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("parse `components` output: %v\n%s", err, out)
	}
	for _, kind := range []string{"receivers", "processors", "exporters", "extensions", "providers"} {
		entries, _ := manifest[kind].([]any)
		if kind != "providers" && len(entries) == 0 {
			t.Errorf("manifest has no %s", kind)
		}
		modules := map[string]bool{}
		items, _ := listed[kind].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if mod, ok := m["module"].(string); ok {
				modules[mod] = true
			}
		}
		for _, e := range entries {
			gomod, _ := e.(map[string]any)["gomod"].(string)
			if !modules[gomod] {
				t.Errorf("%s: manifest module %q is not in `otelcol-nemo components` (have %v)", kind, gomod, modules)
			}
		}
	}
}

// TestValidateRefusesExportersThatCannotDeliver runs the NeMo Lens page's own
// snippets that load but never deliver through `validate`: its
// multi-backend otlphttp/wandb (a full URL in `endpoint`: 404), its file
// example's `jaeger` exporter (removed from the collector), and an exporter
// aimed at the collector's own receiver. Each fails naming the fix.
func TestValidateRefusesExportersThatCannotDeliver(t *testing.T) {
	base := `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
      http:
        endpoint: 127.0.0.1:4318
exporters:
%s
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [%s]
`
	for name, tc := range map[string]struct{ exporter, id, want string }{
		"full URL in endpoint": {"  otlphttp/wandb:\n    endpoint: https://trace.wandb.ai/otel/v1/traces\n    headers: {wandb-api-key: x}", "otlphttp/wandb", "traces_endpoint"},
		"jaeger exporter":      {"  jaeger:\n    endpoint: jaeger:14250", "jaeger", "otlp_grpc"},
		"own receiver":         {"  otlp_http/backend:\n    endpoint: http://localhost:4318", "otlp_http/backend", "own OTLP receiver"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, []byte(fmt.Sprintf(base, tc.exporter, tc.id)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := testcollector.Run(t, nil, "validate", "--config="+path)
			if err == nil {
				t.Fatalf("validate accepted an exporter that cannot deliver:\n%s", out)
			}
			if !strings.Contains(out, "exporters::"+tc.id) || !strings.Contains(out, tc.want) {
				t.Fatalf("validate's message does not name exporters::%s and the fix %q:\n%s", tc.id, tc.want, out)
			}
		})
	}
}
