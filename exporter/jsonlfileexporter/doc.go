// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package jsonlfileexporter writes traces, metrics and logs to local files as
// strict JSON Lines: one self-contained JSON object per span, per metric data
// point and per log record, so that `jq` and line-oriented importers work on
// the files directly. Span records use the keys of the NeMo Lens in-process
// span exporter, so existing scripts keep working when capture moves into the
// collector.
package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"
