package contentapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// series counts the series of metric families whose names start with
// prefix in a /metrics text.
func series(metrics, prefix string) int {
	n := 0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, prefix) {
			n++
		}
	}
	return n
}

// rawRequest sends one request line and headers as written, so that any
// method can be sent, and returns the status of the answer.
func rawRequest(t *testing.T, addr, method, target, token string) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := method + " " + target + " HTTP/1.1\r\nHost: cms.test\r\nConnection: close\r\n"
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestInventedValuesAddNoSeries is the attack of a client without a
// token: requests with methods and paths nobody uses, each new one, must
// not add metric series, which stay for the life of the process.
func TestInventedValuesAddNoSeries(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	round := func(tag string) int {
		for i := range 20 {
			method := fmt.Sprintf("X%s%d%s", tag, i, strings.Repeat("M", 3000))
			for _, target := range []string{"/cms/handler", "/cms/graphql", fmt.Sprintf("/invented/%s/%d", tag, i)} {
				rawRequest(t, addr, method, target, "")
				rawRequest(t, addr, method, target, e.tokens["app1"])
			}
			// Ordinary methods on invented paths, too.
			rawRequest(t, addr, http.MethodGet, fmt.Sprintf("/cms/handler/%s-%d", tag, i), e.tokens["app1"])
			rawRequest(t, addr, http.MethodGet, fmt.Sprintf("/nowhere/%s/%d", tag, i), "")
		}
		m := e.get("/metrics", "")
		return series(m.body, "cms_api_requests_total{") + series(m.body, "cms_api_request_duration_seconds_count{")
	}
	// Reading /metrics adds its own series once; the rounds start after.
	e.get("/metrics", "")
	first := round("a")
	second := round("b")
	if second != first {
		t.Errorf("a second round of invented methods and paths grew the request series from %d to %d", first, second)
	}
	if first > 40 {
		t.Errorf("%d request series after 120 invented requests; the labels are not a fixed set", first)
	}
	m := e.get("/metrics", "")
	if !strings.Contains(m.body, `method="other"`) || strings.Contains(m.body, "MMMM") {
		t.Error("invented methods are not all counted as other")
	}
}

// TestTokenGuessingThrottledByNetwork: past its burst of failed
// authentications, a network's unknown tokens are answered 429 with
// Retry-After on REST and GraphQL alike, without a lookup.
func TestTokenGuessingThrottledByNetwork(t *testing.T) {
	e := newEnv(t, ServiceConfig{AuthFailureRate: 0.01, AuthFailureBurst: 5})
	guess := func(i int) string { return fmt.Sprintf("cms_%016x_%s", i+1, strings.Repeat("A", 43)) }
	var statuses []int
	for i := range 8 {
		path := "/cms/handler"
		if i%2 == 1 {
			path = "/cms/graphql?query=%7Bhandlers%7BintentId%7D%7D"
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+guess(i))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			t.Errorf("request %d: 429 without Retry-After", i)
		}
	}
	if want := []int{401, 401, 401, 401, 401, 429, 429, 429}; fmt.Sprint(statuses) != fmt.Sprint(want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
}
