package egress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	for _, tc := range []struct {
		addr  string
		allow []netip.Prefix
		want  string // "" allowed, else what the refusal says
	}{
		{"93.184.216.34", nil, ""},
		{"2606:4700::1111", nil, ""},
		{"127.0.0.1", nil, "loopback"},
		{"::1", nil, "loopback"},
		{"::ffff:127.0.0.1", nil, "loopback"},
		{"10.1.2.3", nil, "private"},
		{"172.16.0.1", nil, "private"},
		{"192.168.1.1", nil, "private"},
		{"fd12::1", nil, "private"},
		{"169.254.169.254", nil, "link-local"},
		{"fe80::1", nil, "link-local"},
		{"fd00:ec2::254", nil, "private"},
		{"100.64.0.1", nil, "reserved"},
		{"0.0.0.0", nil, "unspecified"},
		{"239.1.1.1", nil, "multicast"},
		{"127.0.0.1", loopback, ""},
		{"10.0.0.1", loopback, "private"},
	} {
		err := Check(netip.MustParseAddr(tc.addr), tc.allow)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.addr, err)
		case tc.want != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.addr, err, tc.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"ftp://example.com/x", "scheme"},
		{"https://user:pw@93.184.216.34/", "user or password"},
		{"http://127.0.0.1:8080/hook", "loopback"},
		{"http://[::1]/hook", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://localhost/hook", "loopback"},
		{"https:///nohost", "no host"},
		{"https://93.184.216.34/hook", ""},
	} {
		_, err := CheckURL(t.Context(), tc.url, nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.url, err, tc.want)
		}
	}
	if _, err := CheckURL(t.Context(), "http://localhost/hook", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}); err != nil {
		t.Errorf("loopback allowed by the operator: %v", err)
	}
}

// TestClient: every connection is checked (a URL that passed before is
// refused when it points at a refused address), redirects are answered,
// not followed, answers are read up to the bound, and a destination
// that does not answer is given up on.
func TestClient(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/target", http.StatusFound)
	})
	mux.HandleFunc("/target", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	mux.HandleFunc("/large", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 1<<20)) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(c *Client, path string) (Answer, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		return c.Do(req)
	}
	if _, err := get(New(Options{}), "/target"); !errors.Is(err, ErrRefused) {
		t.Errorf("loopback reached without being allowed: %v", err)
	}
	c := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MaxAnswer: 100, Timeout: 300 * time.Millisecond})
	if a, err := get(c, "/redirect"); err != nil || a.Status != http.StatusFound || followed.Load() != 0 {
		t.Errorf("a redirect: %+v, %v, followed %d", a, err, followed.Load())
	}
	if a, err := get(c, "/large"); err != nil || len(a.Body) != 100 {
		t.Errorf("a large answer: %d bytes, %v", len(a.Body), err)
	}
	start := time.Now()
	if _, err := get(c, "/slow"); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a destination that does not answer: %v after %v", err, time.Since(start))
	}
}

func TestParseAllow(t *testing.T) {
	got, err := ParseAllow("127.0.0.1, 10.0.0.0/8 ::1")
	if err != nil || len(got) != 3 || got[0].String() != "127.0.0.1/32" || got[1].String() != "10.0.0.0/8" || got[2].String() != "::1/128" {
		t.Errorf("ParseAllow = %v, %v", got, err)
	}
	if _, err := ParseAllow("nope"); err == nil {
		t.Error("a word parsed as a network")
	}
}
