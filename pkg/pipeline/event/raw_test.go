package event

import (
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/pipeline/jsonscan"
)

func TestScanSpans(t *testing.T) {
	cases := []struct {
		body string
		want []string // nil: not found
	}{
		{`{"events":[{"a":1},{"b":"}]"}]}`, []string{`{"a":1}`, `{"b":"}]"}`}},
		{` { "x" : [1,{"events":[]}] , "events" : [ 1 , "s\"" ,null,[{}], {} ] } `, []string{`1`, `"s\""`, `null`, `[{}]`, `{}`}},
		{`{"ev\u0065nts":[{}]}`, []string{`{}`}},
		{`{"x":1, "ev\u0065nts" : [ {"a":[1]} , 2 ]}`, []string{`{"a":[1]}`, `2`}},
		{`{"other":1}`, nil},
		{`{"events":{"a":[1]}}`, nil},
		{`[{"events":[1]}]`, nil},
		{`{"a":"\\","events":[{"k":"\\\""}]}`, []string{`{"k":"\\\""}`}},
	}
	// An empty events array yields no spans, and later arrays add none.
	if lay, err := jsonscan.ScanLayout([]byte(`{"events":[],"x":[[1],[2]]}`), "events", nil, &jsonscan.Index{}); err != nil || len(lay.Spans) != 0 || string(lay.Value) != "[]" {
		t.Errorf("empty events: %+v %v", lay, err)
	}
	for _, tc := range cases {
		st := &batchState{}
		lay, err := jsonscan.ScanLayout([]byte(tc.body), "events", nil, &st.bodyIndex)
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if lay.Escaped {
			lay = rootLayout([]byte(tc.body), jsonscan.SkipWS([]byte(tc.body), 0), st)
		}
		got := lay.Spans
		if lay.Value == nil || lay.Value[0] != '[' {
			got = nil
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

func TestAppendEvent(t *testing.T) {
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
		if got := string(appendEvent(nil, []byte(tc.raw), &eventFields{hasAppID: tc.hasAppID}, "a1")); got != tc.want {
			t.Errorf("appendEvent(%q) = %q, want %q", tc.raw, got, tc.want)
		}
	}
}
