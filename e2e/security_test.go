// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// testPKI writes a CA (dir/ca.crt) and a server certificate for 127.0.0.1
// into dir and returns the server's paths and a client TLS config trusting
// the CA.
func testPKI(t *testing.T, dir string) (certFile, keyFile string, client *tls.Config) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "otelcol-nemo test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	writePEM(t, certFile, "CERTIFICATE", srvDER)
	writePEM(t, filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDER)
	writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return certFile, keyFile, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSecurePresetRefusesWithoutToken: with TLS and a bearer token on the
// receivers, a client without the token (or without TLS) is refused over
// both protocols, and a client with it is accepted. The same for the secure
// preset and for the file preset with configs/overlays/tls.yaml.
func TestSecurePresetRefusesWithoutToken(t *testing.T) {
	t.Run("secure.yaml", func(t *testing.T) { checkReceiversNeedTLSAndToken(t, "secure.yaml") })
	t.Run("file.yaml + overlays/tls.yaml", func(t *testing.T) {
		checkReceiversNeedTLSAndToken(t, "file.yaml", "--config="+filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "tls.yaml"))
	})
}

func checkReceiversNeedTLSAndToken(t *testing.T, preset string, args ...string) {
	const token = "e2e-bearer-token-9f8e7d"
	certFile, keyFile, clientTLS := testPKI(t, t.TempDir())
	env := testEnv(t)
	env["OTLP_TLS_CERT_FILE"] = certFile
	env["OTLP_TLS_KEY_FILE"] = keyFile
	env["OTLP_BEARER_TOKEN"] = token
	c := testcollector.Start(t, testcollector.Config(t, preset), testcollector.Options{Env: env, Args: args})

	ctx, cancel := context.WithTimeout(t.Context(), jobTimeout)
	defer cancel()
	for _, proto := range []struct{ name, endpoint string }{{lensemu.GRPC, c.GRPCEndpoint()}, {lensemu.HTTP, c.HTTPEndpoint()}} {
		base := lensemu.Rank{Endpoint: proto.endpoint, Protocol: proto.name, RunID: "run-secure", WorldSize: 1, Steps: 1, NoLogs: true, NoMetrics: true}

		noToken := base
		noToken.TLS = clientTLS
		if res, err := noToken.Run(ctx); err == nil || res.Spans != 0 {
			t.Errorf("%s without a token: accepted %d spans (err %v)", proto.name, res.Spans, err)
		}
		wrongToken := noToken
		wrongToken.Headers = map[string]string{"Authorization": "Bearer not-the-token"}
		if res, err := wrongToken.Run(ctx); err == nil || res.Spans != 0 {
			t.Errorf("%s with a wrong token: accepted %d spans (err %v)", proto.name, res.Spans, err)
		}
		plaintext := base
		plaintext.Headers = map[string]string{"Authorization": "Bearer " + token}
		if res, err := plaintext.Run(ctx); err == nil || res.Spans != 0 {
			t.Errorf("%s without TLS: accepted %d spans (err %v)", proto.name, res.Spans, err)
		}
		good := plaintext
		good.TLS = clientTLS
		res, err := good.Run(ctx)
		if err != nil || res.Spans == 0 {
			t.Errorf("%s with TLS and the token: %d spans, err %v", proto.name, res.Spans, err)
		}
	}
	if preset == "secure.yaml" {
		checkRunPagesNeedTLSAndToken(t, c, clientTLS, token)
	}
	c.Stop()
	if strings.Contains(c.Logs(), token) {
		t.Error("the collector logged the bearer token")
	}
}

// TestAgentToGatewayOverTLS: agents with configs/overlays/agent-tls.yaml send
// to a gateway with configs/overlays/tls.yaml (TLS and a bearer token on its
// receivers): every item the ranks had acknowledged reaches the gateway's
// files.
func TestAgentToGatewayOverTLS(t *testing.T) {
	const token = "e2e-gateway-token-51c3"
	dir := t.TempDir()
	certFile, keyFile, _ := testPKI(t, dir)
	caFile := filepath.Join(dir, "ca.crt")
	overlay := func(name string) string {
		return "--config=" + filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", name)
	}
	env := tierEnv(t)
	env["OTLP_TLS_CERT_FILE"], env["OTLP_TLS_KEY_FILE"], env["OTLP_BEARER_TOKEN"] = certFile, keyFile, token
	gc := testcollector.Start(t, testcollector.Config(t, "gateway.yaml"), testcollector.Options{Env: env, Args: []string{overlay("tls.yaml")}})
	port, _ := strconv.Atoi(gc.Env["OTLP_GRPC_PORT"])
	gws := []*gateway{{Collector: gc, grpcPort: port, env: env}}
	agents := startAgents(t, 1, gws, func(env map[string]string) {
		env["GATEWAY_CA_FILE"], env["GATEWAY_BEARER_TOKEN"] = caFile, token
	}, overlay("agent-tls.yaml"))
	sent := runJob(t, nodeJob(agents, "run-tls", 8, 2))
	stopTier(agents, gws)
	if got := readTelemetry(t, gws[0].dir()).ByRun["run-tls"]; got != sent {
		t.Errorf("the gateway holds %s of the run, the ranks had %s acknowledged", describe(got), describe(sent))
	}
}

// checkRunPagesNeedTLSAndToken: the secure preset's run pages (nemo_view)
// are protected as its receivers are: TLS, and the bearer token.
func checkRunPagesNeedTLSAndToken(t *testing.T, c *testcollector.Collector, clientTLS *tls.Config, token string) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d/api/runs", c.ViewPort)
	status := func(client *http.Client, url, authorization string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, http.NoBody)
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	tlsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}, Timeout: 10 * time.Second}
	if got := status(tlsClient, url, ""); got != http.StatusUnauthorized {
		t.Errorf("run pages without a token: HTTP %d, want 401", got)
	}
	if got := status(tlsClient, url, "Bearer not-the-token"); got != http.StatusUnauthorized {
		t.Errorf("run pages with a wrong token: HTTP %d, want 401", got)
	}
	plain := &http.Client{Timeout: 10 * time.Second}
	if got := status(plain, strings.Replace(url, "https://", "http://", 1), "Bearer "+token); got == http.StatusOK {
		t.Error("run pages without TLS: HTTP 200")
	}
	if got := status(tlsClient, url, "Bearer "+token); got != http.StatusOK {
		t.Errorf("run pages with TLS and the token: HTTP %d, want 200", got)
	}
}
