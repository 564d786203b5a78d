// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter // import "github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter"

// Our own OTLP clients rather than the stock otlp_grpc and otlp_http
// exporters inside: those log a partial success (a 2xx answer that rejects
// items) as a warning and count the request as sent, with no way for a
// caller to see it, and an exporter that wraps them cannot tell a partial
// success from a delivery. These clients return it, and classify errors as
// the stock ones do (the OTLP specification's retryable codes and statuses,
// server-given delays).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

// maxResponseBytes bounds what is read of an OTLP/HTTP answer.
const maxResponseBytes = 64 << 10

// client sends one request and says what the backend made of it: nil and
// a partial (rejected 0: delivered), or an error that is permanent
// (consumererror.IsPermanent), a throttle (exporterhelper.NewThrottleRetry)
// or retryable.
type client[T any] struct {
	send  func(ctx context.Context, d T) (deadletter.Partial, error)
	close func() error
}

func newClient[T any, E component.Component](ctx context.Context, host component.Host, set component.TelemetrySettings, c *Config, sig signal[T, E], userAgent string) (client[T], error) {
	if c.Protocol == protocolGRPC {
		return newGRPCClient(ctx, host, set, c, sig, userAgent)
	}
	return newHTTPClient(ctx, host, set, c, sig, userAgent)
}

func newGRPCClient[T any, E component.Component](ctx context.Context, host component.Host, set component.TelemetrySettings, c *Config, sig signal[T, E], userAgent string) (client[T], error) {
	conn, err := c.GRPC.ToClientConn(ctx, host.GetExtensions(), set, configgrpc.WithGrpcDialOption(grpc.WithUserAgent(userAgent)))
	if err != nil {
		return client[T]{}, err
	}
	md := metadata.MD{}
	for k, v := range c.GRPC.Headers.Iter {
		md.Append(k, string(v))
	}
	wait := grpc.WaitForReady(c.GRPC.WaitForReady)
	return client[T]{
		send: func(ctx context.Context, d T) (deadletter.Partial, error) {
			p, err := sig.export(metadata.NewOutgoingContext(ctx, md), conn, d, wait)
			return p, grpcError(err)
		},
		close: conn.Close,
	}, nil
}

// grpcError classifies a gRPC error as the OTLP specification says: only
// the transient codes are retried, RESOURCE_EXHAUSTED only with the
// server's RetryInfo, whose delay is honored.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	var retryInfo *errdetails.RetryInfo
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retryInfo = ri
		}
	}
	switch st.Code() {
	case codes.OK:
		return nil
	case codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.OutOfRange, codes.Unavailable, codes.DataLoss:
	case codes.ResourceExhausted:
		if retryInfo == nil {
			return consumererror.NewPermanent(err)
		}
	default:
		return consumererror.NewPermanent(err)
	}
	if d := retryInfo.GetRetryDelay().AsDuration(); d > 0 {
		return exporterhelper.NewThrottleRetry(err, d)
	}
	return err
}

func newHTTPClient[T any, E component.Component](ctx context.Context, host component.Host, set component.TelemetrySettings, c *Config, sig signal[T, E], userAgent string) (client[T], error) {
	hc, err := c.HTTP.ClientConfig.ToClient(ctx, host.GetExtensions(), set)
	if err != nil {
		return client[T]{}, err
	}
	url := sig.endpoint(&c.HTTP)
	if url == "" {
		url = strings.TrimSuffix(c.HTTP.ClientConfig.Endpoint, "/") + "/v1/" + sig.Name
	}
	json := c.Protocol == protocolHTTPJSON
	contentType, encode := "application/x-protobuf", sig.request
	if json {
		// A dead letter's encoding: both are OTLP JSON export requests.
		contentType, encode = "application/json", sig.JSON
	}
	return client[T]{
		send: func(ctx context.Context, d T) (deadletter.Partial, error) {
			body, err := encode(d)
			if err != nil {
				return deadletter.Partial{}, consumererror.NewPermanent(err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return deadletter.Partial{}, consumererror.NewPermanent(err)
			}
			req.Header.Set("Content-Type", contentType)
			req.Header.Set("User-Agent", userAgent)
			resp, err := hc.Do(req)
			if err != nil {
				return deadletter.Partial{}, fmt.Errorf("POST %s: %w", url, err)
			}
			defer resp.Body.Close()
			answer, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
			if resp.StatusCode < 200 || resp.StatusCode > 299 {
				return deadletter.Partial{}, httpError(url, resp, answer)
			}
			if readErr != nil {
				// The backend said 2xx: the request was taken; its partial
				// success, if any, cannot be read.
				return deadletter.Partial{}, nil
			}
			p, err := sig.response(answer, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
			if err != nil {
				// A 2xx answer that is not an OTLP response (some proxies
				// answer 200 with a page): taken, as the stock exporter does.
				return deadletter.Partial{}, nil
			}
			return p, nil
		},
		close: func() error { hc.CloseIdleConnections(); return nil },
	}, nil
}

// httpError classifies an HTTP status as the OTLP specification says: 429,
// 502, 503 and 504 are retried (after Retry-After when given), every other
// status is permanent.
func httpError(url string, resp *http.Response, body []byte) error {
	err := fmt.Errorf("POST %s: HTTP %d: %s", url, resp.StatusCode, answerText(resp.Header.Get("Content-Type"), body))
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		return consumererror.NewPermanent(err)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, convErr := strconv.Atoi(v); convErr == nil {
			return exporterhelper.NewThrottleRetry(err, time.Duration(s)*time.Second)
		}
		if t, parseErr := http.ParseTime(v); parseErr == nil {
			return exporterhelper.NewThrottleRetry(err, time.Until(t))
		}
	}
	return err
}

// answerText is what a refusal's body says: the message of the
// google.rpc.Status an OTLP server answers in protobuf, or the text any
// other server answers, cut to 512 bytes of valid UTF-8.
func answerText(contentType string, body []byte) string {
	if strings.HasPrefix(contentType, "application/x-protobuf") {
		var st spb.Status
		if proto.Unmarshal(body, &st) == nil && st.GetMessage() != "" {
			return st.GetMessage()
		}
	}
	msg := strings.TrimSpace(strings.ToValidUTF8(string(body), "?"))
	if len(msg) > 512 {
		msg = strings.ToValidUTF8(msg[:512], "")
	}
	return msg
}
