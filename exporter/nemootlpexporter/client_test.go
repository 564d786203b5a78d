// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

// TestARefusalSaysWhatTheBackendSaid: an OTLP server's refusal is a
// protobuf google.rpc.Status (its message is kept), another server's is text
// (kept, cut, valid UTF-8).
func TestARefusalSaysWhatTheBackendSaid(t *testing.T) {
	body, err := proto.Marshal(&spb.Status{Code: 16, Message: "invalid API key"})
	require.NoError(t, err)
	assert.Equal(t, "invalid API key", answerText("application/x-protobuf", body))
	assert.Equal(t, "quota exceeded", answerText("text/plain", []byte(" quota exceeded\n")))
	long := answerText("text/html", []byte(strings.Repeat("é", 400)))
	assert.LessOrEqual(t, len(long), 512)
	assert.True(t, strings.HasPrefix(long, "éé"))
	assert.NotContains(t, answerText("application/octet-stream", []byte{0xff, 'x'}), "\xff")
}
