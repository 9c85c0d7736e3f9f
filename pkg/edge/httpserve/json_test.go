package httpserve

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

func TestError(t *testing.T) {
	cases := []struct {
		status   int
		field    string
		wantType string
	}{
		{401, "", "HandledError"},
		{404, "", "HandledError"},
		{415, "Content-Type", "HandledError"},
		{503, "", "ServerError"},
	}
	for _, tc := range cases {
		rec := httptest.NewRecorder()
		Error(rec, tc.status, tc.field, "msg")
		var b ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		if rec.Code != tc.status || b.HTTPStatus != tc.status || b.ErrorType != tc.wantType || b.Message != "msg" || b.Field != tc.field {
			t.Errorf("status %d: got %d %+v", tc.status, rec.Code, b)
		}
		if got := rec.Header().Get("Content-Length"); got != itoa(rec.Body.Len()) {
			t.Errorf("Content-Length %s for %d bytes", got, rec.Body.Len())
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestRetryAfter(t *testing.T) {
	cases := map[float64]string{0: "1", 0.2: "1", 1: "1", 1.01: "2", 30: "30"}
	for in, want := range cases {
		rec := httptest.NewRecorder()
		RetryAfter(rec, in)
		if got := rec.Header().Get("Retry-After"); got != want {
			t.Errorf("RetryAfter(%v) = %s, want %s", in, got, want)
		}
	}
}
