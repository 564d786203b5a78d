// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

// movedNemoSteps refuses a nemo_steps connector, naming where its settings
// go: nemo_steps is a processor (every setting) and a receiver of the same
// name (its outputs) since the connector made the collector copy every
// batch for the pipeline that drops ranks. Without this, the collector
// only says that a connector of type nemo_steps is unknown.
func movedNemoSteps(conf *confmap.Conf) []error {
	connectors, _ := conf.Get("connectors").(map[string]any)
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(connectors)) {
		if typ, _, _ := strings.Cut(id, "/"); typ != "nemo_steps" {
			continue
		}
		errs = append(errs, fmt.Errorf("connectors::%s: nemo_steps is a processor and a receiver now, not a connector: "+
			"move its settings to processors::%s and list that processor in the traces pipeline, before rank_strategy "+
			"(it takes the place of the pipeline that exported to %s and forward); add receivers::%s: {} "+
			"and keep %s in the receivers of the metrics and logs pipelines it feeds", id, id, id, id, id))
	}
	return errs
}
