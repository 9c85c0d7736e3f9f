package authhttp

import (
	"net/http"
	"testing"

	"github.com/assistantcms/cms/pkg/auth"
)

func TestStatus(t *testing.T) {
	cases := []struct {
		kind auth.Kind
		want int
	}{
		{auth.Unauthenticated, http.StatusUnauthorized},
		{auth.Forbidden, http.StatusForbidden},
		{auth.ScopeMissing, http.StatusForbidden},
		{auth.Invalid, http.StatusBadRequest},
		{auth.Unavailable, http.StatusServiceUnavailable},
		{auth.Throttled, http.StatusTooManyRequests},
		{0, http.StatusInternalServerError},
	}
	for _, c := range cases {
		if got := Status(c.kind); got != c.want {
			t.Errorf("Status(%s) = %d, want %d", c.kind, got, c.want)
		}
	}
}
