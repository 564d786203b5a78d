// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemootlpexporter sends OTLP over gRPC or HTTP from exporterhelper's
// (persistent) sending queue, and lets an item leave that queue only
// delivered or written to a dead-letter file: a permanent refusal (401, 403,
// 400, a non-retryable gRPC code), a partial success (the backend answered
// 2xx but rejected items) and a request still failing when the retry window
// runs out are each written, fsynced, as OTLP JSON lines to
// <directory>/<run>/dead-letters/<exporter id>/<signal>.jsonl, with the
// reason, counted and logged. The stock otlp_grpc and otlp_http exporters
// drop all three after the collector acknowledged the data.
package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"
