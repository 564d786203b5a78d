// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package jsonlfileexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/jsonlfileexporter"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// The configuration's errors. Each message wraps one of them with the value
// it got, so that it names the key and the fix while the tests match the
// kind with errors.Is. The path templates' errors are in pathtemplate.go.
var (
	errCompression = errors.New("compression must be one of none, gzip, zstd")
	errTimeoutKey  = errors.New("timeout is not a jsonl_file setting: a file write cannot be interrupted once it has started; " +
		"remove it (sending_queue::block_on_overflow and the senders' own timeouts bound how long a request waits)")
	errNoDirectory         = errors.New("directory must be set")
	errMaxOpenFiles        = errors.New("max_open_files must be at least 1")
	errFilePermissions     = errors.New(`file_permissions must be an octal mode between 0001 and 0777 such as "0640"`)
	errOwnerReadWrite      = errors.New("file_permissions must let the owner read and write (0600)")
	errFlushInterval       = errors.New("flush_interval must not be negative")
	errMaxDistinctPaths    = errors.New("max_distinct_paths must not be negative (0 disables the bound)")
	errNegativeRotation    = errors.New("must not be negative")
	errRotationWithoutSize = errors.New("rotation::max_days and rotation::max_backups need rotation::max_megabytes > 0")
)

// Compression says how whole files are compressed (the `compression` key).
type Compression string

// Compression values accepted by the `compression` key. They are untyped:
// the file writer and the repair of existing files also use them to name a
// file's codec.
const (
	compressionNone = "none"
	compressionGzip = "gzip"
	compressionZstd = "zstd"
)

// Validate reports a compression other than none (or empty), gzip and zstd.
func (c Compression) Validate() error {
	switch c {
	case "", compressionNone, compressionGzip, compressionZstd:
		return nil
	default:
		return fmt.Errorf("%w, got %q", errCompression, string(c))
	}
}

