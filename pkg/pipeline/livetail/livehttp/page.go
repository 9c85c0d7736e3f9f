package livehttp

import (
	"embed"
	"net/http"

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

// Page serves the page, its script or its style sheet, by path.
func Page() http.Handler {
	return httpserve.PageFiles(pageFiles, map[string]httpserve.PageFile{
		Path:       {Name: "page/live.html", ContentType: "text/html; charset=utf-8"},
		ScriptPath: {Name: "page/live.js", ContentType: "text/javascript; charset=utf-8"},
		StylePath:  {Name: "page/live.css", ContentType: "text/css; charset=utf-8"},
	})
}
