// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

const (
	s3Bucket = "training-telemetry"
	s3Access = "e2e-access-key"
	s3Secret = "e2e-secret-key-0123456789"
	s3Start  = 30 * time.Second
)

// s3Server is versitygw serving a directory as S3 on 127.0.0.1: each
// bucket is a directory of dir, each object a file under it.
type s3Server struct {
	dir  string
	port int
	proc *testcollector.Process
}

func versitygwBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("OTELCOL_NEMO_VERSITYGW_BIN"); bin != "" {
		return bin
	}
	bins, _ := filepath.Glob(filepath.Join(testcollector.RepoRoot(t), ".tools", "versitygw-*", "versitygw"))
	bin := filepath.Join(testcollector.RepoRoot(t), ".tools", "versitygw-<version>", "versitygw")
	if len(bins) > 0 {
		bin = bins[len(bins)-1]
	}
	testcollector.RequireFile(t, bin, "versitygw (S3 server)", "make s3server")
	return bin
}

// startS3 creates the bucket and starts the server on a free port.
func startS3(t *testing.T) *s3Server {
	t.Helper()
	s := &s3Server{dir: t.TempDir(), port: testcollector.FreePort(t)}
	if err := os.Mkdir(filepath.Join(s.dir, s3Bucket), 0o750); err != nil {
		t.Fatal(err)
	}
	s.start(t)
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("versitygw's log:\n%s", s.proc.Logs())
		}
	})
	return s
}