// Config is the configuration of the jsonl_file exporter.
type Config struct {
	// QueueConfig is the stock exporterhelper sending queue (`sending_queue`).
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	// RetryConfig is the stock exporterhelper retry policy (`retry_on_failure`):
	// a full disk or a missing permission is retried, a path that can never be
	// written is not.
	RetryConfig configretry.BackOffConfig `mapstructure:"retry_on_failure"`

	// Directory is the directory the files are written under. Required. It is
	// created, with the parents it needs, when missing.
	Directory string `mapstructure:"directory"`

	// TracesPath is the path of the span file, relative to Directory. It may
	// hold resource attribute references in braces, e.g.
	// "{nemo.run.id}/traces.jsonl", to give each run its own file.
	TracesPath string `mapstructure:"traces_path"`
	// MetricsPath is the path template of the metric data point file.
	MetricsPath string `mapstructure:"metrics_path"`
	// LogsPath is the path template of the log record file.
	LogsPath string `mapstructure:"logs_path"`

	// MissingAttributeValue replaces a `{attribute}` reference in a path
	// template when the resource lacks the attribute or its value is empty.
	MissingAttributeValue string `mapstructure:"missing_attribute_value"`

	// MaxOpenFiles bounds how many files are open at once. When a new file is
	// needed the least recently used one is flushed and closed.
	MaxOpenFiles int `mapstructure:"max_open_files"`

	// Append keeps what a file already holds (the default). When false, a file
	// is truncated the first time this collector opens it.
	Append bool `mapstructure:"append"`

	// FilePermissions is the mode of new files, an octal string such as
	// "0640". Directories get the same bits plus search (x) where read is set.
	FilePermissions string `mapstructure:"file_permissions"`

	// Compression compresses whole files: "none" (default), "gzip" (readable
	// with zcat) or "zstd" (readable with zstdcat). The file name gets ".gz" or
	// ".zst" appended unless it already ends with it.
	Compression Compression `mapstructure:"compression"`

	// FlushInterval is how long written records may wait in memory before
	// they reach the file. 0 writes every batch before acknowledging it.
	FlushInterval time.Duration `mapstructure:"flush_interval"`

	// Fsync calls fsync after every write to the file, so that records
	// survive a power loss, at a large cost in throughput.
	Fsync bool `mapstructure:"fsync"`

	// Rotation rotates files by size and prunes rotated files by age and count.
	Rotation RotationConfig `mapstructure:"rotation"`
	// MaxDistinctPaths bounds how many distinct files (rendered paths) may be
	// written to within an hour. Records for a new path beyond it go to the
	// signal's overflow file, _overflow/<signal>.jsonl, so that senders
	// cannot create directories without bound. 0 disables the bound.
	MaxDistinctPaths int `mapstructure:"max_distinct_paths"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// RotationConfig configures rotation. It applies to every file a path
// template produces, each rotating on its own.
type RotationConfig struct {
	// MaxMegabytes rotates a file before a write would take it past this
	// size (in MiB, on disk, after compression). 0 disables rotation.
	MaxMegabytes int `mapstructure:"max_megabytes"`
	// MaxDays removes rotated files older than this many days (by the time
	// in their name). 0 keeps them regardless of age.
	MaxDays int `mapstructure:"max_days"`
	// MaxBackups keeps at most this many rotated files per file. 0 keeps all.
	MaxBackups int `mapstructure:"max_backups"`
	// LocalTime names rotated files with local time instead of UTC.
	LocalTime bool `mapstructure:"localtime"`

	// prevent unkeyed literal initialization
	_ struct{}
}

var (
	_ component.Config    = (*Config)(nil)
	_ confmap.Unmarshaler = (*Config)(nil)
)

// Unmarshal accepts file_permissions quoted ("0640") and unquoted (0640,
// which YAML reads as the octal number 416: the intended mode).
//
// It refuses `timeout`: a write to a file cannot be interrupted once it has
// started, so no setting can bound it (the key was accepted and ignored by
// earlier versions).
func (cfg *Config) Unmarshal(conf *confmap.Conf) error {
	if conf.IsSet("timeout") {
		return errTimeoutKey
	}
	var mode int64
	isNumber := true
	switch v := conf.Get("file_permissions").(type) {
	case int:
		mode = int64(v)
	case int64:
		mode = v
	case uint64:
		mode = int64(min(v, math.MaxInt64))
	default:
		isNumber = false
	}
	if isNumber {
		if err := conf.Merge(confmap.NewFromStringMap(map[string]any{
			"file_permissions": "0" + strconv.FormatInt(mode, 8),
		})); err != nil {
			return err
		}
	}
	return conf.Unmarshal(cfg)
}

// Validate checks the configuration; errors name the offending key.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Directory == "" {
		errs = append(errs, errNoDirectory)
	}
	for _, p := range []struct{ key, value string }{
		{"traces_path", cfg.TracesPath},
		{"metrics_path", cfg.MetricsPath},
		{"logs_path", cfg.LogsPath},
	} {
		if _, err := parsePathTemplate(p.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.key, err))
		}
	}
	if err := checkPathValue(cfg.MissingAttributeValue); err != nil {
		errs = append(errs, fmt.Errorf("missing_attribute_value: %w", err))
	}
	if cfg.MaxOpenFiles < 1 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxOpenFiles, cfg.MaxOpenFiles))
	}
	if _, err := parseFilePermissions(cfg.FilePermissions); err != nil {
		errs = append(errs, err)
	}
	if err := cfg.Compression.Validate(); err != nil {
		errs = append(errs, err)
	}
	if cfg.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("%w, got %s", errFlushInterval, cfg.FlushInterval))
	}
	if cfg.MaxDistinctPaths < 0 {
		errs = append(errs, fmt.Errorf("%w, got %d", errMaxDistinctPaths, cfg.MaxDistinctPaths))
	}
	for _, r := range []struct {
		key   string
		value int
	}{
		{"rotation::max_megabytes", cfg.Rotation.MaxMegabytes},
		{"rotation::max_days", cfg.Rotation.MaxDays},
		{"rotation::max_backups", cfg.Rotation.MaxBackups},
	} {
		if r.value < 0 {
			errs = append(errs, fmt.Errorf("%s %w, got %d", r.key, errNegativeRotation, r.value))
		}
	}
	if cfg.Rotation.MaxMegabytes == 0 && (cfg.Rotation.MaxDays > 0 || cfg.Rotation.MaxBackups > 0) {
		errs = append(errs, errRotationWithoutSize)
	}
	return errors.Join(errs...)
}

// parseFilePermissions parses the `file_permissions` octal string.
func parseFilePermissions(s string) (os.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v == 0 || v&^0o777 != 0 {
		return 0, fmt.Errorf("%w, got %q", errFilePermissions, s)
	}
	if v&0o600 != 0o600 {
		// The exporter reopens its files (after eviction, to repair a tail).
		return 0, fmt.Errorf("%w, got %q", errOwnerReadWrite, s)
	}
	return os.FileMode(v), nil
}

// dirPermissions derives the mode of created directories from the file mode:
// the same bits, plus search (x) wherever read (r) is granted.
func dirPermissions(file os.FileMode) os.FileMode {
	return file | (file&0o444)>>2
}
