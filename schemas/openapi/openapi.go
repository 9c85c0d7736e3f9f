// Package openapi holds the REST contract of the services, an OpenAPI 3.1
// document, and serves it. openapi.yaml is the source, which references
// the event JSON Schemas of schemas/events by relative file; Go can embed
// only files below this directory, so what is served is
// openapi.bundled.yaml, the same document with those schemas inlined
// under components.schemas. A test keeps the two equal (after a change to
// either source: go test ./schemas/openapi -run Bundle -update-bundle).
package openapi

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// Path is where the api serves the bundled document.
const Path = "/openapi.yaml"

// BundledFile is the name of the bundled document in this directory.
const BundledFile = "openapi.bundled.yaml"

//go:embed openapi.bundled.yaml
var files embed.FS

// Bundled returns the bundled document: self-contained, every reference
// inside it.
func Bundled() []byte {
	b, err := files.ReadFile(BundledFile)
	if err != nil {
		// The file is embedded at build time; reading it cannot fail.
		panic("openapi: read the embedded document: " + err.Error())
	}
	return b
}

// Handler serves the bundled document with a strong ETag, so that tools
// polling it revalidate for a 304.
func Handler() http.Handler {
	doc := Bundled()
	sum := sha256.Sum256(doc)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	length := strconv.Itoa(len(doc))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("ETag", etag)
		h.Set("Cache-Control", "no-cache")
		if matches(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/yaml")
		h.Set("Content-Length", length)
		if r.Method != http.MethodHead {
			_, _ = w.Write(doc)
		}
	})
}

// matches implements If-None-Match's weak comparison over a list.
func matches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		if t = strings.TrimSpace(t); t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
