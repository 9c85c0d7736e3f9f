package content

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name          string
		before, after string
		want          []string // path: before -> after
	}{
		{"same", `{"a":1,"b":[1,2]}`, `{"b":[1, 2],"a":1}`, nil},
		{"changed, added and removed", `{"a":1,"b":"x"}`, `{"a":2,"c":true}`,
			[]string{"a: 1 -> 2", "b: \"x\" -> ", "c:  -> true"}},
		{"objects member by member", `{"content":{"Hello":["hi"],"Bye":["bye"]}}`, `{"content":{"Hello":["hey"],"Bye":["bye"]}}`,
			[]string{`content.Hello: ["hi"] -> ["hey"]`}},
		{"lists whole", `{"values":[{"name":"red"}]}`, `{"values":[{"name":"red"},{"name":"blue"}]}`,
			[]string{`values: [{"name":"red"}] -> [{"name":"red"},{"name":"blue"}]`}},
		{"object replaced by a value", `{"a":{"b":1}}`, `{"a":null}`, []string{`a: {"b":1} -> null`}},
		{"from nothing", ``, `{"a":1}`, []string{"a:  -> 1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Diff([]byte(tc.before), []byte(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, c := range got {
				lines = append(lines, c.Path+": "+string(c.Before)+" -> "+string(c.After))
			}
			if strings.Join(lines, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	if _, err := Diff([]byte(`[1]`), []byte(`{}`)); err == nil {
		t.Error("a state that is not an object was compared")
	}
}
