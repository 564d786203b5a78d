// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemoawss3exporter is contrib's awss3 exporter behind a delivery
// that never drops: its sending queue (persistent, with a storage) holds an
// item until the bucket has it or it is written to a dead-letter file of
// its run (internal/deadletter), for a refusal no retry changes or a retry
// window that ran out. The stock exporter drops both after the answer.
package nemoawss3exporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter"
