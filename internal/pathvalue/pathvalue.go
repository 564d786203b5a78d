// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package pathvalue turns an attribute value (a run id, a rank) into one
// safe element of a file path: the single rule by which the jsonl_file
// exporter names a run's files and nemo_otlp its dead letters next to them.
package pathvalue // import "github.com/nemo-lens/otelcol-nemo/internal/pathvalue"

import "unicode/utf8"

// MaxBytes caps the bytes one value contributes to a path, well under the
// 255-byte limit of a file name on common filesystems.
const MaxBytes = 128

// Append appends s as one path-safe piece: separators, control characters
// and bytes that are not UTF-8 become '_', a leading '.' becomes '_' (so
// neither "." nor ".." nor a hidden file can result), and the value is cut
// to MaxBytes on a character boundary.
func Append(dst []byte, s string) []byte {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if n+size > MaxBytes {
			break
		}
		switch {
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f, r == '/', r == '\\', i == 0 && r == '.':
			dst = append(dst, '_')
		default:
			dst = append(dst, s[i:i+size]...)
		}
		n += size
		i += size
	}
	return dst
}
