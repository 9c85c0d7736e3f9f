package graphql

import (
	"strings"
	"testing"
)

// TestNumbersInVariables: Int and Float variables are taken as graphql-go
// takes them from JSON, lists too; numbers that do not fit are refused
// naming the variable.
func TestNumbersInVariables(t *testing.T) {
	e := newEnv(t, Limits{}, nil)
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
		codes       string
	}{
		{"an Int", `query($n: Int) { auditLog(first: $n) { id } }`, map[string]any{"n": 2}, ""},
		{"a Float", `mutation($f: Float) { setGapSettings(regrowFactor: $f) { regrowFactor } }`, map[string]any{"f": 2.5}, ""},
		{"a whole Float", `mutation($f: Float) { setGapSettings(regrowFactor: $f) { regrowFactor } }`, map[string]any{"f": 3}, ""},
		{"an Int too large", `query($n: Int) { auditLog(first: $n) { id } }`, map[string]any{"n": 1e20}, "BAD_USER_INPUT@variables.n"},
		{"a fraction for an Int", `query($n: Int) { auditLog(first: $n) { id } }`, map[string]any{"n": 1.5}, "BAD_USER_INPUT@variables.n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.post("app1", tc.query, tc.vars)
			if got := strings.Join(a.codes(), ","); got != tc.codes {
				t.Errorf("codes %q, want %q: %.300s", got, tc.codes, a.raw)
			}
		})
	}
}
