// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemoviewexporter serves a page per training run over HTTP: where
// the run's time went (goodput), every rank's busy time per step as a
// heatmap, the straggler steps and the stalls, live. It reads the public
// outputs of the nemo_steps connector (its step metrics and its stall and
// goodput records) and keeps a bounded window of each run in memory.
package nemoviewexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoviewexporter"
