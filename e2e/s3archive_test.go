// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
		got, err := readObject(path, run)
		if err != nil {
			t.Errorf("object %s: %v", key, err)
			return nil
		}
		r := byRun[run]
		r.Spans += got.Spans
		r.DataPoints += got.DataPoints
		r.LogRecords += got.LogRecords
		byRun[run] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return byRun
}

// readObject decodes one gzip-compressed OTLP/JSON object, checks every
// resource in it belongs to the run its key names, and counts its items.
func readObject(path, run string) (lensemu.Result, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return lensemu.Result{}, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return lensemu.Result{}, err
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		return lensemu.Result{}, err
	}
	var res lensemu.Result
	var runs []string
	switch name := filepath.Base(path); {
	case strings.HasPrefix(name, "traces_"):
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		if err != nil {
			return res, err
		}
		res.Spans = int64(td.SpanCount())
		for _, rs := range td.ResourceSpans().All() {
			v, _ := rs.Resource().Attributes().Get("nemo.run.id")
			runs = append(runs, v.AsString())
		}
	case strings.HasPrefix(name, "metrics_"):
		md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(body)
		if err != nil {
			return res, err
		}
		res.DataPoints = int64(md.DataPointCount())
		for _, rm := range md.ResourceMetrics().All() {
			v, _ := rm.Resource().Attributes().Get("nemo.run.id")
			runs = append(runs, v.AsString())
		}
	case strings.HasPrefix(name, "logs_"):
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
		if err != nil {
			return res, err
		}
		res.LogRecords = int64(ld.LogRecordCount())
		for _, rl := range ld.ResourceLogs().All() {
			v, _ := rl.Resource().Attributes().Get("nemo.run.id")
			runs = append(runs, v.AsString())
		}
	default:
		return res, errUnknownObject
	}
	for _, r := range runs {
		if r != run {
			return res, errWrongPrefix{run: r, prefix: run}
		}
	}
	return res, nil
}

var errUnknownObject = errString("not a traces_, metrics_ or logs_ object")

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
	env := testEnv(t)
	env["NEMO_S3_BUCKET"] = s3Bucket
	env["NEMO_S3_ENDPOINT"] = s3.endpoint()
	env["NEMO_S3_FORCE_PATH_STYLE"] = "true"
	env["NEMO_S3_FLUSH_INTERVAL"] = "1s"
	env["AWS_ACCESS_KEY_ID"] = s3Access
	env["AWS_SECRET_ACCESS_KEY"] = s3Secret
	// Nothing but the environment's keys: no instance-metadata lookups.
	env["AWS_EC2_METADATA_DISABLED"] = "true"
	overlay := "--config=" + filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "s3-archive.yaml")
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env, Args: []string{overlay}})

	sentA := runJob(t, mixedJob(c, "run-s3-a", 2, 3))
	waitFor(t, deliveryTimeout, "run-s3-a in the bucket", func() bool { return s3.objects(t)["run-s3-a"] == sentA })

	s3.stop(t)
	sentB := runJob(t, mixedJob(c, "run-s3-b", 4, 3))
	t.Logf("acknowledged while the S3 server was down: %s", describe(sentB))
	time.Sleep(2 * time.Second) // the exporter fails and retries meanwhile
	if got := s3.objects(t)["run-s3-b"]; got != (lensemu.Result{}) {
		t.Fatalf("run-s3-b reached the bucket while its server was down (%s): the test did not stop it", describe(got))
	}
	s3.start(t)
	waitFor(t, redeliveryTimeout, "run-s3-b in the bucket after the server's restart", func() bool { return s3.objects(t)["run-s3-b"] == sentB })
	c.Stop()

	got := s3.objects(t)
	if len(got) != 2 || got["run-s3-a"] != sentA || got["run-s3-b"] != sentB {
		t.Errorf("bucket holds %v; acknowledged run-s3-a %s, run-s3-b %s", got, describe(sentA), describe(sentB))
	}
}
