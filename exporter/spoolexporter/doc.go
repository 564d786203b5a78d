// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package spoolexporter holds what it is given on the node's disk, a
// journal per run slot (internal/journal), and sends each run's items to the gateway
// its run hashes to through contrib's load_balancing exporter.
//
// The agent tier's acknowledgement: a rank is answered once its request is
// fsynced into its run's slot, so a slow, frozen, down or full gateway
// never blocks the ranks (whose OTLP SDKs retry only inside a 10 s export
// timeout and drop what their 2,048-span queue cannot hold meanwhile), and
// a run whose gateway is unreachable does not hold up the other runs of the
// node (their slots have their own queues and consumers).
package spoolexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter"
