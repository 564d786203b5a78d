// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestEndpointSchemeDecidesTLS: every gRPC endpoint variable of the presets
// reads a URL's scheme as the OpenTelemetry SDKs do (http:// no TLS,
// https:// TLS), and a host:port by the preset's own rule. Each spelling is
// sent a job to a real gRPC receiver, plaintext or TLS as the spelling
// says, and every acknowledged span must arrive there: a collector that
// spoke TLS to the plaintext receiver (or the reverse) delivers nothing.
func TestEndpointSchemeDecidesTLS(t *testing.T) {
	pki := t.TempDir()
	certFile, keyFile, _ := testPKI(t, pki)
	creds, err := credentials.NewServerTLSFromFile(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, preset, variable string
		// spell writes the receiver's address as the case's spelling.
		spell func(addr string) string
		tls   bool
		env   map[string]string
	}{
		{"otlp http://", "otlp.yaml", "OTLP_BACKEND_ENDPOINT", prefix("http://"), false, nil},
		// The scheme wins over OTLP_BACKEND_INSECURE, as in the SDKs.
		{"otlp http:// with insecure false", "otlp.yaml", "OTLP_BACKEND_ENDPOINT", prefix("http://"), false, map[string]string{"OTLP_BACKEND_INSECURE": "false"}},
		{"otlp https://", "otlp.yaml", "OTLP_BACKEND_ENDPOINT", prefix("https://"), true, nil},
		{"otlp host:port", "otlp.yaml", "OTLP_BACKEND_ENDPOINT", prefix(""), true, nil},
		{"otlp host:port insecure", "otlp.yaml", "OTLP_BACKEND_ENDPOINT", prefix(""), false, map[string]string{"OTLP_BACKEND_INSECURE": "true"}},
		{"jaeger http://", "jaeger.yaml", "JAEGER_OTLP_ENDPOINT", prefix("http://"), false, nil},
		{"jaeger https://", "jaeger.yaml", "JAEGER_OTLP_ENDPOINT", prefix("https://"), true, nil},
		{"jaeger host:port", "jaeger.yaml", "JAEGER_OTLP_ENDPOINT", prefix(""), false, nil},
		{"agent http://", "agent.yaml", "GATEWAY_ENDPOINTS", list("http://"), false, nil},
		{"agent https://", "agent.yaml", "GATEWAY_ENDPOINTS", list("https://"), true, nil},
		{"agent host:port", "agent.yaml", "GATEWAY_ENDPOINTS", list(""), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []grpc.ServerOption
			if tc.tls {
				opts = append(opts, grpc.Creds(creds))
			}
			sink, err := otlpsink.StartGRPC(opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer sink.Close()
			env := testEnv(t)
			env[tc.variable] = tc.spell(sink.Addr)
			env["SSL_CERT_FILE"] = filepath.Join(pki, "ca.crt") // the TLS receiver's CA, as the system's
			env["PROMETHEUS_EXPORTER_PORT"] = strconv.Itoa(testcollector.FreePort(t))
			maps.Copy(env, tc.env)
			c := testcollector.Start(t, testcollector.Config(t, tc.preset), testcollector.Options{Env: env})
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("collector log:\n%s", c.Logs())
				}
			})
			ranks := mixedJob(c, "run-scheme", 2, 2)
			for i := range ranks {
				ranks[i].NoMetrics, ranks[i].NoLogs = true, true
			}
			sent := runJob(t, ranks)
			waitFor(t, deliveryTimeout, "every span at the "+map[bool]string{false: "plaintext", true: "TLS"}[tc.tls]+" receiver", func() bool {
				return int64(sink.Count(otlpsink.Traces)) >= sent.Spans
			})
			c.Stop()
			if got := int64(sink.Count(otlpsink.Traces)); got != sent.Spans {
				t.Errorf("the receiver holds %d spans, %d acknowledged", got, sent.Spans)
			}
			if logs := c.Logs(); strings.Contains(logs, "first record does not look like a TLS handshake") || strings.Contains(logs, "Exporting failed") {
				t.Errorf("an export failed:\n%s", logs)
			}
		})
	}
}

// TestPlaintextGatewayUnderAgentTLSRefused: with the agent-tls overlay
// every gateway is dialed with TLS, so an http:// gateway contradicts it:
// the start fails naming the endpoint and the fix, instead of every export
// failing later.
func TestPlaintextGatewayUnderAgentTLSRefused(t *testing.T) {
	env := testEnv(t)
	env["GATEWAY_ENDPOINTS"] = "[https://gw1.example:4317,http://gw2.example:4317]"
	overlay := "--config=" + filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "agent-tls.yaml")
	out, err := testcollector.Run(t, env, "validate", "--config="+testcollector.Config(t, "agent.yaml"), overlay)
	if err == nil {
		t.Fatalf("validate accepted an http:// gateway under TLS:\n%s", out)
	}
	for _, want := range []string{`"http://gw2.example:4317" says no TLS`, "tls: {insecure: true}"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate's message lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gw1.example") {
		t.Errorf("the https:// gateway was refused too:\n%s", out)
	}
}

func prefix(scheme string) func(string) string {
	return func(addr string) string { return scheme + addr }
}

// list is GATEWAY_ENDPOINTS, a YAML flow list, of one gateway.
func list(scheme string) func(string) string {
	return func(addr string) string { return "[" + scheme + addr + "]" }
}
