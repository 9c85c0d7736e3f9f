package httpserve

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ErrorBody is the shape of every error response. The reference client
// recognises "message":"Unauthorized" on 401 and this shape on 404.
type ErrorBody struct {
	ErrorType  string `json:"errorType"`
	HTTPStatus int    `json:"httpStatus"`
	Message    string `json:"message"`
	// Field names the request part at fault, when there is one.
	Field string `json:"field,omitempty"`
}

// WriteJSON sends v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"errorType":"InternalError","httpStatus":500,"message":"response could not be encoded"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// Error sends an ErrorBody. Client errors are "HandledError", as the
// reference client expects; server errors are "ServerError".
func Error(w http.ResponseWriter, status int, field, msg string) {
	kind := "HandledError"
	if status >= 500 {
		kind = "ServerError"
	}
	WriteJSON(w, status, ErrorBody{ErrorType: kind, HTTPStatus: status, Message: msg, Field: field})
}

// RetryAfter sets the Retry-After header in whole seconds, at least one.
func RetryAfter(w http.ResponseWriter, seconds float64) {
	s := int(seconds)
	if float64(s) < seconds {
		s++
	}
	if s < 1 {
		s = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(s))
}
