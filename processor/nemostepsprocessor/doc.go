// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

//go:generate ../../.tools/mdatagen metadata.yaml

// Package nemostepsprocessor is nemo_steps: a processor that reads every
// span of a traces pipeline, unchanged, and the receiver of the same name
// (NewReceiverFactory, registered by receiver/nemostepsreceiver) through
// which what it finds leaves. It turns the step spans of training ranks into
// metrics: for every rank and step its duration, busy time (the step minus
// the time spent waiting for the other ranks), wait time and straggler
// scores, and per run a count of straggler rank steps; it finds stalled runs
// and accounts goodput. It scores ranks with the same code as
// rank_strategy's straggler retention (internal/stepbusy), so that the
// metrics and the kept traces agree on who straggled.
package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"
