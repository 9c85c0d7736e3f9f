package analyticspage

import (
	"embed"
	"net/http"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

// The authors' page: a browser opening AuthorsPath gets it; a client of
// the data gets the report, as at AppDataPath. It takes no token in its
// address: a person pastes it, and the script sends it in a header.
const (
	AuthorsPath       = "/cms/analytics"
	AuthorsScriptPath = AuthorsPath + "/page.js"
	AuthorsStylePath  = AuthorsPath + "/page.css"
)

//go:embed authors/authors.html authors/authors.js authors/authors.css
var authorsFiles embed.FS

// AuthorsPage serves the authors' page, its script or its style sheet, by
// path.
func AuthorsPage() http.Handler {
	return httpserve.PageFiles(authorsFiles, map[string]httpserve.PageFile{
		AuthorsPath:       {Name: "authors/authors.html", ContentType: "text/html; charset=utf-8"},
		AuthorsScriptPath: {Name: "authors/authors.js", ContentType: "text/javascript; charset=utf-8"},
		AuthorsStylePath:  {Name: "authors/authors.css", ContentType: "text/css; charset=utf-8"},
	})
}
