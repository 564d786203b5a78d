// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoawss3exporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter"

import (
	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/awss3exporter"
	"go.opentelemetry.io/collector/confmap"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

const deadLetterKey = "dead_letter"

// Config is the awss3 exporter's configuration, every key as there
// (s3uploader, marshaler, resource_attrs_to_s3, timeout, sending_queue,
// retry_on_failure, ...), and dead_letter.
//
// sending_queue and retry_on_failure are this exporter's: the stock
// exporter inside runs without either, one attempt per request, and
// retry_on_failure::max_elapsed_time is the retry window after which a
// request still failing is dead-lettered (0: retry until the bucket takes
// it).
type Config struct {
	// stock is the awss3 exporter's configuration. Unexported, decoded by
	// Unmarshal and checked by Validate: as a squashed field the collector
	// would name its errors after the field ("stock: invalid
	// StorageClass"), embedded it would run its Validate twice.
	stock awss3exporter.Config
	// DeadLetter says where what the bucket does not take is kept.
	DeadLetter deadletter.Config `mapstructure:"dead_letter"`
}

// Unmarshal decodes dead_letter into DeadLetter and every other key into
// the awss3 configuration (an unknown key is an error naming it).
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	dl, err := conf.Sub(deadLetterKey)
	if err != nil {
		return err
	}
	if err := dl.Unmarshal(&c.DeadLetter); err != nil {
		return err
	}
	rest := conf.ToStringMap()
	delete(rest, deadLetterKey)
	return confmap.NewFromStringMap(rest).Unmarshal(&c.stock)
}

// Validate checks the awss3 settings, as the stock exporter does, with
// their keys' paths; dead_letter validates itself.
func (c *Config) Validate() error {
	return confmap.Validate(&c.stock)
}
