// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package exportercheckconverter // import "github.com/nemo-lens/otelcol-nemo/confmap/converter/exportercheckconverter"

import (
	"maps"
	"slices"
	"strings"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"
)

// filterCounters are the metrics the filter processor counts its drops
// in, by the OTTL context of the condition.
var filterCounters = map[string]string{
	"span":       "otelcol_processor_filter_spans_filtered",
	"spanevent":  "otelcol_processor_filter_spans_filtered",
	"metric":     "otelcol_processor_filter_datapoints_filtered",
	"datapoint":  "otelcol_processor_filter_datapoints_filtered",
	"log_record": "otelcol_processor_filter_logs_filtered",
}

// warnDropAll warns about a filter processor, used in a pipeline, with a
// condition that is always true once the config's ${...} are expanded
// (`true`, `not false`: the otlp preset's metrics and logs switches when
// off): it drops everything its pipelines carry, after the receiver
// acknowledged it. Legitimate (a backend that takes traces only), but never
// silent: the start says so, once per processor, with the counter.
func (c converter) warnDropAll(conf *confmap.Conf) {
	processors, _ := conf.Get("processors").(map[string]any)
	used := pipelineProcessors(conf)
	for _, id := range slices.Sorted(maps.Keys(processors)) {
		if typ, _, _ := strings.Cut(id, "/"); typ != "filter" || !used[id] {
			continue
		}
		cfg, _ := processors[id].(map[string]any)
		for _, signal := range slices.Sorted(maps.Keys(cfg)) {
			contexts, _ := cfg[signal].(map[string]any)
			for _, ctx := range slices.Sorted(maps.Keys(contexts)) {
				conditions, _ := contexts[ctx].([]any)
				if !slices.ContainsFunc(conditions, alwaysTrue) {
					continue
				}
				c.logger.Warn("a filter processor drops every item of its pipelines (a condition is always true): "+
					"the senders were answered, the items are not sent on. Intended when a destination takes no such signal "+
					"(the otlp preset's OTLP_BACKEND_METRICS and OTLP_BACKEND_LOGS, false by default); otherwise remove the condition",
					zap.String("processor", id), zap.String("signal", signal), zap.String("context", ctx),
					zap.String("counted_in", filterCounters[ctx]))
			}
		}
	}
}

func alwaysTrue(condition any) bool {
	if b, ok := condition.(bool); ok {
		return b // YAML's unquoted true, a condition once decoded
	}
	s, _ := condition.(string)
	s = strings.Join(strings.Fields(s), " ")
	return s == "true" || s == "not false"
}

// pipelineProcessors are the processors some pipeline uses.
func pipelineProcessors(conf *confmap.Conf) map[string]bool {
	out := map[string]bool{}
	pipelines, _ := conf.Get("service::pipelines").(map[string]any)
	for _, p := range pipelines {
		cfg, _ := p.(map[string]any)
		list, _ := cfg["processors"].([]any)
		for _, id := range list {
			if s, ok := id.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}
