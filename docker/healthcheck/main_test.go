// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTarget(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{name: "default port", want: "http://127.0.0.1:13133/"},
		{name: "port from env", env: map[string]string{"HEALTH_CHECK_PORT": "14000"}, want: "http://127.0.0.1:14000/"},
		{name: "argument wins", args: []string{"http://127.0.0.1:1/x"}, env: map[string]string{"HEALTH_CHECK_PORT": "14000"}, want: "http://127.0.0.1:1/x"},
		{name: "bad port", env: map[string]string{"HEALTH_CHECK_PORT": "http"}, wantErr: `HEALTH_CHECK_PORT must be a port number in [1,65535], got "http"`},
		{name: "port out of range", env: map[string]string{"HEALTH_CHECK_PORT": "70000"}, wantErr: "HEALTH_CHECK_PORT must be a port number"},
		{name: "two arguments", args: []string{"a", "b"}, wantErr: "usage: healthcheck [URL], got 2 arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := target(tt.args, env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("target() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("target() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "HEALTH_CHECK_PORT" {
			return port
		}
		return ""
	}

	var stderr bytes.Buffer
	if code := run(nil, getenv, &stderr); code != 0 {
		t.Fatalf("healthy server: exit %d, stderr %q", code, stderr.String())
	}

	status = http.StatusServiceUnavailable
	stderr.Reset()
	if code := run(nil, getenv, &stderr); code != 1 {
		t.Fatalf("503: exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "503") {
		t.Fatalf("503: stderr %q does not name the status", stderr.String())
	}

	srv.Close()
	stderr.Reset()
	if code := run(nil, getenv, &stderr); code != 1 {
		t.Fatalf("server down: exit %d, want 1", code)
	}

	stderr.Reset()
	if code := run(nil, func(string) string { return "0" }, &stderr); code != 2 {
		t.Fatalf("bad HEALTH_CHECK_PORT: exit %d, want 2", code)
	}
}
