package httpserve

import (
	"io/fs"
	"net/http"
	"strings"
)

// PageCSP is the Content-Security-Policy of a page with a script: its own
// script and style sheet, calls to its own origin, nothing inline, no
// frames around it.
const PageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// PageFile is one file of a page: its name in the files and its type.
type PageFile struct{ Name, ContentType string }

// PageFiles serves the files of a page by path, each with PageCSP and
// headers that keep it out of frames and from being sniffed.
func PageFiles(files fs.FS, paths map[string]PageFile) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := paths[r.URL.Path]
		if !ok {
			Error(w, http.StatusNotFound, "", "Not found.")
			return
		}
		b, err := fs.ReadFile(files, f.Name)
		if err != nil {
			Error(w, http.StatusInternalServerError, "", "The page is missing from this build.")
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ContentType)
		h.Set("Content-Security-Policy", PageCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		h.Add("Vary", "Accept")
		_, _ = w.Write(b)
	})
}

// WantsPage reports whether r asks for a page rather than data: a browser
// opening the address accepts HTML, a client of the data accepts JSON,
// text/event-stream or anything.
func WantsPage(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "text/html") && !strings.Contains(accept, "text/event-stream")
}
