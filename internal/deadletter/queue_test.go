// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package deadletter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestQueueLoggerRaisesAndCountsTheQueuesLosses(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	lost := 0
	logger := QueueLogger(zap.New(core), func() { lost++ }).With(zap.String("exporter", "nemo_otlp"))

	logger.Debug("Failed to dispatch item", zap.Error(assert.AnError))
	logger.Warn("Failed unmarshalling item", zap.String("key", "7"))
	logger.Debug("Checking if there are items left for dispatch by consumers")
	logger.Info("Loaded queue metadata")

	assert.Equal(t, 2, lost)
	all := logs.All()
	require.Len(t, all, 3, "other DEBUG entries stay below the level")
	for _, e := range all[:2] {
		assert.Equal(t, zapcore.ErrorLevel, e.Level)
		assert.Contains(t, e.Message, "An item of the persistent queue could not be read and is lost")
		assert.Equal(t, "nemo_otlp", e.ContextMap()["exporter"])
	}
	assert.Contains(t, all[0].Message, "(Failed to dispatch item)")
	assert.Equal(t, "Loaded queue metadata", all[2].Message)
}
