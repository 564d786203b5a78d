// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package exportercheckconverter refuses, when a config is loaded (so both
// `otelcol-nemo validate` and the start fail), exporter settings that the
// collector accepts but that can never deliver anything:
//
//   - an otlp_http (otlphttp) exporter (or a nemo_otlp exporter's http
//     client) whose `endpoint` already ends in
//     /v1/traces, /v1/metrics or /v1/logs: the exporter appends the signal's
//     path to `endpoint`, so it sends to .../v1/traces/v1/traces and every
//     request gets a 404. The per-signal `traces_endpoint` (and
//     `metrics_endpoint`, `logs_endpoint`) is sent as written;
//   - a `jaeger` exporter, defined or only named in a pipeline: it was
//     removed from the collector, since Jaeger receives OTLP itself; the
//     otlp_grpc exporter replaces it;
//   - a `nemo_steps` connector: nemo_steps is a processor and a receiver
//     of the same name now; the error says where its settings go;
//   - an OTLP exporter (otlp_grpc, otlp_http, nemo_otlp) whose endpoint is this collector's own OTLP receiver:
//     every item would loop back into the collector forever. It happens when
//     a preset reads the job's OTEL_EXPORTER_OTLP_ENDPOINT in a shell shared
//     with the training job;
//   - an otlp_grpc exporter (or a load_balancing exporter's otlp protocol,
//     alone or in a spool exporter, or a nemo_otlp exporter's grpc client)
//     whose endpoint is an http:// URL while tls.insecure is not true:
//     configgrpc would speak TLS to a plaintext receiver and every export
//     would fail with "tls: first record does not look like a TLS
//     handshake". The OpenTelemetry SDKs read http:// as "no TLS"; so do our
//     presets (${grpcinsecure:...}).
//
// It also warns (the start goes on) about a stock `file` exporter whose
// directory does not exist and that does not set create_directory: the
// exporter would fail at start with "no such file or directory", after
// `validate` passed; and about a persistent queue in a file_storage
// directory that no exporter of the config opens (renamed, removed, or a
// spool with fewer slots): what it holds would never be sent; and about a
// filter processor in a pipeline whose condition is always true: it drops,
// after the answer, everything its pipelines carry.
//
// The collector's own config validation cannot see these: the values are
// well-formed. A converter runs on every config the binary loads, presets,
// overlays and user files alike, after ${...} references are expanded.
package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type converter struct {
	logger *zap.Logger
	// statDir reports whether a directory exists (a test seam).
	statDir func(string) bool
}

// NewFactory returns the factory of the converter.
//
// Its warnings go to stderr through a logger of its own, not the
// ConverterSettings one: the collector buffers that logger's lines until
// its telemetry is up, and `otelcol-nemo validate` never gets that far, so
// a warning meant for validate would be lost there.
func NewFactory() confmap.ConverterFactory {
	return confmap.NewConverterFactory(func(confmap.ConverterSettings) confmap.Converter {
		enc := zap.NewProductionEncoderConfig()
		enc.EncodeTime = zapcore.ISO8601TimeEncoder // as the collector's own lines
		stderr := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zap.WarnLevel)
		return converter{logger: zap.New(stderr), statDir: dirExists}
	})
}

func (c converter) Convert(_ context.Context, conf *confmap.Conf) error {
	exporters, _ := conf.Get("exporters").(map[string]any)
	own := ownEndpoints(conf)
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(exporters)) {
		cfg, _ := exporters[id].(map[string]any)
		typ, _, _ := strings.Cut(id, "/")
		switch typ {
		case "jaeger", "jaeger_thrift":
			errs = append(errs, fmt.Errorf("exporters::%s: the collector has no %s exporter any more: Jaeger receives OTLP itself. "+
				"Use an otlp_grpc exporter instead, e.g. `otlp_grpc/jaeger: {endpoint: jaeger:4317, tls: {insecure: true}}`", id, typ))
		case "otlphttp", "otlp_http":
			errs = append(errs, checkHTTPEndpoint(id, cfg)...)
			errs = append(errs, checkLoop(id, cfg, own, "http")...)
		case "otlp", "otlp_grpc":
			errs = append(errs, checkLoop(id, cfg, own, "grpc")...)
			errs = append(errs, checkPlaintextScheme(id, cfg)...)
		case "load_balancing", "loadbalancing":
			errs = append(errs, checkLoadBalancing(id, cfg)...)
		case "nemo_otlp":
			errs = append(errs, checkNemoOTLP(id, cfg, own)...)
		case "spool":
			lb, _ := cfg["load_balancing"].(map[string]any)
			errs = append(errs, checkLoadBalancing(id+"::load_balancing", lb)...)
		case "file":
			c.warnMissingDirectory(id, cfg)
		}
	}
	errs = append(errs, undefinedJaeger(conf, exporters)...)
	errs = append(errs, movedNemoSteps(conf)...)
	c.warnStrandedQueues(conf, exporters)
	c.warnDropAll(conf)
	return errors.Join(errs...)
}

