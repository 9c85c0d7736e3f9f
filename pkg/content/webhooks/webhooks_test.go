package webhooks

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSignStandardWebhooks signs the example of the Standard Webhooks
// specification and checks its signature.
func TestSignStandardWebhooks(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	at := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	sig, err := Sign([]string{secret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", at, body)
	if err != nil || sig != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("Sign = %q, %v", sig, err)
	}
	if err := Verify(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, body, at.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify: %v", err)
	}
	for _, tc := range []struct {
		name, id, ts, sig string
		body              string
		now               time.Time
	}{
		{"another body", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, `{"test": 1}`, at},
		{"another id", "msg_other", "1614265330", sig, string(body), at},
		{"too old", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", sig, string(body), at.Add(6 * time.Minute)},
		{"no v1", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", "v2," + strings.TrimPrefix(sig, "v1,"), string(body), at},
		{"not a number", "msg_p5jXN8AQM9LWM0D4loKWxJek", "soon", sig, string(body), at},
	} {
		if err := Verify(secret, tc.id, tc.ts, tc.sig, []byte(tc.body), tc.now, 5*time.Minute); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestRotationSignsWithBoth: during the overlap both secrets sign, and a
// receiver with either accepts; after it only the new one does.
func TestRotationSignsWithBoth(t *testing.T) {
	oldS, _ := NewSecret()
	newS, _ := NewSecret()
	now := time.Unix(1_800_000_000, 0)
	w := Webhook{Secret: newS, PreviousSecret: oldS, PreviousUntil: now.Add(time.Hour)}
	sig, err := Sign(w.Secrets(now), "msg_1", now, []byte("{}"))
	if err != nil || len(strings.Fields(sig)) != 2 {
		t.Fatalf("Sign during the overlap = %q, %v", sig, err)
	}
	for _, s := range []string{oldS, newS} {
		if err := Verify(s, "msg_1", "1800000000", sig, []byte("{}"), now, time.Minute); err != nil {
			t.Errorf("a receiver with one of the secrets: %v", err)
		}
	}
	if got := w.Secrets(now.Add(2 * time.Hour)); len(got) != 1 || got[0] != newS {
		t.Errorf("after the overlap: %v", got)
	}
	if !strings.HasPrefix(newS, "whsec_") || newS == oldS {
		t.Errorf("secrets %q, %q", oldS, newS)
	}
}

func TestRetryNext(t *testing.T) {
	r := Retry{First: 10 * time.Second, Longest: time.Hour, For: 24 * time.Hour}
	queued := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		attempts int
		jitter   float64
		after    time.Duration
	}{
		{1, 0, 5 * time.Second}, {1, 0.999999, 10 * time.Second}, {2, 0, 10 * time.Second}, {3, 0, 20 * time.Second},
		{20, 0, 30 * time.Minute}, {20, 0.999999, time.Hour},
	} {
		next, ok := r.Next(queued, queued, tc.attempts, func() float64 { return tc.jitter })
		if got := next.Sub(queued).Round(time.Second); got != tc.after || !ok {
			t.Errorf("after attempt %d, jitter %v: wait %v (%v), want %v", tc.attempts, tc.jitter, got, ok, tc.after)
		}
	}
	if _, ok := r.Next(queued, queued.Add(24*time.Hour-time.Minute), 30, func() float64 { return 0.5 }); ok {
		t.Error("retried past a day")
	}
}

func TestCheck(t *testing.T) {
	ok := Webhook{ID: "ci-1", URL: "https://example.com/hook", Topics: []string{TopicPublished}}
	if errs := ok.Check(); len(errs) > 0 {
		t.Fatalf("a good webhook: %v", errs)
	}
	for _, tc := range []struct {
		change func(*Webhook)
		want   string
	}{
		{func(w *Webhook) { w.ID = "" }, "id:"},
		{func(w *Webhook) { w.ID = "a b" }, "id:"},
		{func(w *Webhook) { w.URL = strings.Repeat("x", MaxURLBytes+1) }, "url:"},
		{func(w *Webhook) { w.Topics = nil }, "topics:"},
		{func(w *Webhook) { w.Topics = []string{"content.deleted"} }, `topics[0]: "content.deleted" is not a topic`},
		{func(w *Webhook) { w.ErrorRate = -1 }, "errorRate:"},
	} {
		w := ok
		tc.change(&w)
		if errs := w.Check(); len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", w, errs, tc.want)
		}
	}
}
