// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func convert(t *testing.T, raw map[string]any) error {
	t.Helper()
	c := NewFactory().Create(confmap.ConverterSettings{})
	return c.Convert(t.Context(), confmap.NewFromStringMap(raw))
}

func receiver(grpc, http string) map[string]any {
	return map[string]any{"otlp": map[string]any{"protocols": map[string]any{
		"grpc": map[string]any{"endpoint": grpc},
		"http": map[string]any{"endpoint": http},
	}}}
}

func TestSignalPathInEndpoint(t *testing.T) {
	err := convert(t, map[string]any{"exporters": map[string]any{
		"otlphttp/wandb": map[string]any{"endpoint": "https://trace.wandb.ai/otel/v1/traces"},
	}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exporters::otlphttp/wandb::endpoint")
	assert.Contains(t, err.Error(), "traces_endpoint: \"https://trace.wandb.ai/otel/v1/traces\"")
	assert.Contains(t, err.Error(), "endpoint: \"https://trace.wandb.ai/otel\"")

	err = convert(t, map[string]any{"exporters": map[string]any{
		"otlp_http/hc": map[string]any{"endpoint": "https://api.honeycomb.io/v1/metrics/"},
	}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metrics_endpoint")
}

func TestGoodConfigsPass(t *testing.T) {
	require.NoError(t, convert(t, map[string]any{
		"receivers": receiver("127.0.0.1:4317", "127.0.0.1:4318"),
		"exporters": map[string]any{
			"otlp_http/wandb":  map[string]any{"traces_endpoint": "https://trace.wandb.ai/otel/v1/traces"},
			"otlphttp/hc":      map[string]any{"endpoint": "https://api.honeycomb.io"},
			"otlp_grpc/jaeger": map[string]any{"endpoint": "jaeger:4317"},
			"otlp_grpc/other":  map[string]any{"endpoint": "127.0.0.1:14317"},
			"debug":            nil,
		},
	}))
	require.NoError(t, convert(t, map[string]any{}), "an empty config is not this converter's business")
}

func TestJaegerExporter(t *testing.T) {
	err := convert(t, map[string]any{"exporters": map[string]any{"jaeger": map[string]any{"endpoint": "jaeger:14250"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exporters::jaeger")
	assert.Contains(t, err.Error(), "otlp_grpc")
}

// A nemo_steps connector (the shape before nemo_steps was a processor and a
// receiver) fails naming where its settings go; the forward connector and a
// nemo_steps processor and receiver pass.
func TestNemoStepsConnector(t *testing.T) {
	err := convert(t, map[string]any{"connectors": map[string]any{
		"forward/traces":   map[string]any{},
		"nemo_steps":       map[string]any{"decision_wait": "10s"},
		"nemo_steps/other": nil,
	}})
	require.ErrorContains(t, err, "connectors::nemo_steps: nemo_steps is a processor and a receiver now, not a connector: move its settings to processors::nemo_steps")
	require.ErrorContains(t, err, "add receivers::nemo_steps: {}")
	require.ErrorContains(t, err, "connectors::nemo_steps/other:")
	assert.NotContains(t, err.Error(), "connectors::forward")

	require.NoError(t, convert(t, map[string]any{
		"connectors": map[string]any{"forward/traces": map[string]any{}},
		"processors": map[string]any{"nemo_steps": map[string]any{"decision_wait": "10s"}},
		"receivers":  map[string]any{"nemo_steps": map[string]any{}},
	}))
}

func TestExportToOwnReceiver(t *testing.T) {
	for name, tc := range map[string]struct {
		grpc, http string
		exporter   string
		cfg        map[string]any
	}{
		"http to wildcard receiver": {"0.0.0.0:4317", "0.0.0.0:4318", "otlp_http/backend", map[string]any{"endpoint": "http://localhost:4318"}},
		"grpc to loopback":          {"127.0.0.1:4317", "127.0.0.1:4318", "otlp_grpc/backend", map[string]any{"endpoint": "localhost:4317"}},
		"traces_endpoint":           {"localhost:4317", "localhost:4318", "otlphttp", map[string]any{"traces_endpoint": "http://127.0.0.1:4318/v1/traces"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := convert(t, map[string]any{
				"receivers": receiver(tc.grpc, tc.http),
				"exporters": map[string]any{tc.exporter: tc.cfg},
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "exporters::"+tc.exporter)
			assert.Contains(t, err.Error(), "own OTLP receiver")
		})
	}
	require.NoError(t, convert(t, map[string]any{
		"receivers": receiver("0.0.0.0:4317", "0.0.0.0:4318"),
		"exporters": map[string]any{"otlp_http/gw": map[string]any{"endpoint": "http://gateway:4318"}},
	}), "another host on the same port is fine")
}

func TestJaegerNamedInAPipeline(t *testing.T) {
	err := convert(t, map[string]any{
		"exporters": map[string]any{"file/traces": map[string]any{"path": "/tmp/x.jsonl"}},
		"service": map[string]any{"pipelines": map[string]any{
			"traces": map[string]any{"receivers": []any{"otlp"}, "exporters": []any{"file/traces", "jaeger"}},
		}},
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "service::pipelines::traces::exporters names jaeger")
	assert.Contains(t, err.Error(), "otlp_grpc")
}

func TestPlaintextSchemeUnderTLS(t *testing.T) {
	err := convert(t, map[string]any{"exporters": map[string]any{
		"otlp_grpc/jaeger": map[string]any{"endpoint": "http://jaeger:4317"},
	}})
	require.ErrorContains(t, err, `exporters::otlp_grpc/jaeger::endpoint "http://jaeger:4317" says no TLS (http://) but tls.insecure is not true`)
	assert.ErrorContains(t, err, "set `tls: {insecure: true}`")

	err = convert(t, map[string]any{"exporters": map[string]any{
		"load_balancing": map[string]any{
			"protocol": map[string]any{"otlp": map[string]any{"tls": map[string]any{"insecure": false}}},
			"resolver": map[string]any{"static": map[string]any{"hostnames": []any{"gw1:4317", "http://gw2:4317"}}},
		},
	}})
	require.ErrorContains(t, err, `exporters::load_balancing::protocol::otlp (resolver::static::hostnames)::endpoint "http://gw2:4317"`)
	assert.NotContains(t, err.Error(), "gw1")

	err = convert(t, map[string]any{"exporters": map[string]any{
		"load_balancing": map[string]any{"resolver": map[string]any{"dns": map[string]any{"hostname": "http://gateways.svc"}}},
	}})
	require.ErrorContains(t, err, `exporters::load_balancing::resolver::dns::hostname "http://gateways.svc" is a URL`)

	// The agent preset's spool sends through a load_balancing of its own.
	err = convert(t, map[string]any{"exporters": map[string]any{
		"spool": map[string]any{"load_balancing": map[string]any{
			"protocol": map[string]any{"otlp": map[string]any{"tls": map[string]any{"insecure": false}}},
			"resolver": map[string]any{"static": map[string]any{"hostnames": []any{"http://gw2:4317"}}},
		}},
	}})
	require.ErrorContains(t, err, `exporters::spool::load_balancing::protocol::otlp (resolver::static::hostnames)::endpoint "http://gw2:4317"`)

	for name, exp := range map[string]map[string]any{
		"http:// with insecure":          {"otlp_grpc": map[string]any{"endpoint": "http://jaeger:4317", "tls": map[string]any{"insecure": true}}},
		"http:// with insecure (string)": {"otlp": map[string]any{"endpoint": "http://jaeger:4317", "tls": map[string]any{"insecure": "true"}}},
		"https:// with TLS":              {"otlp_grpc": map[string]any{"endpoint": "https://otlp.example.com:443"}},
		"host:port with TLS":             {"otlp_grpc": map[string]any{"endpoint": "otlp.example.com:4317"}},
		"plaintext gateways": {"load_balancing": map[string]any{
			"protocol": map[string]any{"otlp": map[string]any{"tls": map[string]any{"insecure": true}}},
			"resolver": map[string]any{"static": map[string]any{"hostnames": []any{"http://gw1:4317", "gw2:4317"}}},
		}},
	} {
		assert.NoError(t, convert(t, map[string]any{"exporters": exp}), name)
	}
}

func TestFileExporterDirectoryWarning(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	c := converter{logger: zap.New(core), statDir: func(dir string) bool { return dir == "/exists" }}
	conf := confmap.NewFromStringMap(map[string]any{"exporters": map[string]any{
		"file":          map[string]any{"path": "/var/log/otel/telemetry.jsonl"},
		"file/ok":       map[string]any{"path": "/exists/telemetry.jsonl"},
		"file/creates":  map[string]any{"path": "/missing/a.jsonl", "create_directory": true},
		"file/group_by": map[string]any{"path": "/missing/*.jsonl", "group_by": map[string]any{"enabled": true}},
	}})
	require.NoError(t, c.Convert(t.Context(), conf), "a missing directory warns, it does not refuse")
	require.Equal(t, 1, logs.Len(), "one warning, for the exporter without its directory")
	entry := logs.All()[0]
	assert.Contains(t, entry.Message, "create_directory: true")
	assert.Equal(t, map[string]any{"exporter": "file", "path": "/var/log/otel/telemetry.jsonl", "directory": "/var/log/otel"}, entry.ContextMap())
}

// TestStrandedQueueWarning: a queue of an exporter the config does not
// have (an otlp_http exporter replaced by otlp_grpc, a spool slot beyond
// slots, a spool's queue of a release that kept it in file_storage) is
// named in a warning; the config's own queues are not.
func TestStrandedQueueWarning(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{
		"exporter_otlp_grpc_backend_traces", // this config's
		"exporter_otlp_http_backend_traces", // stranded: the exporter was otlp_http before
		"exporter_spool_slot03_logs",        // stranded: the spool's queue of an earlier release
		"exporter_nemo_view__runs",          // this config's
		"receiver_otlp__x",                  // not an exporter's
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}
	for _, d := range []string{
		"exporter_spool_slot03_logs.journal", // this config's
		"exporter_spool_slot09_logs.journal", // stranded: the spool has 8 slots now
	} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o700))
	}
	core, logs := observer.New(zap.WarnLevel)
	c := converter{logger: zap.New(core), statDir: dirExists}
	conf := confmap.NewFromStringMap(map[string]any{
		"extensions": map[string]any{"file_storage/queue": map[string]any{"directory": dir}},
		"exporters": map[string]any{
			"otlp_grpc/backend": map[string]any{"endpoint": "backend:4317"},
			"spool":             map[string]any{"slots": 8, "directory": dir},
			"nemo_view":         map[string]any{},
		},
	})
	require.NoError(t, c.Convert(t.Context(), conf), "a stranded queue warns, it does not refuse")
	var files []string
	for _, e := range logs.All() {
		assert.Contains(t, e.Message, "will not be sent")
		files = append(files, e.ContextMap()["file"].(string))
	}
	assert.ElementsMatch(t, []string{
		filepath.Join(dir, "exporter_otlp_http_backend_traces"),
		filepath.Join(dir, "exporter_spool_slot03_logs"),
		filepath.Join(dir, "exporter_spool_slot09_logs.journal"),
	}, files)
}

func TestNemoOTLPChecksTheClientItsProtocolPicks(t *testing.T) {
	own := receiver("127.0.0.1:4317", "127.0.0.1:4318")
	for name, tc := range map[string]struct {
		cfg  map[string]any
		want string
	}{
		"grpc to itself": {map[string]any{"grpc": map[string]any{"endpoint": "localhost:4317"}}, "exporters::nemo_otlp::grpc: endpoint \"localhost:4317\" is this collector's own OTLP receiver"},
		"grpc plaintext under TLS": {
			map[string]any{"protocol": "grpc", "grpc": map[string]any{"endpoint": "http://jaeger:4317"}},
			`exporters::nemo_otlp::grpc::endpoint "http://jaeger:4317" says no TLS`,
		},
		"http signal path": {
			map[string]any{"protocol": "http/protobuf", "http": map[string]any{"endpoint": "https://api.honeycomb.io/v1/traces"}},
			"exporters::nemo_otlp::http::endpoint",
		},
		"http to itself": {
			map[string]any{"protocol": "http/json", "http": map[string]any{"endpoint": "http://localhost:4318"}},
			"exporters::nemo_otlp::http: endpoint \"http://localhost:4318\" is this collector's own OTLP receiver",
		},
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorContains(t, convert(t, map[string]any{"receivers": own, "exporters": map[string]any{"nemo_otlp": tc.cfg}}), tc.want)
		})
	}
	// The client the protocol does not pick is not checked (the presets
	// fill both from one variable).
	require.NoError(t, convert(t, map[string]any{"receivers": own, "exporters": map[string]any{"nemo_otlp": map[string]any{
		"protocol": "http/protobuf",
		"grpc":     map[string]any{"endpoint": "http://backend:4317"},
		"http":     map[string]any{"endpoint": "http://backend:4318"},
	}}}))
}

// TestDropAllFilterWarning: a filter processor in a pipeline whose
// condition is always true (the otlp preset's switches, off) is named in a
// warning with its counter; one with a real condition, or in no pipeline,
// is not.
func TestDropAllFilterWarning(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	c := converter{logger: zap.New(core), statDir: dirExists}
	conf := confmap.NewFromStringMap(map[string]any{
		"processors": map[string]any{
			"filter/metrics_switch": map[string]any{"metrics": map[string]any{"metric": []any{"not  false"}}},
			"filter/logs_switch":    map[string]any{"logs": map[string]any{"log_record": []any{"not true"}}},
			"filter/health":         map[string]any{"traces": map[string]any{"span": []any{`name == "health"`}}},
			"filter/unused":         map[string]any{"traces": map[string]any{"span": []any{"true"}}},
			"filter/bare_true":      map[string]any{"logs": map[string]any{"log_record": []any{`severity_number < 9`, true}}},
		},
		"service": map[string]any{"pipelines": map[string]any{
			"metrics": map[string]any{"processors": []any{"filter/metrics_switch"}},
			"logs":    map[string]any{"processors": []any{"filter/logs_switch", "filter/bare_true"}},
			"traces":  map[string]any{"processors": []any{"filter/health"}},
		}},
	})
	require.NoError(t, c.Convert(t.Context(), conf), "it warns, it does not refuse")
	all := logs.All()
	require.Len(t, all, 2)
	for _, e := range all {
		assert.Contains(t, e.Message, "drops every item of its pipelines")
	}
	assert.Equal(t, "filter/bare_true", all[0].ContextMap()["processor"])
	assert.Equal(t, "otelcol_processor_filter_logs_filtered", all[0].ContextMap()["counted_in"])
	assert.Equal(t, "filter/metrics_switch", all[1].ContextMap()["processor"])
	assert.Equal(t, "otelcol_processor_filter_datapoints_filtered", all[1].ContextMap()["counted_in"])
}
