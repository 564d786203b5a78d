// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"fmt"
	"strings"
)

// checkPlaintextScheme refuses an http:// endpoint under TLS. configgrpc
// dials host:port with TLS unless tls.insecure is true, whatever the scheme
// says; the SDKs (and our presets) read http:// as "no TLS".
func checkPlaintextScheme(id string, cfg map[string]any) []error {
	endpoint, _ := cfg["endpoint"].(string)
	if !strings.HasPrefix(endpoint, "http://") || insecure(cfg) {
		return nil
	}
	return []error{fmt.Errorf("exporters::%s::endpoint %q says no TLS (http://) but tls.insecure is not true, so the exporter would speak TLS to it "+
		"and every export would fail with \"tls: first record does not look like a TLS handshake\": "+
		"set `tls: {insecure: true}` for a plaintext receiver, or write https:// (or host:port) for a TLS one", id, endpoint)}
}

// checkLoadBalancing applies checkPlaintextScheme to every static backend
// of a load_balancing exporter's otlp protocol (the agent preset's
// GATEWAY_ENDPOINTS): each becomes an otlp_grpc exporter with that endpoint.
func checkLoadBalancing(id string, cfg map[string]any) []error {
	otlp, _ := lookup(cfg, "protocol", "otlp").(map[string]any)
	hostnames, _ := lookup(cfg, "resolver", "static", "hostnames").([]any)
	var errs []error
	if name, _ := lookup(cfg, "resolver", "dns", "hostname").(string); strings.Contains(name, "://") {
		errs = append(errs, fmt.Errorf("exporters::%s::resolver::dns::hostname %q is a URL: the dns resolver looks up a host name; "+
			"write the name alone and the port under resolver::dns::port", id, name))
	}
	for _, h := range hostnames {
		s, _ := h.(string)
		backend := map[string]any{"endpoint": s, "tls": otlp["tls"]}
		errs = append(errs, checkPlaintextScheme(id+"::protocol::otlp (resolver::static::hostnames)", backend)...)
	}
	return errs
}

// insecure reads tls.insecure as the collector would: a bool, or the
// string an unexpanded-type source left.
func insecure(cfg map[string]any) bool {
	switch v := lookup(cfg, "tls", "insecure").(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

func lookup(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
