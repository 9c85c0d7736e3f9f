// Package analyticsdoc reads the analysts' queries out of
// docs/analytics.md, so that tests run exactly what the page documents.
package analyticsdoc

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// sqlBlock is a section's heading and the first SQL block under it.
var sqlBlock = regexp.MustCompile("(?s)^([^\n]+)\n.*?```sql\n(.*?)```")

// Queries returns the SQL of every second-level section of the Markdown
// file at path that holds an SQL block, by the section's heading.
func Queries(path string) (map[string]string, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the analysts' queries: %w", err)
	}
	return Parse(string(doc)), nil
}

// Parse is Queries over the text of a document.
func Parse(doc string) map[string]string {
	out := map[string]string{}
	for _, section := range strings.Split(doc, "\n## ")[1:] {
		if m := sqlBlock.FindStringSubmatch(section); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out
}
