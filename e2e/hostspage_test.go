// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// hostsState is what the test reads from the rendered /hosts page.
type hostsState struct {
	Hosts []string `json:"hosts"`
	Drain []string `json:"drain"`
}

const readHosts = `(() => ({
  hosts: Array.from(document.querySelectorAll("#hosts tbody tr")).map((tr) => tr.dataset.host || ""),
  drain: Array.from(document.querySelectorAll("#drain tbody tr")).map((tr) => tr.dataset.host || ""),
}))()`

// TestHostsPageInAHeadlessBrowser: the default preset as committed; four
// runs in a row (one per shape), each of 8 ranks on node-a (ranks 0-3) and
// node-b (4-7), rank 5 on node-b three times as slow on iterations 2 to 5
// of 6. Then the collector restarts. Headless chromium renders /hosts:
// node-b first and on the drain list (a straggler in 4 runs, past the
// default 2), node-a not; the collector's own metrics say the same
// (otelcol_nemo_host_drain, otelcol_nemo_host_cost); the run
// pages link the straggler's host to its row on /hosts.
func TestHostsPageInAHeadlessBrowser(t *testing.T) {
	chromium := requireChromium(t)
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	env["NEMO_STRAGGLER_WAIT"] = "2s"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	var runs []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range stallShapes {
			if !yield(k) {
				return
			}
		}
	}) {
		run := runName("run-hosts", name)
		runs = append(runs, run)
		ranks := jobVia(func(int) *testcollector.Collector { return c }, run, 8, 6)
		for i := range ranks {
			host := "node-a"
			if i >= 4 {
				host = "node-b"
			}
			ranks[i].Resource = append(ranks[i].Resource, attribute.String(attrkey.HostName, host))
			if shape := stallShapes[name]; shape != nil {
				shape(&ranks[i])
			}
		}
		ranks[5].ComputeDuration = func(it int) time.Duration {
			if it >= 2 && it <= 5 {
				return stepSlowdown * lensemu.DefaultComputeDuration
			}
			return lensemu.DefaultComputeDuration
		}
		runJob(t, ranks)
	}
	var drain []string
	waitFor(t, deliveryTimeout, "node-b on the drain list", func() bool {
		var hosts struct {
			Drain []struct{ Host string } `json:"drain"`
		}
		getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/hosts", c.ViewPort), &hosts)
		drain = drain[:0]
		for _, h := range hosts.Drain {
			drain = append(drain, h.Host)
		}
		return slices.Contains(drain, "node-b")
	})
	if !slices.Equal(drain, []string{"node-b"}) {
		t.Errorf("drain list %v, want [node-b]", drain)
	}
	waitFor(t, deliveryTimeout, "otelcol_nemo_host_drain for node-b on the collector's own metrics", func() bool {
		own := scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.MetricsPort))
		v, ok := testcollector.SumMetric(own, "otelcol_nemo_host_drain", `host_name=node-b`)
		cost, costOK := testcollector.SumMetric(own, "otelcol_nemo_host_cost", `host_name=node-b`)
		return ok && v == 1 && costOK && cost > 0
	})
	c.Stop()

	again := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	defer again.Stop()
	base := fmt.Sprintf("http://127.0.0.1:%d", again.ViewPort)
	browser := newBrowser(t, chromium)
	shots := screenshotDir(t)
	var got hostsState
	waitFor(t, deliveryTimeout, "the /hosts page after the restart", func() bool {
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/hosts"), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
			t.Fatalf("render /hosts: %v", err)
		}
		var err error
		if got, err = chromedp.Run(browser, chromedp.Evaluate[hostsState](readHosts)); err != nil {
			t.Fatalf("read /hosts: %v", err)
		}
		return len(got.Hosts) == 2
	})
	screenshot(browser, t, filepath.Join(shots, "hosts.png"))
	if !slices.Equal(got.Hosts, []string{"node-b", "node-a"}) || !slices.Equal(got.Drain, []string{"node-b"}) {
		t.Errorf("/hosts after the restart: hosts %v, drain %v; want node-b first and alone on the drain list", got.Hosts, got.Drain)
	}

	// A run page links the straggler's host to its row.
	page := base + "/runs/" + runs[0]
	if err := chromedp.Do(browser, chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
		t.Fatal(err)
	}
	links, err := chromedp.Run(browser, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#stragglers a.host")).map((a) => a.getAttribute("href"))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(links) == 0 || strings.Join(slices.Compact(links), " ") != "/hosts#host-node-b" {
		t.Errorf("%s: straggler rows link %v, want /hosts#host-node-b", page, links)
	}
}
