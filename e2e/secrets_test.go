// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestAPIKeysNeverLeak runs the weave preset with zpages on and debug
// logging, against a Weave that first refuses the key (401, echoing it back,
// as a careless server might) and then accepts it, and greps everything the
// collector wrote (its log, the zpages, the JSONL output, the queue files)
// for the key in clear and in its basic-auth form.
func TestAPIKeysNeverLeak(t *testing.T) {
	const key = "leak-check-key-8d2f1c7a"
	var refuse atomic.Bool
	refuse.Store(true)
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		if refuse.Load() {
			return http.StatusUnauthorized, nil, []byte("invalid api key " + r.Header.Get("wandb-api-key"))
		}
		return 0, nil, nil
	})
	env := testEnv(t)
	env["WEAVE_ENDPOINT"] = sink.URL + "/otel/v1/traces"
	env["WANDB_API_KEY"] = key
	env["WANDB_ENTITY"], env["WANDB_PROJECT"] = "team", "proj"
	zpages := testcollector.FreePort(t)
	c := testcollector.Start(t, testcollector.Config(t, "weave.yaml"), testcollector.Options{Env: env, Args: []string{
		fmt.Sprintf("--config=yaml:extensions::zpages::endpoint: 127.0.0.1:%d", zpages),
		"--config=yaml:service::extensions: [health_check, file_storage/queue, zpages]",
		"--config=yaml:service::telemetry::logs::level: debug",
	}})
	runJob(t, mixedJob(c, "run-leak", 2, 2))
	waitFor(t, deliveryTimeout, "the 401 from Weave", func() bool { return sink.Refused() > 0 })
	refuse.Store(false)
	runJob(t, mixedJob(c, "run-leak-2", 2, 1))
	waitFor(t, deliveryTimeout, "spans at Weave", func() bool { return sink.Count(otlpsink.Traces) > 0 })

	var written strings.Builder
	for _, page := range []string{"/debug/servicez", "/debug/pipelinez", "/debug/extensionz", "/debug/featurez", "/debug/tracez"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", zpages, page))
		if err != nil {
			t.Fatalf("zpages %s: %v", page, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		written.Write(b)
	}
	c.Stop()
	written.WriteString(c.Logs())
	for _, dir := range []string{env["NEMO_TELEMETRY_DIR"], env["NEMO_QUEUE_DIR"]} {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				written.Write(b)
			}
			return nil
		})
	}
	if !strings.Contains(c.Logs(), "401") {
		t.Errorf("the 401 was not reported in the log")
	}
	basic := base64.StdEncoding.EncodeToString([]byte("api:" + key))
	for _, secret := range []string{key, basic} {
		if strings.Contains(written.String(), secret) {
			t.Errorf("the API key (%q) appears in what the collector wrote", secret)
		}
	}
}
