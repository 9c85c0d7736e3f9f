package event

import (
	"strings"
	"testing"
)

func TestScanSpans(t *testing.T) {
	cases := []struct {
		body string
		want []string // nil: not found
	}{
		{`{"events":[{"a":1},{"b":"}]"}]}`, []string{`{"a":1}`, `{"b":"}]"}`}},
		{` { "x" : [1,{"events":[]}] , "events" : [ 1 , "s\"" ,null,[{}], {} ] } `, []string{`1`, `"s\""`, `null`, `[{}]`, `{}`}},
		{`{"ev\u0065nts":[{}]}`, nil},
		{`{"other":1}`, nil},
		{`{"events":{"a":[1]}}`, nil},
		{`[{"events":[1]}]`, nil},
		{`{"a":"\\","events":[{"k":"\\\""}]}`, []string{`{"k":"\\\""}`}},
	}
	// An empty events array yields no spans, and later arrays add none.
	if got, err := scanJSON([]byte(`{"events":[],"x":[[1],[2]]}`), nil, true); err != nil || len(got) != 0 {
		t.Errorf("empty events: %v %v", got, err)
	}
	for _, tc := range cases {
		got, err := scanJSON([]byte(tc.body), nil, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if tc.want == nil {
			if got != nil {
				t.Errorf("%s: spans %v, want none", tc.body, got)
			}
			continue
		}
		var parts []string
		for _, s := range got {
			parts = append(parts, tc.body[s[0]:s[1]])
		}
		if got == nil || strings.Join(parts, "|") != strings.Join(tc.want, "|") || len(parts) != len(tc.want) {
			t.Errorf("%s: spans %q, want %q", tc.body, parts, tc.want)
		}
	}
}

func TestAppendRawEvent(t *testing.T) {
	cases := []struct {
		raw      string
		hasAppID bool
		want     string
	}{
		{`{"type":"REQUEST"}`, false, `{"appId":"a1","type":"REQUEST"}`},
		{`{ }`, false, `{"appId":"a1"}`},
		{"{\n  \"x\": 1\n}", false, "{\"appId\":\"a1\",\"x\": 1\n}"},
		{`{"appId":"a1","x":1}`, true, `{"appId":"a1","x":1}`},
	}
	for _, tc := range cases {
		if got := string(appendRawEvent(nil, []byte(tc.raw), tc.hasAppID, "a1")); got != tc.want {
			t.Errorf("appendRawEvent(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
