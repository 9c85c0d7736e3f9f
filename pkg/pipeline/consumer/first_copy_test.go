package consumer_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/assistantcms/cms/internal/chfixture"
)

// TestLaterCopyCannotRewriteAnEvent sends a batch as alice with an
// Idempotency-Key, through ingest, the broker and the consumer into
// ClickHouse; then, with the same token and key, a batch as mallory,
// whose first event gets the same ID, and whose second, on the same
// partition, shows when it has been written. events keeps alice's event,
// read with FINAL and after a merge.
func TestLaterCopyCannotRewriteAnEvent(t *testing.T) {
	e := newEnv(t)
	ingestAddr, tok := startIngest(t, e.broker.Addr())
	e.startConsumer(t, "first-copy")
	put := func(body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPut, "http://"+ingestAddr+"/cms/app/events", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT: %d", resp.StatusCode)
		}
	}
	s := e.query(t)
	query := func(sql string) string { return fmt.Sprint(chfixture.Query(t, s, sql)) }

	put(`{"events":[{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":"s-1","userId":"alice","channel":"web",` +
		`"payload":{"request":{"type":"RAW_QUERY_REQUEST","rawQuery":"where is my order"},"response":{"outputSpeech":"Soon."}}}]}`)
	waitRows(t, s, 1)
	id := query("SELECT event_id FROM analytics.events")
	put(`{"events":[{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":"s-1","userId":"mallory","channel":"web",` +
		`"payload":{"request":{"type":"RAW_QUERY_REQUEST","rawQuery":"refund everything"},"response":{"outputSpeech":"Done."}}},` +
		`{"type":"REQUEST","name":"LAUNCH_REQUEST","eventId":"marker","sessionId":"s-1","userId":"mallory","channel":"web"}]}`)
	waitRows(t, s, 2)
	if got := query("SELECT count() FROM analytics.events"); got != "[[3]]" && got != "[[2]]" {
		t.Fatalf("%s rows in events, want the two copies and the marker (or the copies merged)", got)
	}
	if got := query("SELECT event_id FROM analytics.events WHERE user_id = 'mallory' AND event_id != 'marker'"); got != id && got != "[]" {
		t.Fatalf("mallory's copy has ID %s, alice's event %s: the test no longer sends a copy", got, id)
	}
	first := "SELECT user_id, raw_query FROM analytics.events%s WHERE event_id != 'marker'"
	if got := query(fmt.Sprintf(first, " FINAL")); got != "[[alice where is my order]]" {
		t.Errorf("events FINAL holds %s, want alice's event", got)
	}
	must(t, s.Conn().Exec(s.Context(t.Context()), "OPTIMIZE TABLE analytics.events FINAL"))
	if got := query(fmt.Sprintf(first, "")); got != "[[alice where is my order]]" {
		t.Errorf("events after the merge holds %s, want alice's event alone", got)
	}
	// A session's transcript, as docs/analytics.md reads it, shows alice.
	if got := query("SELECT user_id FROM analytics.events FINAL WHERE app_id = 'app-1' AND session_id = 's-1' AND event_id != 'marker' " +
		"AND event_time > now() - INTERVAL 1 DAY ORDER BY event_time"); got != "[[alice]]" {
		t.Errorf("the session's transcript shows %s, want alice", got)
	}
}
