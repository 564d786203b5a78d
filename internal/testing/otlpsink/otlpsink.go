// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package otlpsink is the fake OTLP backend of the tests and benchmarks: it
// listens on 127.0.0.1 for OTLP/HTTP (Start) or OTLP/gRPC (StartGRPC),
// decodes real OTLP requests (protobuf or JSON, gzip or not) for traces,
// metrics and logs, records what arrived with the request headers, and
// answers what the test tells it to.
package otlpsink // import "github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"

import (
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Signal names used in Request.Signal.
const (
	Traces  = "traces"
	Metrics = "metrics"
	Logs    = "logs"
)

// Request is one decoded export request.
type Request struct {
	// Path is the URL path, or the full gRPC method name
	// (/opentelemetry.proto.collector.trace.v1.TraceService/Export).
	Path   string
	Signal string
	// Header holds the HTTP headers, or the incoming gRPC metadata.
	Header http.Header
	// Exactly one of these is set, by Signal.
	Traces  ptrace.Traces
	Metrics pmetric.Metrics
	Logs    plog.Logs
}

// Items is the number of spans, data points or log records in the request.
func (r Request) Items() int {
	switch r.Signal {
	case Traces:
		return r.Traces.SpanCount()
	case Metrics:
		return r.Metrics.DataPointCount()
	default:
		return r.Logs.LogRecordCount()
	}
}

// Respond decides the answer to a decoded request: an HTTP status and body.
// Returning 0 answers 200 with an empty OTLP response. Requests answered
// with anything but 200 are not kept. Over gRPC the status becomes a gRPC
// code (see grpcCode), a 200 body is the export response (e.g. one with a
// partial success) and header is not used.
type Respond func(Request) (status int, header http.Header, body []byte)

// Sink is a running fake backend.
type Sink struct {
	URL  string // http://127.0.0.1:port (OTLP/HTTP)
	Addr string // 127.0.0.1:port

	stop      func()
	mu        sync.Mutex
	kept      []Request
	refused   int
	discarded atomic.Int64
	discard   atomic.Bool
	respond   Respond
	signalOf  func(path string) string
}

// Start listens on a free 127.0.0.1 port. signalOf maps a request path to a
// signal ("" refuses the path with 404); nil uses the OTLP paths
// (/v1/traces, /v1/metrics, /v1/logs, under any prefix).
func Start(signalOf func(path string) string) (*Sink, error) {
	if signalOf == nil {
		signalOf = StandardPaths
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{URL: "http://" + l.Addr().String(), Addr: l.Addr().String(), signalOf: signalOf}
	// ReadHeaderTimeout only bounds a client that stalls while sending a
	// request's headers (waiting between requests does not count).
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: time.Minute}
	s.stop = func() { _ = srv.Close() }
	go func() { _ = srv.Serve(l) }()
	return s, nil
}

// StandardPaths maps .../v1/traces, .../v1/metrics and .../v1/logs to their signals.
func StandardPaths(path string) string {
	for _, sig := range []string{Traces, Metrics, Logs} {
		if strings.HasSuffix(path, "/v1/"+sig) {
			return sig
		}
	}
	return ""
}

// SetRespond replaces the responder (nil: always 200).
func (s *Sink) SetRespond(r Respond) {
	s.mu.Lock()
	s.respond = r
	s.mu.Unlock()
}

// SetDiscard, for benchmarks, makes the OTLP/HTTP sink read each request on
// a known path to its end and answer 200 with an empty response, without
// decoding or keeping it: the sink then costs the machine little beside the
// collector being measured. Discarded counts those requests.
func (s *Sink) SetDiscard(on bool) { s.discard.Store(on) }

// Discarded is the number of requests read and dropped in discard mode.
func (s *Sink) Discarded() int { return int(s.discarded.Load()) }

// Close stops the server.
func (s *Sink) Close() error {
	s.stop()
	return nil
}

// Requests returns the requests answered 200 so far.
func (s *Sink) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.kept...)
}

// Refused is the number of requests answered with an error status.
func (s *Sink) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Count sums the items of the kept requests of one signal.
func (s *Sink) Count(signal string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Signal == signal {
			n += r.Items()
		}
	}
	return n
}

func (s *Sink) serve(w http.ResponseWriter, req *http.Request) {
	signal := s.signalOf(req.URL.Path)
	if signal == "" || req.Method != http.MethodPost {
		http.Error(w, "no such OTLP endpoint: "+req.Method+" "+req.URL.Path, http.StatusNotFound)
		return
	}
	if s.discard.Load() {
		_, _ = io.Copy(io.Discard, req.Body)
		s.discarded.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(emptyResponse(signal))
		return
	}
	body, err := readBody(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r := Request{Path: req.URL.Path, Signal: signal, Header: req.Header.Clone()}
	isJSON := strings.HasPrefix(req.Header.Get("Content-Type"), "application/json")
	if !isJSON && req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unsupported content type "+req.Header.Get("Content-Type"), http.StatusUnsupportedMediaType)
		return
	}
	if err := decode(&r, body, isJSON); err != nil {
		http.Error(w, "decode "+signal+": "+err.Error(), http.StatusBadRequest)
		return
	}

	status, header, respBody := s.answer(r)
	maps.Copy(w.Header(), header)
	if respBody == nil && status == http.StatusOK {
		respBody = emptyResponse(signal)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	w.WriteHeader(status)
	_, _ = w.Write(respBody)
}

// answer asks the responder about a decoded request, keeps or counts it as
// refused, and returns the status (200 for the responder's 0).
func (s *Sink) answer(r Request) (int, http.Header, []byte) {
	s.mu.Lock()
	respond := s.respond
	s.mu.Unlock()
	status, header, body := 0, http.Header(nil), []byte(nil)
	if respond != nil {
		status, header, body = respond(r)
	}
	if status == 0 {
		status = http.StatusOK
	}
	s.mu.Lock()
	if status == http.StatusOK {
		s.kept = append(s.kept, r)
	} else {
		s.refused++
	}
	s.mu.Unlock()
	return status, header, body
}

func readBody(req *http.Request) ([]byte, error) {
	var r io.Reader = req.Body
	switch req.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer gz.Close()
		r = gz
	case "deflate":
		zr, err := zlib.NewReader(req.Body)
		if err != nil {
			return nil, fmt.Errorf("deflate: %w", err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("unsupported content encoding %q", req.Header.Get("Content-Encoding"))
	}
	return io.ReadAll(io.LimitReader(r, 256<<20))
}

func decode(r *Request, body []byte, isJSON bool) error {
	var err error
	switch r.Signal {
	case Traces:
		req := ptraceotlp.NewExportRequest()
		if isJSON {
			err = req.UnmarshalJSON(body)
		} else {
			err = req.UnmarshalProto(body)
		}
		r.Traces = req.Traces()
	case Metrics:
		req := pmetricotlp.NewExportRequest()
		if isJSON {
			err = req.UnmarshalJSON(body)
		} else {
			err = req.UnmarshalProto(body)
		}
		r.Metrics = req.Metrics()
	case Logs:
		req := plogotlp.NewExportRequest()
		if isJSON {
			err = req.UnmarshalJSON(body)
		} else {
			err = req.UnmarshalProto(body)
		}
		r.Logs = req.Logs()
	}
	return err
}

func emptyResponse(signal string) []byte {
	var b []byte
	switch signal {
	case Traces:
		b, _ = ptraceotlp.NewExportResponse().MarshalProto()
	case Metrics:
		b, _ = pmetricotlp.NewExportResponse().MarshalProto()
	default:
		b, _ = plogotlp.NewExportResponse().MarshalProto()
	}
	return b
}
