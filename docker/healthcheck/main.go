// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Command healthcheck is the container image's HEALTHCHECK: the image is
// FROM scratch, so there is no shell, curl or wget to probe the collector with.
// It GETs the collector's health_check extension and exits 0 when it answers
// 2xx, 1 otherwise (unreachable, timeout, or any other status).
//
// The URL is http://127.0.0.1:$HEALTH_CHECK_PORT/ (13133 when the variable is
// unset), the same variable the presets bind health_check to; an argument
// overrides it:
//
//	healthcheck [URL]
//
// It is built with CGO_ENABLED=0 from the standard library only, so the binary
// is static and runs in an empty image.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// timeout bounds the whole probe; Docker's own --timeout is a backstop.
const timeout = 3 * time.Second

const defaultPort = 13133

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run probes the URL chosen from args and getenv, reports a failure on
// stderr, and returns the process exit code.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	url, err := target(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "healthcheck: %v\n", err)
		return 2
	}
	if err := probe(url); err != nil {
		fmt.Fprintf(stderr, "healthcheck: %s: %v\n", url, err)
		return 1
	}
	return 0
}

// target returns the URL to probe: the only argument when given, else the
// loopback health_check endpoint on $HEALTH_CHECK_PORT.
func target(args []string, getenv func(string) string) (string, error) {
	switch len(args) {
	case 0:
	case 1:
		return args[0], nil
	default:
		return "", fmt.Errorf("usage: healthcheck [URL], got %d arguments", len(args))
	}
	port := defaultPort
	if s := getenv("HEALTH_CHECK_PORT"); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 || p > 65535 {
			return "", fmt.Errorf("HEALTH_CHECK_PORT must be a port number in [1,65535], got %q", s)
		}
		port = p
	}
	return fmt.Sprintf("http://127.0.0.1:%d/", port), nil
}

// probe GETs url and fails unless it answers 2xx within timeout.
func probe(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	// No proxy: the collector is on loopback, and HTTP_PROXY may be set in the
	// container's environment for the exporters.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("unhealthy: status %s", resp.Status)
	}
	return nil
}
