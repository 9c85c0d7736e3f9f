package main

import (
	"fmt"

	"github.com/assistantcms/cms/pkg/edge/cors"
	"github.com/assistantcms/cms/pkg/envflag"
)

// defineCORSFlag defines the origins whose pages may call from a browser,
// for api serve and api gateway; the returned function checks them once
// the flags are parsed.
func defineCORSFlag(fs *envflag.Set) func() (*cors.Policy, error) {
	v := fs.String("cors-allowed-origins", "CORS_ALLOWED_ORIGINS", "", "comma-separated origins (scheme://host[:port]) whose pages may call from a browser; * for any; empty: none")
	return func() (*cors.Policy, error) {
		p, err := cors.New(envflag.List(*v))
		if err != nil {
			return nil, fmt.Errorf("-cors-allowed-origins (CORS_ALLOWED_ORIGINS): %w", err)
		}
		return p, nil
	}
}
