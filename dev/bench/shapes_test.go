package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseShapes(t *testing.T) {
	cases := []struct {
		in      string
		want    []shape
		wantErr string
	}{
		{"1x1k,5x1K, 50x20k", []shape{{1, 1024}, {5, 1024}, {50, 20480}}, ""},
		{"3x1500", []shape{{3, 1500}}, ""},
		{"5", nil, `"5" is not EVENTSxSIZE`},
		{"0x1k", nil, `"0x1k" is not EVENTSxSIZE`},
		{"5xk", nil, `"5xk" has no size`},
		{"5x-1", nil, `"5x-1" has no size`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseShapes(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseShapes(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("parseShapes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	if s := (shape{5, 20480}).String(); s != "5 × 20 KB" {
		t.Errorf("shape name %q", s)
	}
}
