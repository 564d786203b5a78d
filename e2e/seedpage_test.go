// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The NeMo Lens "Send Telemetry to a Backend" page, walked item by item: its
// collector snippets (written out here as the page gives them), the preset
// paths and toggles it names, and the debugging flags, each run through
// `otelcol-nemo validate` with the outcome a user must get: it works, or it
// fails with a message that names the fix.

// seedReceivers is the OTLP receiver block the page's snippets assume.
const seedReceivers = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
      http:
        endpoint: 127.0.0.1:4318
processors:
  batch:
`

// seedMinimalCollector is the page's "minimal configuration", as the page
// gives it: TestDockerImage runs it in the image the way the page runs it.
const seedMinimalCollector = `
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:4317
      http:
        endpoint: 0.0.0.0:4318
processors:
  batch:
    timeout: 5s
    send_batch_size: 1024
exporters:
  otlp/jaeger:
    endpoint: jaeger:4317
    tls:
      insecure: true
  prometheus:
    endpoint: 0.0.0.0:8889
  file:
    path: /var/log/otel/telemetry.jsonl
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlp/jaeger, file]
    metrics:
      receivers: [otlp]
      processors: [batch]
      exporters: [prometheus]
`

var seedSnippets = []struct {
	name    string
	yaml    string
	args    []string
	env     map[string]string
	wantErr []string // empty: validate must pass
}{
	{
		name: "file exporter with rotation, fanned out to the removed jaeger exporter",
		yaml: seedReceivers + `
exporters:
  file/traces:
    path: /var/log/otel/traces.jsonl
    rotation:
      max_megabytes: 100
      max_days: 7
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [file/traces, jaeger]
`,
		wantErr: []string{"jaeger", "otlp_grpc"},
	},
	{
		name: "the same file exporter alone",
		yaml: seedReceivers + `
exporters:
  file/traces:
    path: /var/log/otel/traces.jsonl
    rotation:
      max_megabytes: 100
      max_days: 7
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [file/traces]
`,
	},
	{
		name: "the Honeycomb collector example",
		yaml: seedReceivers + `
exporters:
  otlphttp/honeycomb:
    endpoint: https://api.honeycomb.io:443
    headers:
      x-honeycomb-team: ${env:HONEYCOMB_API_KEY}
      x-honeycomb-dataset: ${env:HONEYCOMB_DATASET}
service:
  pipelines:
    traces:   { receivers: [otlp], processors: [batch], exporters: [otlphttp/honeycomb] }
    metrics:  { receivers: [otlp], processors: [batch], exporters: [otlphttp/honeycomb] }
    logs:     { receivers: [otlp], processors: [batch], exporters: [otlphttp/honeycomb] }
`,
		env: map[string]string{"HONEYCOMB_API_KEY": "k", "HONEYCOMB_DATASET": "d"},
	},
	{
		name: "the minimal collector: Jaeger, Prometheus, file archive",
		yaml: seedMinimalCollector,
	},
	{
		name: "the useful processors, attached to a pipeline",
		yaml: seedReceivers + `
  filter/drop_health_checks:
    traces:
      span:
        - 'name == "GET /healthz"'
  tail_sampling:
    decision_wait: 10s
    policies:
      - name: keep-errors
        type: status_code
        status_code: { status_codes: [ERROR] }
      - name: sample-successes
        type: probabilistic
        probabilistic: { sampling_percentage: 10 }
  resource:
    attributes:
      - key: cluster.name
        value: prod-us-west
        action: upsert
  attributes/redact:
    actions:
      - key: user.email
        action: delete
exporters:
  otlp/jaeger:
    endpoint: jaeger:4317
    tls: { insecure: true }
  file:
    path: /var/log/otel/telemetry.jsonl
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [filter/drop_health_checks, tail_sampling, resource, batch]
      exporters: [otlp/jaeger, file]
`,
	},
	{
		name: "multi-backend routing with the Weave URL in endpoint (the 404 trap)",
		yaml: seedReceivers + `
exporters:
  otlp/jaeger:
    endpoint: jaeger:4317
    tls: { insecure: true }
  otlphttp/wandb:
    endpoint: https://trace.wandb.ai/otel/v1/traces
    headers:
      wandb-api-key: ${env:WANDB_API_KEY}
