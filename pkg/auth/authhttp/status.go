// Package authhttp is the token domain at the HTTP edge: the one answer
// every service gives a request refused for its token (Refuse). The
// domain (pkg/auth) reports kinds of failure and names no status; the
// generic HTTP plumbing (pkg/edge/httpserve) knows nothing of tokens; the
// services that check tokens over HTTP (ingest, the content API and its
// live view, GraphQL) meet here.
package authhttp

import (
	"net/http"

	"github.com/assistantcms/cms/pkg/auth"
)

// Status is the HTTP status every service answers an authentication
// failure of kind k with.
func Status(k auth.Kind) int {
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
