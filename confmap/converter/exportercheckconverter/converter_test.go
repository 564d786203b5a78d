package exportercheckconverter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
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