service:
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [otlp/jaeger, otlphttp/wandb]
`,
		env:     map[string]string{"WANDB_API_KEY": "k"},
		wantErr: []string{"otlphttp/wandb", "traces_endpoint"},
	},
	{
		name: "debugging: the debug exporter and debug logs",
		yaml: seedReceivers + `
exporters:
  debug:
    verbosity: detailed
service:
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [debug]
`,
		args: []string{"--set=service.telemetry.logs.level=debug"},
	},
}

func TestSeedPageSnippets(t *testing.T) {
	for _, tc := range seedSnippets {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "otel-collector.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			env := testEnv(t)
			maps.Copy(env, tc.env)
			out, err := testcollector.Run(t, env, append([]string{"validate", "--config=" + path}, tc.args...)...)
			switch {
			case len(tc.wantErr) == 0 && err != nil:
				t.Fatalf("validate refused the page's snippet: %v\n%s", err, out)
			case len(tc.wantErr) > 0 && err == nil:
				t.Fatalf("validate accepted the page's snippet, which cannot deliver; want a message naming %v:\n%s", tc.wantErr, out)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(out, w) {
					t.Errorf("validate's message does not name %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestSeedPagePaths: the preset paths and names the page uses answer here.
// In the image they are links into /etc/otel/configs/ (TestDockerImage
// validates each there); here each maps to a preset of configs/ that
// validates, and the compose toggles the page names are offered.
func TestSeedPagePaths(t *testing.T) {
	root := testcollector.RepoRoot(t)
	for _, path := range []string{
		presetDir + "collector-weave.yaml",     // docker-compose.otel.yml's Weave mode
		presetDir + "collector-honeycomb.yaml", // "uncomment --config=/etc/otel/collector-honeycomb.yaml"
		presetDir + "collector.yaml",           // the bundled default
		presetDir + "collector-jaeger.yaml",    // the minimal Jaeger + Prometheus + file setup
	} {
		preset, ok := presetFile(path)
		if !ok {
			t.Errorf("%s is not a preset path", path)
			continue
		}
		if out, err := testcollector.Run(t, testEnv(t), "validate", "--config="+filepath.Join(root, "configs", preset)); err != nil {
			t.Errorf("%s (configs/%s): %v\n%s", path, preset, err, out)
		}
	}
	offered := strings.Join(configChoices(t, "docker-compose.otel.yml"), " ")
	for _, want := range []string{"collector-weave.yaml", "collector-honeycomb.yaml"} {
		if !strings.Contains(offered, presetDir+want) {
			t.Errorf("docker-compose.otel.yml does not offer %s%s (offered: %s)", presetDir, want, offered)
		}
	}
	for _, f := range []string{"docker-compose.weave.yml", "docker-compose.honeycomb.yml"} {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "Not the NeMo Lens page's file of the same name") {
			t.Errorf("%s does not say how it differs from the NeMo Lens page's file of the same name", f)
		}
	}
}

// TestValidateWarnsAboutMissingFileDirectory: the page's minimal config on a
// machine without its directory passes validate (the directory may be a
// volume mounted at start) but says why the start would fail and the fix;
// with the directory there, nothing is said.
func TestValidateWarnsAboutMissingFileDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		dir  string
		warn bool
	}{{filepath.Join(dir, "missing"), true}, {dir, false}} {
		path := filepath.Join(t.TempDir(), "otel-collector.yaml")
		yaml := strings.Replace(seedMinimalCollector, "/var/log/otel/telemetry.jsonl", filepath.Join(tc.dir, "telemetry.jsonl"), 1)
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := testcollector.Run(t, testEnv(t), "validate", "--config="+path)
		if err != nil {
			t.Fatalf("validate refused the page's minimal config: %v\n%s", err, out)
		}
		warned := strings.Contains(out, "the file exporter's directory does not exist") && strings.Contains(out, "create_directory: true")
		if warned != tc.warn {
			t.Errorf("directory %s: warned=%v, want %v:\n%s", tc.dir, warned, tc.warn, out)
		}
	}
}
