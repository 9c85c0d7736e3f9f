package httpserve

import (
	"net/http"

	"github.com/assistantcms/cms/pkg/auth"
)

// AuthStatus is the HTTP status every service answers an authentication
// failure of kind k with; the token domain reports kinds, not statuses.
func AuthStatus(k auth.Kind) int {
	switch k {
	case auth.Unauthenticated:
		return http.StatusUnauthorized
	case auth.Forbidden, auth.ScopeMissing:
		return http.StatusForbidden
	case auth.Invalid:
		return http.StatusBadRequest
	case auth.Unavailable:
		return http.StatusServiceUnavailable
	case auth.Throttled:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}
