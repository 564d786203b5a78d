// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsreceiver // import "github.com/nemo-lens/otelcol-nemo/receiver/nemostepsreceiver"

import (
	"go.opentelemetry.io/collector/receiver"

	"github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"
)

// NewFactory returns the factory of the nemo_steps receiver. It is built
// by the processor's package: a receiver and the processor of the same
// name are one nemo_steps.
func NewFactory() receiver.Factory { return nemostepsprocessor.NewReceiverFactory() }
