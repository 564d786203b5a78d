// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemostepsprocessor turns the step spans of training ranks into
// metrics: for every rank and step its duration, busy time (the step minus
// the time spent waiting for the other ranks), wait time and straggler
// scores, and per run a count of straggler rank steps. It scores ranks with
// the same code as rank_strategy's straggler retention (internal/stepbusy),
// so that the metrics and the kept traces agree on who straggled.
package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"
