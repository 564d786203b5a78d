// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package configtest reads a component's test configurations the way the
// collector reads a config file: the entry named by a component ID in the
// package's testdata/config.yaml, unmarshaled into the component's config
// and validated.
package configtest // import "github.com/nemo-lens/otelcol-nemo/internal/testing/configtest"

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load unmarshals the entry id of testdata/config.yaml into cfg and, when
// that succeeds, validates cfg with every Validate method it holds, as the
// collector does at start. It returns the error the collector would report.
func Load(tb testing.TB, id component.ID, cfg component.Config) error {
	tb.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(tb, err)
	sub, err := cm.Sub(id.String())
	require.NoError(tb, err)
	if err := sub.Unmarshal(cfg); err != nil {
		return err
	}
	return confmap.Validate(cfg)
}
