package httpserve

import (
	"net/http"
	"testing"
	"time"
)

func TestOrAndApply(t *testing.T) {
	def := Limits{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 4096}
	for _, tc := range []struct {
		name      string
		set, want Limits
	}{
		{"zero takes every default", Limits{}, def},
		{"negative takes the default", Limits{ReadTimeout: -time.Second, MaxHeaderBytes: -1}, def},
		{"set values stay", Limits{5 * time.Second, 6 * time.Second, 7 * time.Second, 8 * time.Second, 2048}, Limits{5 * time.Second, 6 * time.Second, 7 * time.Second, 8 * time.Second, 2048}},
		{"some set", Limits{WriteTimeout: time.Minute}, Limits{time.Second, 2 * time.Second, time.Minute, 4 * time.Second, 4096}},
	} {
		got := tc.set.Or(def)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		var s http.Server
		got.Apply(&s)
		if LimitsOf(&s) != got {
			t.Errorf("%s: applied %+v, read back %+v", tc.name, got, LimitsOf(&s))
		}
	}
}
