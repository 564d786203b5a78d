// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package weaveexporter sends traces to W&B Weave over OTLP/HTTP (protobuf).
//
// On top of a plain OTLP/HTTP exporter it routes every request to a single
// W&B entity/project, fills in entity/project defaults, links spans to a W&B
// run, renames attribute keys that Weave cannot store, splits large batches,
// explains every refusal from Weave in terms of the setting to fix, and
// dead-letters what Weave does not take (internal/deadletter), so a request
// leaves its queue only delivered or written to the run's dead-letter file.
package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"
