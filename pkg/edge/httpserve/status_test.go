package httpserve

import (
	"net/http"
	"testing"

	"github.com/assistantcms/cms/pkg/auth"
)

func TestAuthStatus(t *testing.T) {
	cases := []struct {
		kind auth.Kind
		want int
	}{
		{auth.Unauthenticated, http.StatusUnauthorized},
		{auth.Forbidden, http.StatusForbidden},
		{auth.Invalid, http.StatusBadRequest},
		{auth.Unavailable, http.StatusServiceUnavailable},
		{0, http.StatusInternalServerError},
	}
	for _, c := range cases {
		if got := AuthStatus(c.kind); got != c.want {
			t.Errorf("AuthStatus(%s) = %d, want %d", c.kind, got, c.want)
		}
	}
}
