// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// Bounds of the Prometheus helper's waits.
const (
	promStartTimeout = 30 * time.Second
	promStopTimeout  = 10 * time.Second
	promQueryTimeout = 5 * time.Second
)

// promTarget is one scrape job of the test's Prometheus, named as in
// docker/prometheus.yml: otelcol-nemo for a collector's own metrics,
// training (honor_labels) for the jaeger and fanout presets' exporter.
type promTarget struct {
	Job, Addr   string // Addr: 127.0.0.1:port
	HonorLabels bool
}

// collectorTargets are the jaeger or fanout preset's two endpoints.
func collectorTargets(c *testcollector.Collector, exporterPort int) []promTarget {
	return []promTarget{
		{Job: "otelcol-nemo", Addr: fmt.Sprintf("127.0.0.1:%d", c.MetricsPort)},
		{Job: "training", Addr: fmt.Sprintf("127.0.0.1:%d", exporterPort), HonorLabels: true},
	}
}

// promServer is Debian's prometheus binary run by a test: its own config
// and storage in temporary directories, on a free port of 127.0.0.1,
// scraping and evaluating the rules every second. It is stopped when the
// test ends.
type promServer struct {
	URL  string
	proc *testcollector.Process
}

// startPrometheus runs prometheus scraping targets with ruleFiles (nil: the
// committed deploy/prometheus/alerts.yaml) and waits until it is ready.
func startPrometheus(t *testing.T, ruleFiles []string, targets ...promTarget) *promServer {
	t.Helper()
	_, bin := requirePrometheus(t)
	if ruleFiles == nil {
		ruleFiles = []string{filepath.Join(testcollector.RepoRoot(t), "deploy", "prometheus", "alerts.yaml")}
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n")
	for _, f := range ruleFiles {
		fmt.Fprintf(&cfg, "  - %q\n", f)
	}
	cfg.WriteString("scrape_configs:\n")
	for _, tg := range targets {
		fmt.Fprintf(&cfg, "  - job_name: %q\n    honor_labels: %v\n    static_configs:\n      - targets: [%q]\n", tg.Job, tg.HonorLabels, tg.Addr)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const attempts = 3
	for i := 1; ; i++ {
		port := testcollector.FreePort(t)
		p := &promServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
		p.proc = testcollector.StartProcess(t, "prometheus", bin, []string{
			"--config.file=" + cfgPath,
			"--storage.tsdb.path=" + filepath.Join(dir, fmt.Sprintf("data-%d", i)),
			"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
			"--log.level=warn",
		}, nil)
		err := p.proc.WaitForOK(p.URL+"/-/ready", promStartTimeout)
		if err == nil {
			t.Cleanup(func() {
				if !p.proc.Terminate(promStopTimeout) {
					t.Errorf("prometheus (pid %d) did not stop within %s of SIGTERM; killed", p.proc.Pid(), promStopTimeout)
				}
			})
			logOnFailure(t, func() string { return "== prometheus log\n" + p.proc.Logs() })
			return p
		}
		p.proc.Kill()
		if i == attempts || !strings.Contains(p.proc.Logs(), "address already in use") {
			t.Fatalf("prometheus not ready: %v; its config:\n%s\nits log:\n%s", err, cfg.String(), p.proc.Logs())
		}
	}
}

// promSample is one series of an instant query's vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// value is the sample's number.
func (s promSample) value() float64 {
	str, _ := s.Value[1].(string)
	v, _ := strconv.ParseFloat(str, 64)
	return v
}

// promAlert is one alert of GET /api/v1/alerts.
type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	Value       string            `json:"value"`
}

// api GETs path with query and decodes the response's data into out.
func (p *promServer) api(path string, query url.Values, out any) error {
	client := &http.Client{Timeout: promQueryTimeout}
	resp, err := client.Get(p.URL + path + "?" + query.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, body, err)
	}
	if r.Status != "success" {
		return fmt.Errorf("GET %s %v: %s", path, query, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// query evaluates expr now and returns its vector.
func (p *promServer) query(t *testing.T, expr string) []promSample {
	t.Helper()
	var data struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if data.ResultType != "vector" {
		t.Fatalf("query %s: a %s, want a vector", expr, data.ResultType)
	}
	return data.Result
}

// waitForQuery polls expr until cond holds for its vector, and returns it.
func (p *promServer) waitForQuery(t *testing.T, timeout time.Duration, expr string, cond func([]promSample) bool) []promSample {
	t.Helper()
	var got []promSample
	waitFor(t, timeout, "query "+expr, func() bool {
		got = p.query(t, expr)
		return cond(got)
	})
	return got
}

// alerts returns the alerts Prometheus holds now, pending and firing.
func (p *promServer) alerts(t *testing.T) []promAlert {
	t.Helper()
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	if err := p.api("/api/v1/alerts", nil, &data); err != nil {
		t.Fatalf("alerts: %v", err)
	}
	return data.Alerts
}

// firing returns the firing alerts named name whose labels include labels.
func (p *promServer) firing(t *testing.T, name string, labels map[string]string) []promAlert {
	t.Helper()
	var out []promAlert
	for _, a := range p.alerts(t) {
		if a.State != "firing" || a.Labels["alertname"] != name {
			continue
		}
		match := true
		for k, v := range labels {
			match = match && a.Labels[k] == v
		}
		if match {
			out = append(out, a)
		}
	}
	return out
}

// waitForAlert waits until an alert named name with labels fires, and
// returns it.
func (p *promServer) waitForAlert(t *testing.T, timeout time.Duration, name string, labels map[string]string) promAlert {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := p.firing(t, name, labels); len(got) > 0 {
			return got[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for alert %s%v to fire; alerts now: %v", timeout, name, labels, p.alerts(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promRule is one rule of GET /api/v1/rules.
type promRule struct {
	Name, Query, Health, LastError string
}

// rules returns every loaded rule with its evaluation health.
func (p *promServer) rules(t *testing.T) []promRule {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Query     string `json:"query"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api("/api/v1/rules", nil, &data); err != nil {
		t.Fatalf("rules: %v", err)
	}
	var out []promRule
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out = append(out, promRule{r.Name, r.Query, r.Health, r.LastError})
		}
	}
	return out
}

// rulesWithoutHold writes a copy of a rule file with every `for:` removed,
// so that a test sees an alert fire on its expression without waiting the
// minutes the committed hold asks.
func rulesWithoutHold(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string           `yaml:"name"`
			Rules []map[string]any `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err = yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			delete(r, "for")
		}
	}
	out, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "alerts-without-hold.yaml")
	if err := os.WriteFile(copyPath, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return copyPath
}

// jaegerUnderPrometheus starts the jaeger preset (the default strategy,
// env added; its Jaeger endpoint answers nobody, so its queue waits) and
// a real Prometheus scraping it as docker/prometheus.yml does, with
// ruleFiles (nil: deploy/prometheus/alerts.yaml).
func jaegerUnderPrometheus(t *testing.T, env map[string]string, ruleFiles []string) (*testcollector.Collector, *promServer) {
	t.Helper()
	exporterPort := testcollector.FreePort(t)
	e := testEnv(t)
	delete(e, "NEMO_RANK_STRATEGY")
	e["JAEGER_OTLP_ENDPOINT"] = fmt.Sprintf("127.0.0.1:%d", testcollector.FreePort(t))
	e["PROMETHEUS_EXPORTER_PORT"] = strconv.Itoa(exporterPort)
	maps.Copy(e, env)
	c := testcollector.Start(t, testcollector.Config(t, "jaeger.yaml"), testcollector.Options{Env: e})
	return c, startPrometheus(t, ruleFiles, collectorTargets(c, exporterPort)...)
}

// TestPrometheusEvaluatesTheAlerts: a real Prometheus scraping the jaeger
// preset (the collector's own metrics and its Prometheus exporter, as
// docker/prometheus.yml does) loads deploy/prometheus/alerts.yaml, every
// rule evaluates without error on the real series, none of the collector
// health alerts fires on a healthy collector, the series they read are
// there with the labels they group by, and NemoRankStraggler (its 5-minute
// hold removed) fires for the one rank that is three times slower on every
// step, naming its rank and host, and for no other rank.
func TestPrometheusEvaluatesTheAlerts(t *testing.T) {
	requirePrometheus(t)
	rules := rulesWithoutHold(t, filepath.Join(testcollector.RepoRoot(t), "deploy", "prometheus", "alerts.yaml"))
	c, prom := jaegerUnderPrometheus(t, nil, []string{rules})
	// Both targets scraped: up is 1 for the otelcol-nemo and training jobs.
	prom.waitForQuery(t, promStartTimeout, "up", func(s []promSample) bool {
		up := 0
		for _, v := range s {
			if v.value() == 1 && (v.Metric["job"] == "otelcol-nemo" || v.Metric["job"] == "training") {
				up++
			}
		}
		return up == 2
	})

	const runID = "run-prometheus-alerts"
	ranks := mixedJob(c, runID, stepRanks, 8)
	for i := range ranks {
		ranks[i].Resource = append(ranks[i].Resource, attribute.String("host.name", fmt.Sprintf("node-%02d", i/8)))
		// An even pause, so that Prometheus scrapes the straggler count
		// between steps: the rule needs it increasing.
		ranks[i].PauseBefore, ranks[i].Pause = 5, 4*time.Second
	}
	ranks[slowRank].ComputeDuration = func(int) time.Duration { return stepSlowdown * lensemu.DefaultComputeDuration }
	runJob(t, ranks)

	alert := prom.waitForAlert(t, deliveryTimeout, "NemoRankStraggler", map[string]string{"nemo_run_id": runID})
	if alert.Labels["nv_dl_rank"] != strconv.Itoa(slowRank) || alert.Labels["host_name"] != "node-00" {
		t.Errorf("NemoRankStraggler fired for %v, want rank %d on node-00", alert.Labels, slowRank)
	}
	if want := fmt.Sprintf("Rank %d on node-00 slows run %s down", slowRank, runID); !strings.HasPrefix(alert.Annotations["summary"], want) {
		t.Errorf("NemoRankStraggler summary %q, want it to start %q", alert.Annotations["summary"], want)
	}
	if all := prom.firing(t, "NemoRankStraggler", nil); len(all) != 1 {
		t.Errorf("NemoRankStraggler fires %d times, want once (rank %d): %v", len(all), slowRank, all)
	}

	// The series the collector health rules read, with the labels they
	// group by. (The failure counters appear only once they count.)
	for expr, labels := range map[string][]string{
		"otelcol_receiver_refused_spans":                                {"job", "instance", "receiver", "transport"},
		"otelcol_receiver_refused_metric_points":                        {"job", "instance", "receiver", "transport"},
		"otelcol_receiver_refused_log_records":                          {"job", "instance", "receiver", "transport"},
		"otelcol_exporter_queue_size / otelcol_exporter_queue_capacity": {"job", "instance", "exporter", "data_type"},
		"nemo_step_stragglers_total":                                    {"nemo_run_id"},
	} {
		got := prom.query(t, expr)
		if len(got) == 0 {
			t.Errorf("%s: no series on Prometheus", expr)
		}
		for _, s := range got {
			for _, l := range labels {
				if s.Metric[l] == "" {
					t.Errorf("%s: series %v has no label %s", expr, s.Metric, l)
				}
			}
		}
	}
	// Every rule evaluated (a matching error shows only at evaluation) and
	// no collector alert fires on a healthy collector.
	for _, r := range prom.rules(t) {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q (%s): %s", r.Name, r.Health, r.LastError, r.Query)
		}
	}
	for _, a := range prom.alerts(t) {
		if a.Labels["alertname"] != "NemoRankStraggler" {
			t.Errorf("alert %s is %s on a healthy collector: %v", a.Labels["alertname"], a.State, a.Labels)
		}
	}
}

// TestDashboardAnswersDuringARun: a real Prometheus scraping the jaeger
// preset (the default strategy) while a run is in progress: 8 ranks on two
// hosts save a checkpoint every second iteration (a save settles the
// steps before it once training goes on), rank 2 computes three times as
// long from iteration 2 on, and the job hangs in iteration 5
// (rank 6 stops): its job spans never end, so no goodput record is due
// for goodput::interval (5 minutes). Every query of the Grafana dashboard,
// its run variable set to the run, answers: the step panels, the stall
// panels, and the goodput panels from the metrics nemo_steps sends at
// every tick.
func TestDashboardAnswersDuringARun(t *testing.T) {
	requirePrometheus(t)
	c, prom := jaegerUnderPrometheus(t, map[string]string{"NEMO_STALL_AFTER": stallAfter.String(), "NEMO_STRAGGLER_WAIT": "2s"}, nil)

	const runID = "run-dashboard-live"
	ranks := hungJob(c, runID, 8, map[int]lensemu.HangRole{6: lensemu.Stopped}, nil)
	for i := range ranks {
		ranks[i].SaveEvery, ranks[i].SaveDuration = 2, time.Second
	}
	ranks[2].ComputeDuration = func(it int) time.Duration {
		if it >= 2 {
			return stepSlowdown * lensemu.DefaultComputeDuration
		}
		return lensemu.DefaultComputeDuration
	}
	runJob(t, ranks)

	variable := regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`)
	queries := dashboardQueries(t)
	var silent []string
	deadline := time.Now().Add(deliveryTimeout)
	for {
		silent = silent[:0]
		for _, q := range queries {
			expr := strings.ReplaceAll(q.expr, "$nemo_run_id", runID)
			if m := variable.FindStringSubmatch(expr); m != nil {
				expr = fmt.Sprintf("group by (%s) (%s)", m[2], m[1])
			}
			if len(prom.query(t, expr)) == 0 {
				silent = append(silent, fmt.Sprintf("%s: %s", q.title, expr))
			}
		}
		if len(silent) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(silent) > 0 {
		t.Errorf("%d of the dashboard's %d queries answer nothing during the run:\n%s", len(silent), len(queries), strings.Join(silent, "\n"))
	}
	if got := prom.query(t, fmt.Sprintf("nemo_run_goodput_ratio{nemo_run_id=%q}", runID)); len(got) != 1 || got[0].value() <= 0 || got[0].value() > 1 {
		t.Errorf("the run's goodput during the run: %v, want one value in (0, 1]", got)
	}
}
