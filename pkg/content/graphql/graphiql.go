package graphql

import (
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// The GraphiQL page and its scripts are served by the binary itself, so
// the explorer works without reaching the internet. The assets are the
// npm packages' files, gzip-compressed; LICENSES.txt names them.
//
//go:embed assets/*.gz assets/LICENSES.txt
var assets embed.FS

// AssetsPath is where the GraphiQL page loads its files from.
const AssetsPath = "/cms/graphql/assets/"

// graphiqlScript and graphiqlStyle are the page's only inline code; the
// Content-Security-Policy allows them by hash, and nothing else inline.
const (
	graphiqlStyle  = `html, body, #graphiql { height: 100%; margin: 0; }`
	graphiqlScript = `
  // Requests need a token: put yours in the Headers tab below.
  const fetcher = GraphiQL.createFetcher({ url: window.location.pathname });
  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, {
      fetcher,
      defaultEditorToolsVisibility: 'headers',
      defaultHeaders: '{\n  "Authorization": "Bearer YOUR_TOKEN"\n}',
      defaultQuery: '# Intents, handlers and entities of your app.\n# Add ?appId= arguments when you use an organization token.\n{\n  handlers {\n    intentId\n    name\n    updatedAt\n  }\n  entities {\n    entityId\n    values { name synonyms }\n  }\n}\n',
    }),
  );
`
)

const graphiqlPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GraphiQL: content of your app</title>
<link rel="stylesheet" href="` + AssetsPath + `graphiql.min.css">
<style>` + graphiqlStyle + `</style>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script src="` + AssetsPath + `react.production.min.js"></script>
<script src="` + AssetsPath + `react-dom.production.min.js"></script>
<script src="` + AssetsPath + `graphiql.min.js"></script>
<script>` + graphiqlScript + `</script>
</body>
</html>
`

// graphiqlCSP lets the page load only its own files and inline code, call
// only its own origin, and be framed by no one (a framing page could
// dress the explorer up to collect the token typed into it).
func graphiqlCSP() string {
	hash := func(code string) string {
		sum := sha256.Sum256([]byte(code))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	return "default-src 'none'; script-src 'self' " + hash(graphiqlScript) +
		"; style-src 'self' " + hash(graphiqlStyle) +
		"; connect-src 'self'; img-src 'self' data:; font-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func serveGraphiQL(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(graphiqlPage)))
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", graphiqlCSP())
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, graphiqlPage)
	}
}

// Assets serves the GraphiQL page's files under AssetsPath.
func Assets() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(r.URL.Path)
		f, err := assets.Open("assets/" + name + ".gz")
		if err != nil || strings.Contains(name, "..") {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		h := w.Header()
		switch path.Ext(name) {
		case ".js":
			h.Set("Content-Type", "text/javascript; charset=utf-8")
		case ".css":
			h.Set("Content-Type", "text/css; charset=utf-8")
		}
		// The files change only with a new binary.
		h.Set("Cache-Control", "public, max-age=86400")
		h.Set("Vary", "Accept-Encoding")
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			h.Set("Content-Encoding", "gzip")
			_, _ = io.Copy(w, f)
			return
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			http.Error(w, "asset unreadable", http.StatusInternalServerError)
			return
		}
		_, _ = io.Copy(w, zr)
	})
}
