package analyticsdoc

import (
	"maps"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      map[string]string
	}{
		{"none", "# Title\n\ntext\n", map[string]string{}},
		{"one", "# T\n\n## Daily\n\nWhy.\n\n```sql\nSELECT 1\n```\n", map[string]string{"Daily": "SELECT 1\n"}},
		// A section without SQL does not take the next section's block.
		{"prose between", "# T\n\n## Rollups\n\nNo query.\n\n## Daily\n\n```sql\nSELECT 1\n```\n",
			map[string]string{"Daily": "SELECT 1\n"}},
		{"first block only", "# T\n\n## Two\n\n```sql\nSELECT 1\n```\n\n```sql\nSELECT 2\n```\n",
			map[string]string{"Two": "SELECT 1\n"}},
		{"other languages ignored", "# T\n\n## Shell\n\n```sh\nls\n```\n", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Parse(tc.doc); !maps.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The project's own document parses into its queries.
func TestQueriesOfTheDocs(t *testing.T) {
	qs, err := Queries("../../docs/analytics.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 15 || qs["Conversations per day"] == "" {
		t.Errorf("%d queries: %v", len(qs), qs)
	}
}