// undefinedJaeger refuses a pipeline that names a jaeger exporter without
// defining it (the NeMo Lens docs' file example does): the collector would
// only say the exporter "is not configured", not that it no longer exists.
func undefinedJaeger(conf *confmap.Conf, exporters map[string]any) []error {
	pipelines, _ := conf.Get("service::pipelines").(map[string]any)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(pipelines)) {
		p, _ := pipelines[name].(map[string]any)
		ids, _ := p["exporters"].([]any)
		for _, v := range ids {
			id, _ := v.(string)
			typ, _, _ := strings.Cut(id, "/")
			if _, defined := exporters[id]; !defined && (typ == "jaeger" || typ == "jaeger_thrift") {
				errs = append(errs, fmt.Errorf("service::pipelines::%s::exporters names %s: the collector has no %s exporter any more: Jaeger receives OTLP itself. "+
					"Define an otlp_grpc exporter for it instead, e.g. `otlp_grpc/jaeger: {endpoint: jaeger:4317, tls: {insecure: true}}`, and name that", name, id, typ))
			}
		}
	}
	return errs
}

var signalPaths = []string{"traces", "metrics", "logs"}

// checkNemoOTLP checks the client nemo_otlp's protocol picks as the stock
// exporter of that protocol is checked: grpc as otlp_grpc, http/* as
// otlp_http.
func checkNemoOTLP(id string, cfg map[string]any, own map[string][]string) []error {
	protocol, _ := cfg["protocol"].(string)
	if protocol == "" || protocol == "grpc" {
		grpc, _ := cfg["grpc"].(map[string]any)
		return append(checkLoop(id+"::grpc", grpc, own, "grpc"), checkPlaintextScheme(id+"::grpc", grpc)...)
	}
	http, _ := cfg["http"].(map[string]any)
	return append(checkHTTPEndpoint(id+"::http", http), checkLoop(id+"::http", http, own, "http")...)
}

func checkHTTPEndpoint(id string, cfg map[string]any) []error {
	endpoint, _ := cfg["endpoint"].(string)
	trimmed := strings.TrimRight(endpoint, "/")
	for _, signal := range signalPaths {
		if base, ok := strings.CutSuffix(trimmed, "/v1/"+signal); ok {
			return []error{fmt.Errorf("exporters::%s::endpoint %q already ends in /v1/%s, and the exporter appends /v1/<signal> to `endpoint`: "+
				"it would send to %s/v1/%s and get 404. Set `%s_endpoint: %q` (sent as written) instead of `endpoint`, or `endpoint: %q`",
				id, endpoint, signal, trimmed, signal, signal, endpoint, base)}
		}
	}
	return nil
}

// ownEndpoints are the host:port pairs the otlp receivers listen on, by
// protocol (grpc, http).
func ownEndpoints(conf *confmap.Conf) map[string][]string {
	own := map[string][]string{}
	receivers, _ := conf.Get("receivers").(map[string]any)
	for id, raw := range receivers {
		if typ, _, _ := strings.Cut(id, "/"); typ != "otlp" {
			continue
		}
		cfg, _ := raw.(map[string]any)
		protocols, _ := cfg["protocols"].(map[string]any)
		for _, proto := range []string{"grpc", "http"} {
			if p, ok := protocols[proto].(map[string]any); ok {
				if ep, _ := p["endpoint"].(string); ep != "" {
					own[proto] = append(own[proto], ep)
				}
			}
		}
	}
	return own
}

func checkLoop(id string, cfg map[string]any, own map[string][]string, proto string) []error {
	var endpoints []string
	for _, key := range []string{"endpoint", "traces_endpoint", "metrics_endpoint", "logs_endpoint"} {
		if ep, _ := cfg[key].(string); ep != "" {
			endpoints = append(endpoints, ep)
		}
	}
	for _, ep := range endpoints {
		host, port, ok := hostPort(ep)
		if !ok {
			continue
		}
		for _, recv := range own[proto] {
			rhost, rport, ok := hostPort(recv)
			if ok && port == rport && sameHost(host, rhost) {
				return []error{fmt.Errorf("exporters::%s: endpoint %q is this collector's own OTLP receiver (%s): everything it exports would come back in. "+
					"Point it at the backend; if the value came from OTEL_EXPORTER_OTLP_ENDPOINT, that is the training job's variable for reaching this collector: "+
					"use the preset's own variable instead", id, ep, recv)}
			}
		}
	}
	return nil
}

// hostPort reads "host:port" or a URL; the port defaults to the scheme's.
func hostPort(endpoint string) (string, string, bool) {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return "", "", false
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		return u.Hostname(), port, port != ""
	}
	host, port, err := net.SplitHostPort(endpoint)
	return host, port, err == nil
}

// sameHost: a receiver on a wildcard address or a loopback name answers any
// loopback address.
func sameHost(exporterHost, receiverHost string) bool {
	if exporterHost == receiverHost {
		return true
	}
	return isLocal(exporterHost) && (isLocal(receiverHost) || receiverHost == "" || receiverHost == "0.0.0.0" || receiverHost == "::")
}

func isLocal(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
