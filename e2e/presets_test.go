// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

const listenHost = "${env:OTELCOL_LISTEN_HOST:-localhost}"

// TestPresetsBindLocalhostByDefault: outside a container every preset binds
// its receivers, extensions and own metrics to localhost; the container image
// widens that with OTELCOL_LISTEN_HOST. Every preset also starts with
// memory_limiter, has batch and health_check, and documents itself.
func TestPresetsBindLocalhostByDefault(t *testing.T) {
	presets, _ := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), "configs", "*.yaml"))
	for _, p := range presets {
		t.Run(filepath.Base(p), func(t *testing.T) {
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(raw), "# otelcol-nemo preset:") {
				t.Errorf("no header comment (\"# otelcol-nemo preset: ...\")")
			}
			var cfg map[string]any
			if err := yaml.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			walkEndpoints(cfg["receivers"], "receivers", func(path, endpoint string) {
				if !strings.HasPrefix(endpoint, listenHost+":") {
					t.Errorf("%s = %q: must bind %s", path, endpoint, listenHost)
				}
			})
			walkEndpoints(cfg["extensions"], "extensions", func(path, endpoint string) {
				if !strings.HasPrefix(endpoint, listenHost+":") {
					t.Errorf("%s = %q: must bind %s", path, endpoint, listenHost)
				}
			})
			// The exporters that serve (Prometheus' scrape, the run pages).
			exporters, _ := cfg["exporters"].(map[string]any)
			for id, exp := range exporters {
				if strings.HasPrefix(id, "prometheus") || strings.HasPrefix(id, "nemo_view") {
					walkEndpoints(exp, "exporters."+id, func(path, endpoint string) {
						if !strings.HasPrefix(endpoint, listenHost+":") {
							t.Errorf("%s = %q: must bind %s", path, endpoint, listenHost)
						}
					})
				}
			}
			service, _ := cfg["service"].(map[string]any)
			pipelines, _ := service["pipelines"].(map[string]any)
			if len(pipelines) == 0 {
				t.Fatal("no pipelines")
			}
			connectors, _ := cfg["connectors"].(map[string]any)
			for name, pl := range pipelines {
				procs, _ := pl.(map[string]any)["processors"].([]any)
				// A pipeline fed only by connectors, or by the nemo_steps
				// receiver (what the nemo_steps processor found in the
				// traces), gets what another pipeline's memory_limiter has
				// already admitted.
				recvs, _ := pl.(map[string]any)["receivers"].([]any)
				derived := len(recvs) > 0
				for _, r := range recvs {
					if id, _ := r.(string); !hasKey(connectors, id) && !isStepsReceiver(id) {
						derived = false
					}
				}
				if !derived && (len(procs) == 0 || procs[0] != "memory_limiter") {
					t.Errorf("pipeline %s: memory_limiter must come first, have %v", name, procs)
				}
				if !containsPrefix(procs, "batch") {
					// Without a batch processor (which would acknowledge
					// before the exporters have the data), every exporter
					// batches in its sending queue (the spool: what it reads back
					// from its own), or is pulled from.
					exps, _ := pl.(map[string]any)["exporters"].([]any)
					for _, e := range exps {
						id, _ := e.(string)
						// An id chosen by a variable: its default.
						id = envDefault.ReplaceAllString(id, "$1")
						if strings.HasPrefix(id, "prometheus") || strings.HasPrefix(id, "nemo_view") || hasKey(connectors, id) {
							continue // pulled from (a page, a scrape), or a connector into another pipeline
						}
						if strings.HasPrefix(id, "spool") && dig(cfg, "exporters", id, "max_batch_items") != nil {
							continue // batches what it reads back from its own queue
						}
						if dig(cfg, "exporters", id, "sending_queue", "batch") == nil {
							t.Errorf("pipeline %s: no batch processor, and exporter %s does not batch in its sending_queue", name, id)
						}
					}
				}
			}
			if exts, _ := service["extensions"].([]any); !containsPrefix(exts, "health_check") {
				t.Errorf("health_check is not enabled")
			}
			host := dig(cfg, "service", "telemetry", "metrics", "readers")
			if !strings.Contains(yamlString(t, host), "host: "+listenHost) {
				t.Errorf("service telemetry metrics must bind %s", listenHost)
			}
		})
	}
}

// envDefault matches ${env:NAME:-default} and captures the default.
var envDefault = regexp.MustCompile(`\$\{env:[A-Za-z0-9_]+:-([^}]*)\}`)

// walkEndpoints calls fn for every "endpoint" key under node.
func walkEndpoints(node any, path string, fn func(path, endpoint string)) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if s, ok := v.(string); ok && k == "endpoint" {
				fn(path+"."+k, s)
				continue
			}
			walkEndpoints(v, path+"."+k, fn)
		}
	case []any:
		for _, v := range n {
			walkEndpoints(v, path, fn)
		}
	}
}

func containsPrefix(list []any, prefix string) bool {
	for _, v := range list {
		if s, _ := v.(string); s == prefix || strings.HasPrefix(s, prefix+"/") {
			return true
		}
	}
	return false
}

func dig(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		mm, _ := cur.(map[string]any)
		cur = mm[k]
	}
	return cur
}

func yamlString(t *testing.T, v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// isStepsReceiver: the nemo_steps receiver, or one of its named instances.
func isStepsReceiver(id string) bool {
	return id == "nemo_steps" || strings.HasPrefix(id, "nemo_steps/")
}
