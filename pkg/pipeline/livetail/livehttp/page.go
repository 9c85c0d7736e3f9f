package livehttp

import (
	"embed"
	"net/http"
	"strings"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

// The page's files. The page takes no token in its address: a person
// pastes it, and the script sends it in a header.
//
//go:embed page/live.html page/live.js page/live.css
var pageFiles embed.FS

// Paths of the page's script and style sheet.
const (
	ScriptPath = Path + "/page.js"
	StylePath  = Path + "/page.css"
)

// PageCSP is the page's Content-Security-Policy: its own script and style
// sheet, calls to its own origin, nothing inline, no frames around it.
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// WantsPage reports whether r asks for the page rather than the stream:
// a browser opening the address accepts HTML, a client of the stream
// accepts text/event-stream or anything.
func WantsPage(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "text/html") && !strings.Contains(accept, "text/event-stream")
}

// Page serves the page, its script or its style sheet, by path.
func Page() http.Handler {
	files := map[string]struct{ name, contentType string }{
		Path:       {"page/live.html", "text/html; charset=utf-8"},
		ScriptPath: {"page/live.js", "text/javascript; charset=utf-8"},
		StylePath:  {"page/live.css", "text/css; charset=utf-8"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.URL.Path]
		if !ok {
			httpserve.Error(w, http.StatusNotFound, "", "Not found.")
			return
		}
		b, err := pageFiles.ReadFile(f.name)
		if err != nil {
			httpserve.Error(w, http.StatusInternalServerError, "", "The page is missing from this build.")
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Content-Security-Policy", PageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Add("Vary", "Accept")
		_, _ = w.Write(b)
	})
}