func (s *s3Server) endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server (again, on the same port and directory) and waits
// until it accepts connections.
func (s *s3Server) start(t *testing.T) {
	t.Helper()
	s.proc = testcollector.StartProcess(t, "versitygw", versitygwBinary(t), []string{
		"--access", s3Access, "--secret", s3Secret, "--region", "us-east-1",
		"--port", "127.0.0.1:" + strconv.Itoa(s.port),
		"posix", "--nometa", s.dir,
	}, nil)
	deadline := time.Now().Add(s3Start)
	for {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-s.proc.Done():
			t.Fatalf("versitygw exited during start-up (%v); its log:\n%s", s.proc.Err(), s.proc.Logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen within %s; its log:\n%s", s3Start, s.proc.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *s3Server) stop(t *testing.T) {
	select {
	case <-s.proc.Done():
		return
	default:
	}
	if !s.proc.Terminate(10 * time.Second) {
		t.Errorf("versitygw did not stop within 10s of SIGTERM")
	}
}

// s3Objects reads every object of the bucket back as the overlay's README
// says to (gunzip, OTLP/JSON), by the run id its key starts with.
func (s *s3Server) objects(t *testing.T) map[string]lensemu.Result {
	t.Helper()
	byRun := map[string]lensemu.Result{}
	s.each(t, func(run string, got lensemu.Result, _ []string) {
		byRun[run] = byRun[run].Add(got)
	})
	return byRun
}

// spanIDs are the span ids (hex) in the bucket's objects of run, with how
// many times each is there.
func (s *s3Server) spanIDs(t *testing.T, run string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	s.each(t, func(r string, _ lensemu.Result, spans []string) {
		if r == run {
			for _, id := range spans {
				ids[id]++
			}
		}
	})
	return ids
}

// each decodes every object of the bucket and hands over its run, its
// items and its span ids.
func (s *s3Server) each(t *testing.T, f func(run string, got lensemu.Result, spanIDs []string)) {
	t.Helper()
	root := filepath.Join(s.dir, s3Bucket)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && path != root {
			if d.IsDir() {
				return filepath.SkipDir // the server's own temporary files
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		key, _ := filepath.Rel(root, path)
		run, _, _ := strings.Cut(key, string(filepath.Separator))
		got, ids, err := readObject(path, run)
		if err != nil {
			t.Errorf("object %s: %v", key, err)
			return nil
		}
		f(run, got, ids)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readObject decodes one gzip-compressed OTLP/JSON object, checks every
// resource in it belongs to the run its key names, and counts its items;
// for a traces object, with its span ids.
func readObject(path, run string) (lensemu.Result, []string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return lensemu.Result{}, nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return lensemu.Result{}, nil, err
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return lensemu.Result{}, nil, err
	}
	var signal string
	switch name := filepath.Base(path); {
	case strings.HasPrefix(name, "traces_"):
		signal = "traces"
	case strings.HasPrefix(name, "metrics_"):
		signal = "metrics"
	case strings.HasPrefix(name, "logs_"):
		signal = "logs"
	default:
		return lensemu.Result{}, nil, errUnknownObject
	}
	res, resources, err := decodeOTLPJSON(signal, body)
	if err != nil {
		return res, nil, err
	}
	var ids []string
	for _, r := range resources {
		if v, _ := r.Resource().Attributes().Get("nemo.run.id"); v.AsString() != run {
			return res, nil, errWrongPrefix{run: v.AsString(), prefix: run}
		}
		if rs, ok := r.(ptrace.ResourceSpans); ok {
			for _, ss := range rs.ScopeSpans().All() {
				for _, sp := range ss.Spans().All() {
					id := sp.SpanID()
					ids = append(ids, hex.EncodeToString(id[:]))
				}
			}
		}
	}
	return res, ids, nil
}

// ackedJob is mixedJob with every rank recording the span ids the
// collector acknowledged in the returned log.
func ackedJob(c *testcollector.Collector, runID string, worldSize, steps int) ([]lensemu.Rank, *lensemu.AckLog) {
	acked := lensemu.NewAckLog()
	ranks := mixedJob(c, runID, worldSize, steps)
	for i := range ranks {
		ranks[i].Acked = acked
	}
	return ranks, acked
}

// requireAccounted fails the test unless every acknowledged span id is in
// delivered or lettered, and reports the duplicates.
func requireAccounted(t *testing.T, what string, acked *lensemu.AckLog, delivered map[string]int, lettered map[string][]string) {
	t.Helper()
	ids := hexIDs(acked)
	missing, duplicates := accounted(ids, delivered, lettered)
	if len(missing) > 0 {
		t.Fatalf("%s: %d of %d acknowledged span ids missing, e.g. %s", what, len(missing), len(ids), missing[0])
	}
	t.Logf("%s: all %d acknowledged span ids there; duplicates: %d", what, len(ids), duplicates)
}

var errUnknownObject = errString("not a traces_, metrics_ or logs_ object")

// decodeOTLPJSON decodes one OTLP/JSON export request of signal (traces,
// metrics, logs), as the otlpjsonfile receiver does, and counts its items.
func decodeOTLPJSON(signal string, body []byte) (lensemu.Result, []pcommonResource, error) {
	var res lensemu.Result
	var resources []pcommonResource
	switch signal {
	case "traces":
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return res, nil, err
		}
		res.Spans = int64(td.SpanCount())
		for _, rs := range td.ResourceSpans().All() {
			resources = append(resources, rs)
		}
	case "metrics":
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(body)
		if err != nil {
			return res, nil, err
		}
		res.DataPoints = int64(md.DataPointCount())
		for _, rm := range md.ResourceMetrics().All() {
			resources = append(resources, rm)
		}
	case "logs":
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
		if err != nil {
			return res, nil, err
		}
		res.LogRecords = int64(ld.LogRecordCount())
		for _, rl := range ld.ResourceLogs().All() {
			resources = append(resources, rl)
		}
	}
	return res, resources, nil
}

type errString string

func (e errString) Error() string { return string(e) }

type errWrongPrefix struct{ run, prefix string }

func (e errWrongPrefix) Error() string {
	return "a resource of run " + strconv.Quote(e.run) + " under the prefix of run " + strconv.Quote(e.prefix)
}

// TestS3ArchiveOverlay: the default preset with configs/overlays/s3-archive.yaml
// against a real S3 server (versitygw). Two runs: every acknowledged span,
// data point and log record is in the bucket under its run's prefix,
// gzip-compressed OTLP/JSON, nothing more; the second run is sent while the
// server is down (stopped mid-run), and once it is back everything the
// collector acknowledged meanwhile arrives from the persistent queue.
func TestS3ArchiveOverlay(t *testing.T) {
	s3 := startS3(t)
	env, overlay := s3ArchiveEnv(t, s3)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env, Args: []string{overlay}})

	jobA, ackedA := ackedJob(c, "run-s3-a", 2, 3)
	sentA := runJob(t, jobA)
	waitFor(t, deliveryTimeout, "run-s3-a in the bucket", func() bool { return s3.objects(t)["run-s3-a"] == sentA })
	requireAccounted(t, "run-s3-a in the bucket", ackedA, s3.spanIDs(t, "run-s3-a"), nil)

	s3.stop(t)
	jobB, ackedB := ackedJob(c, "run-s3-b", 4, 3)
	sentB := runJob(t, jobB)
	t.Logf("acknowledged while the S3 server was down: %s", describe(sentB))
	time.Sleep(2 * time.Second) // the exporter fails and retries meanwhile
	if got := s3.objects(t)["run-s3-b"]; got != (lensemu.Result{}) {
		t.Fatalf("run-s3-b reached the bucket while its server was down (%s): the test did not stop it", describe(got))
	}
	s3.start(t)
	waitFor(t, redeliveryTimeout, "run-s3-b in the bucket after the server's restart", func() bool { return s3.objects(t)["run-s3-b"] == sentB })
	requireAccounted(t, "run-s3-b in the bucket after the server's restart", ackedB, s3.spanIDs(t, "run-s3-b"), nil)
	c.Stop()

	got := s3.objects(t)
	if len(got) != 2 || got["run-s3-a"] != sentA || got["run-s3-b"] != sentB {
		t.Errorf("bucket holds %v; acknowledged run-s3-a %s, run-s3-b %s", got, describe(sentA), describe(sentB))
	}
}

// s3ArchiveEnv is the s3-archive overlay's environment for s3, and the
// overlay's --config argument.
func s3ArchiveEnv(t *testing.T, s3 *s3Server) (map[string]string, string) {
	env := testEnv(t)
	env["NEMO_S3_BUCKET"] = s3Bucket
	env["NEMO_S3_ENDPOINT"] = s3.endpoint()
	env["NEMO_S3_FORCE_PATH_STYLE"] = "true"
	env["NEMO_S3_FLUSH_INTERVAL"] = "1s"
	env["AWS_ACCESS_KEY_ID"] = s3Access
	env["AWS_SECRET_ACCESS_KEY"] = s3Secret
	// Nothing but the environment's keys: no instance-metadata lookups.
	env["AWS_EC2_METADATA_DISABLED"] = "true"
	return env, "--config=" + filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "s3-archive.yaml")
}

