// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package weaveexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/weaveexporter"

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	protobufContentType = "application/x-protobuf"
	jsonContentType     = "application/json"
	maxResponseBytes    = 64 << 10
	maxMessageBytes     = 512
)

// response is what Weave answered to one request.
type response struct {
	status      int
	contentType string
	retryAfter  []string
	body        []byte
}

func readResponse(resp *http.Response) response {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return response{
		status:      resp.StatusCode,
		contentType: mediaType,
		retryAfter:  resp.Header.Values("Retry-After"),
		body:        body,
	}
}

// retryable reports the statuses OTLP says to retry.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryAfter parses a Retry-After header: delay-seconds or an HTTP date.
func retryAfter(values []string, now time.Time) (time.Duration, bool) {
	if len(values) == 0 {
		return 0, false
	}
	v := strings.TrimSpace(values[0])
	if seconds, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(seconds, 0)) * time.Second, true
	}
	if date, err := http.ParseTime(v); err == nil {
		return max(date.Sub(now), 0), true
	}
	return 0, false
}

// serverMessage extracts a one-line explanation from an error response:
// an OTLP google.rpc.Status, a JSON error ({"detail": ...} from Weave's
// FastAPI server, or message/error), or plain text. secrets are removed.
func serverMessage(res response, secrets ...string) string {
	var msg string
	switch {
	case len(res.body) == 0:
	case res.contentType == protobufContentType || res.contentType == "application/protobuf":
		var st status.Status
		if proto.Unmarshal(res.body, &st) == nil {
			msg = st.GetMessage()
		}
	case res.contentType == jsonContentType || strings.HasSuffix(res.contentType, "+json"):
		msg = jsonMessage(res.body)
	default:
		if utf8.Valid(res.body) {
			msg = string(res.body)
		}
	}
	return cleanMessage(msg, secrets...)
}

func jsonMessage(body []byte) string {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return string(body)
	}
	for _, key := range []string{"detail", "message", "error", "error_message"} {
		v, ok := doc[key]
		if !ok {
			continue
		}
		if s, ok := v.(string); ok {
			return s
		}
		if enc, err := json.Marshal(v); err == nil {
			return string(enc)
		}
	}
	return string(body)
}

// cleanMessage makes text from a server safe to log: one line, bounded,
// without the API key (a server echoing a bad key must not leak it).
func cleanMessage(msg string, secrets ...string) string {
	for _, secret := range secrets {
		if secret != "" {
			msg = strings.ReplaceAll(msg, secret, "[REDACTED]")
		}
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxMessageBytes {
		cut := maxMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	return msg
}

// partialSuccess reads an OTLP ExportTraceServiceResponse from a 2xx body.
// ok is false when the body is empty or not a response (Weave answers an
// empty 200 on full success).
func partialSuccess(res response) (rejected int64, message string, ok bool) {
	if len(res.body) == 0 {
		return 0, "", false
	}
	er := ptraceotlp.NewExportResponse()
	var err error
	if res.contentType == jsonContentType {
		err = er.UnmarshalJSON(res.body)
	} else {
		err = er.UnmarshalProto(res.body)
	}
	if err != nil {
		return 0, "", false
	}
	ps := er.PartialSuccess()
	return ps.RejectedSpans(), ps.ErrorMessage(), true
}

// stopPush marks a refusal that every later request of the push would get
// too (bad key, wrong URL), so the push stops at once.
type stopPush struct{ error }

func (s stopPush) Unwrap() error { return s.error }

func stopsPush(err error) bool {
	var s stopPush
	return errors.As(err, &s)
}

// refusal turns a non-2xx, non-413 answer into the error the user reads:
// what Weave said and which setting to check.
func (e *weaveExporter) refusal(res response, key projectKey, spans int) error {
	said := ""
	if msg := serverMessage(res, e.secrets()...); msg != "" {
		said = "; Weave said: " + msg
	}
	switch res.status {
	case http.StatusBadRequest:
		return consumererror.NewPermanent(fmt.Errorf("weave rejected %d spans for %s as malformed (HTTP 400)%s", spans, key, said))
	case http.StatusUnauthorized:
		return stopPush{consumererror.NewPermanent(fmt.Errorf("weave did not accept the API key (HTTP 401 from %s): check that api_key (usually ${env:WANDB_API_KEY}) holds a valid API key of this W&B deployment, and auth_mode (now %s)%s", e.url, e.cfg.AuthMode, said))}
	case http.StatusForbidden:
		return consumererror.NewPermanent(fmt.Errorf("weave refused to write %d spans to entity %q, project %q (HTTP 403): check that the API key's user has write access to that entity and project; they come from the resource attributes wandb.entity and wandb.project (WANDB_ENTITY/WANDB_PROJECT in the job) or from entity/project in the weave exporter%s", spans, key.entity, key.project, said))
	case http.StatusNotFound:
		return stopPush{consumererror.NewPermanent(fmt.Errorf("weave endpoint not found (HTTP 404 from %s): check endpoint: the multi-tenant URL is %s; dedicated and self-managed deployments use https://<host>%s (deployment: dedicated, host: <host>)%s", e.url, defaultEndpoint, dedicatedPath, said))}
	}
	if !retryable(res.status) {
		return consumererror.NewPermanent(fmt.Errorf("weave refused %d spans for %s (HTTP %d from %s)%s", spans, key, res.status, e.url, said))
	}
	err := fmt.Errorf("weave is busy or unavailable (HTTP %d from %s) for %d spans for %s%s", res.status, e.url, spans, key, said)
	if delay, ok := retryAfter(res.retryAfter, e.now()); ok {
		return exporterhelper.NewThrottleRetry(err, delay)
	}
	return err
}
