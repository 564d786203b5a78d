// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stragglers // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"

import (
	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// keep moves a held span into the output as kept, marked with the reason
// and the rank's scores. It reports whether its chunk holds nothing more.
func keep(out *steps.Output, h steps.Held, score stepbusy.Score) bool {
	dst, emptied := out.Add(h)
	attrs := dst.Attributes()
	attrs.PutStr(attrkey.KeptReason, attrkey.KeptStraggler)
	attrs.PutDouble(attrkey.RelativeScore, stepbusy.Round3(score.Relative))
	attrs.PutDouble(attrkey.IndividualScore, stepbusy.Round3(score.Individual))
	return emptied
}
