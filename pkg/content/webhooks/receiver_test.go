package webhooks

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDocumentedReceiver runs the receiver's signature check that
// docs/content-api.md shows, as written, on messages signed here: it
// accepts a message signed with its secret, during a rotation too, and
// refuses another body, another secret and an old timestamp.
func TestDocumentedReceiver(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "content-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "**Checking a signature**")
	_, code, ok2 := strings.Cut(after, "```go\n")
	code, _, ok3 := strings.Cut(code, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/content-api.md has no Go block after **Checking a signature**")
	}
	secret, _ := NewSecret()
	other, _ := NewSecret()
	now := time.Now()
	type message struct {
		secrets []string
		at      time.Time
		body    string
		want    bool
	}
	cases := []message{
		{[]string{secret}, now, `{"type":"content.published"}`, true},
		{[]string{other, secret}, now, `{"type":"content.changed"}`, true},
		{[]string{other}, now, `{"type":"content.published"}`, false},
		{[]string{secret}, now.Add(-10 * time.Minute), `{"type":"content.published"}`, false},
	}
	var calls strings.Builder
	for i, c := range cases {
		sig, err := Sign(c.secrets, fmt.Sprint("msg_", i), c.at, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&calls, "\tcheck(%q, %q, %d, %q, %q, %v)\n", secret, fmt.Sprint("msg_", i), c.at.Unix(), sig, c.body, c.want)
	}
	// A tampered body, with a good signature of the first.
	sig, _ := Sign([]string{secret}, "msg_x", now, []byte(`{"a":1}`))
	fmt.Fprintf(&calls, "\tcheck(%q, %q, %d, %q, %q, false)\n", secret, "msg_x", now.Unix(), sig, `{"a":2}`)
	prog := `package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

` + code + `
func check(secret, id string, ts int64, sig, body string, want bool) {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	if got := verify(secret, h, []byte(body)); got != want {
		fmt.Printf("message %s: verify = %v, want %v\n", id, got, want)
		os.Exit(1)
	}
}

func main() {
` + calls.String() + `	fmt.Println("ok")
}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "receiver.go")
	if err := os.WriteFile(file, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GO111MODULE=off", "GOFLAGS=")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("the documented receiver: %v\n%s", err, out)
	}
}
