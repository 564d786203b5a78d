// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemostepsreceiver is the nemo_steps receiver: the metrics and
// logs pipelines it is listed in get what the nemo_steps processor of the
// same name finds in the traces (step metrics, stall gauges and records,
// goodput). It has no settings; the processor has them all, and the
// processor's package holds the code (see its README).
package nemostepsreceiver // import "github.com/nemo-lens/otelcol-nemo/receiver/nemostepsreceiver"
