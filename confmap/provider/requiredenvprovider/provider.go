// Package requiredenvprovider provides the `required` config scheme:
// `${required:NAME}` expands to the environment variable NAME, like
// `${env:NAME}`, but fails the collector's start (and `otelcol-nemo validate`)
// with a message naming the variable when it is unset or empty. Presets use it
// for values without which the destination cannot work, such as API keys.
package requiredenvprovider // import "github.com/nemo-lens/otelcol-nemo/confmap/provider/requiredenvprovider"

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	"go.opentelemetry.io/collector/confmap"
)

const schemeName = "required"

// The collector's own rule for environment variable names.
var validName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

type provider struct {
	lookup func(string) (string, bool)
}

// NewFactory returns a factory for the `required` scheme.
func NewFactory() confmap.ProviderFactory {
	return confmap.NewProviderFactory(func(confmap.ProviderSettings) confmap.Provider {
		return &provider{lookup: os.LookupEnv}
	})
}

func (p *provider) Retrieve(_ context.Context, uri string, _ confmap.WatcherFunc) (*confmap.Retrieved, error) {
	name, ok := strings.CutPrefix(uri, schemeName+":")
	if !ok {
		return nil, fmt.Errorf("%q uri is not supported by %q provider", uri, schemeName)
	}
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("environment variable %q has an invalid name: must match %s", name, validName)
	}
	val, _ := p.lookup(name)
	if val == "" {
		return nil, fmt.Errorf("environment variable %s is required by this config but is not set (or is empty): export %s=... before starting the collector", name, name)
	}
	return confmap.NewRetrievedFromYAML([]byte(val))
}

func (*provider) Scheme() string { return schemeName }

func (*provider) Shutdown(context.Context) error { return nil }