// s3Letters counts the items of a run's nemo_awss3/archive dead letters,
// each line decoded as the otlpjsonfile receiver does, and their reasons.
func s3Letters(t *testing.T, dir, run string) (lensemu.Result, map[string]int) {
	t.Helper()
	var res lensemu.Result
	reasons := map[string]int{}
	for _, signal := range []string{"traces", "metrics", "logs"} {
		raw, err := os.ReadFile(filepath.Join(dir, run, "dead-letters", "nemo_awss3_archive", signal+".jsonl"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(raw) {
			items, resources, err := decodeOTLPJSON(signal, line)
			if err != nil {
				t.Fatalf("%s: %v", signal, err)
			}
			res = res.Add(items)
			for _, r := range resources {
				v, _ := r.Resource().Attributes().Get("nemo.dead_letter.reason")
				reasons[v.Str()]++
			}
		}
	}
	return res, reasons
}

// pcommonResource is a ResourceSpans, ResourceMetrics or ResourceLogs.
type pcommonResource interface{ Resource() pcommon.Resource }

// TestS3ArchiveBucketMissingIsDeadLettered: the bucket does not exist
// (NoSuchBucket, a 404 no retry changes) while a run is archived. Every
// acknowledged item of it is in the run's dead-letter file, reason
// refused, at once rather than after the retry window; once the bucket
// exists, configs/replay.yaml sends the letters to the collector's OTLP
// endpoint and its archive puts every one in the bucket. The stock awss3
// exporter retried for 30 minutes and then dropped them.
func TestS3ArchiveBucketMissingIsDeadLettered(t *testing.T) {
	s3 := startS3(t)
	bucket := filepath.Join(s3.dir, s3Bucket)
	if err := os.Remove(bucket); err != nil {
		t.Fatal(err)
	}
	env, overlay := s3ArchiveEnv(t, s3)
	// Every rank archived, also when replayed through the same pipelines.
	env["NEMO_RANK_STRATEGY"] = "all_ranks"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env, Args: []string{overlay}})

	job, acked := ackedJob(c, "run-s3-c", 2, 3)
	sent := runJob(t, job)
	var lettered lensemu.Result
	var reasons map[string]int
	waitFor(t, deliveryTimeout, "every acknowledged item of run-s3-c in its dead-letter file", func() bool {
		lettered, reasons = s3Letters(t, env["NEMO_TELEMETRY_DIR"], "run-s3-c")
		return lettered == sent
	})
	t.Logf("bucket missing: acknowledged %s, dead-lettered %s %v", describe(sent), describe(lettered), reasons)
	if len(reasons) != 1 || reasons["refused"] == 0 {
		t.Fatalf("letters' reasons %v: want refused (NoSuchBucket) only", reasons)
	}
	requireAccounted(t, "run-s3-c in its dead-letter file", acked, nil, deadLetters(t, env["NEMO_TELEMETRY_DIR"], "nemo_awss3_archive"))

	if err := os.Mkdir(bucket, 0o750); err != nil {
		t.Fatal(err)
	}
	renv := testEnv(t)
	renv["NEMO_TELEMETRY_DIR"] = env["NEMO_TELEMETRY_DIR"]
	renv["NEMO_REPLAY_FROM"] = "nemo_awss3_archive"
	renv["OTLP_BACKEND_ENDPOINT"] = "http://" + c.HTTPEndpoint()
	renv["OTLP_BACKEND_PROTOCOL"] = "http/protobuf"
	replay := testcollector.Start(t, testcollector.Config(t, "replay.yaml"), testcollector.Options{Env: renv})
	waitFor(t, deliveryTimeout, "run-s3-c in the bucket after the replay", func() bool { return s3.objects(t)["run-s3-c"] == sent })
	requireAccounted(t, "run-s3-c in the bucket after the replay", acked, s3.spanIDs(t, "run-s3-c"), nil)
	replay.Stop()
	c.Stop()
}
