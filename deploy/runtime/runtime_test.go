package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assistantcms/cms/internal/childproc"
	"github.com/assistantcms/cms/internal/localstack"
	"github.com/assistantcms/cms/pkg/pipeline/chstore"
)

// The local stack's demo token publishes for this app of this organization.
const (
	appID = "demo-app"
	orgID = "demo-org"
)

// manifest is what runtime.js wrote: every PUT it made, in order.
type manifest struct {
	SessionID string   `json:"sessionId"`
	Failures  []string `json:"failures"`
	Puts      []struct {
		Turn   string `json:"turn"`
		Status int    `json:"status"`
		// Answer is ingest's body: {"accepted", "rejected", "errors"}.
		Answer json.RawMessage   `json:"answer"`
		Events []json.RawMessage `json:"events"`
	} `json:"puts"`
}

// sent is one event as the reference client sent it.
type sent struct {
	turn   string
	raw    json.RawMessage
	fields map[string]any
}

// TestReferenceClientRuntime runs an assistant runtime built on the npm
// reference client (runtime.js) against the whole stack, through the
// gateway, and checks that every event it sent is one row of ClickHouse's
// events table with the columns the contract gives, and that nothing was
// quarantined.
func TestReferenceClientRuntime(t *testing.T) {
	node := referenceClient(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	st := startStack(ctx, t, map[string][]string{"consumer": {"FLUSH_INTERVAL=200ms"}})

	// ClickHouse stores whole seconds on old servers: the run's window
	// starts at the second it began.
	runStart := time.Now().UTC().Truncate(time.Second)
	m := runRuntime(ctx, t, node, st)
	events, accepted := checkPuts(t, m)
	types := checkCoverage(t, events)

	store, err := chstore.Open(ctx, chstore.Config{Addrs: []string{st.ClickHouse}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	qctx := store.Context(ctx)

	// Rows arrive within a few of the consumer's flushes; wait for as many
	// as ingest accepted, then compare (missing events are reported one by
	// one below rather than as a timeout).
	var count uint64
	waitFor(t, st, 60*time.Second, fmt.Sprintf("%d rows of %s in ClickHouse", accepted, appID), func() bool {
		if err := store.Conn().QueryRow(qctx, "SELECT count() FROM events FINAL WHERE app_id = ?", appID).Scan(&count); err != nil {
			t.Fatalf("count rows: %v", err)
		}
		return count >= uint64(accepted)
	})

	rows := readRows(qctx, t, store)
	if len(rows) != len(events) {
		t.Errorf("%d rows in events (FINAL) for %s, want one per event sent: %d", len(rows), appID, len(events))
	}
	var unique uint64
	if err := store.Conn().QueryRow(qctx, "SELECT uniqExact(event_id) FROM events WHERE app_id = ?", appID).Scan(&unique); err != nil {
		t.Fatal(err)
	}
	if unique != uint64(len(events)) {
		t.Errorf("%d distinct event IDs for %s, want %d", unique, appID, len(events))
	}
	checkRows(t, events, rows, runStart, time.Now().UTC().Add(time.Second))
	checkQuarantine(ctx, t, st, store, len(events)-accepted)
	t.Logf("%d events in %d PUTs, by type %v; %d rows compared", len(events), len(m.Puts), types, len(rows))
}

// startStack starts the local stack with env added to its services'
// environments, stopped with the test; a failed test logs the stack's
// output.
func startStack(ctx context.Context, t *testing.T, env map[string][]string) *localstack.Stack {
	t.Helper()
	logs := &childproc.Output{}
	st, err := localstack.Start(ctx, localstack.Options{Dir: t.TempDir(), Env: env, Log: func(string) io.Writer { return logs }})
	if err != nil {
		t.Fatalf("start the local stack: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		st.Stop()
		if t.Failed() {
			t.Logf("stack output:\n%s", tail(logs.String(), 8000))
		}
	})
	return st
}

// runRuntime runs runtime.js against the gateway, with env added to its
// environment, and reads its manifest.
func runRuntime(ctx context.Context, t *testing.T, node string, st *localstack.Stack, env ...string) manifest {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifest.json")
	cmd := exec.CommandContext(ctx, node, "runtime.js", path)
	cmd.Env = append(os.Environ(),
		"STUDIO_TOKEN="+st.Token,
		"STUDIO_APP_ID="+appID,
		"STUDIO_BASE_URL=http://"+st.Gateway,
		"STUDIO_ORG_TOKEN=", // an organization token in the environment would take precedence
		"AWS_SDK_JS_SUPPRESS_MAINTENANCE_MODE_MESSAGE=1",
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("node runtime.js ran in %v", time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("node runtime.js wrote no manifest (%v): %v\n%s", runErr, err, out.String())
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if runErr != nil || len(m.Failures) > 0 {
		t.Errorf("node runtime.js: %v, failures %q\n%s", runErr, m.Failures, out.String())
	}
	return m
}

// checkPuts holds every PUT to a 200 that accepted all of its events: the
// client keeps and resends a batch that got anything else, so one turn's
// events would reach a later PUT. It returns the events sent and how many
// ingest accepted.
func checkPuts(t *testing.T, m manifest) ([]sent, int) {
	if len(m.Puts) == 0 {
		t.Fatal("the runtime made no PUT")
	}
	var events []sent
	accepted := 0
	for i, p := range m.Puts {
		if p.Status != 200 {
			t.Errorf("PUT %d (turn %s): status %d, answer %s", i, p.Turn, p.Status, p.Answer)
			continue
		}
		for _, raw := range p.Events {
			var f map[string]any
			if err := json.Unmarshal(raw, &f); err != nil {
				t.Fatalf("PUT %d: event %s: %v", i, raw, err)
			}
			events = append(events, sent{turn: p.Turn, raw: raw, fields: f})
		}
		var a struct {
			Accepted, Rejected *int
			Errors             []struct {
				Index          int
				Field, Message string
			}
		}
		if err := json.Unmarshal(p.Answer, &a); err != nil || a.Accepted == nil || a.Rejected == nil {
			t.Errorf("PUT %d (turn %s): answer %s is not {accepted, rejected, errors} (%v)", i, p.Turn, p.Answer, err)
			accepted += len(p.Events)
			continue
		}
		accepted += *a.Accepted
		if *a.Accepted != len(p.Events) || *a.Rejected != 0 || len(a.Errors) > 0 {
			t.Errorf("PUT %d (turn %s): ingest accepted %d of %d events, rejected %d", i, p.Turn, *a.Accepted, len(p.Events), *a.Rejected)
		}
		for _, e := range a.Errors {
			name := "?"
			if e.Index >= 0 && e.Index < len(p.Events) {
				var ev struct{ Type, Name string }
				_ = json.Unmarshal(p.Events[e.Index], &ev)
				name = ev.Type + " " + ev.Name
			}
			t.Errorf("  event %d (%s): field %q: %s", e.Index, name, e.Field, e.Message)
		}
	}
	return events, accepted
}

// checkCoverage holds the run to what it is meant to exercise: every type
// of the client's EventType and knowledge-base events far over a small
// event's size. It returns the number of events of each type.
func checkCoverage(t *testing.T, events []sent) map[string]int {
	types := map[string]int{}
	for _, e := range events {
		types[str(e.fields["type"])]++
	}
	for _, ty := range []string{"REQUEST", "ERROR", "AnalyticsEvent", "MessageEvent", "LambdaSuccessEvent", "LambdaErrorEvent"} {
		if types[ty] == 0 {
			t.Errorf("the runtime sent no %s event (sent %v)", ty, types)
		}
	}
	kb := 0
	for _, e := range events {
		r := request(e.fields)
		res, ok := r["knowledgeBaseResult"].(map[string]any)
		if !ok {
			continue
		}
		kb++
		if n := len(list(res["documents"])) + len(list(res["suggested"])); n != 10 {
			t.Errorf("%s %s: %d knowledge-base documents, want 10", e.fields["type"], e.fields["name"], n)
		}
		if n := len(e.raw); n < 100<<10 || n > 160<<10 {
			t.Errorf("%s %s: %d bytes, want a knowledge-base event of 100 to 160 KB", e.fields["type"], e.fields["name"], n)
		}
	}
	if kb != 2 {
		t.Errorf("%d events carry a knowledge-base result, want the REQUEST and REQUEST_RESPONSE of one turn", kb)
	}
	return types
}

// row is one row of the events table: each selected column by name, as
// the driver scans it.
type row map[string]any

// columns are the contract's columns of the events table, in order.
var columns = []string{
	"event_id", "app_id", "organization_id", "event_time", "received_at", "type", "name", "session_id", "user_id",
	"channel", "platform", "selected_handler", "current_handler", "environment",
	"request_type", "intent_id", "raw_query", "match_confidence",
	"tags", "tag", "output_display_text", "output_ssml", "display_count",
	"error_message", "error_stack", "message", "kb_used", "kb_documents", "kb_faqs",
	"payload", "extra",
}

// readRows reads every row of the app after deduplication. A contract
// column the table lacks is an error of its own, and the others are still
// read and compared.
func readRows(ctx context.Context, t *testing.T, store *chstore.Store) []row {
	have := map[string]bool{}
	cr, err := store.Conn().Query(ctx, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = 'events'")
	if err != nil {
		t.Fatal(err)
	}
	for cr.Next() {
		var name string
		if err := cr.Scan(&name); err != nil {
			t.Fatal(err)
		}
		have[name] = true
	}
	cr.Close()
	var sel []string
	for _, c := range columns {
		if have[c] {
			sel = append(sel, c)
		} else {
			t.Errorf("the events table has no column %s", c)
		}
	}
	rs, err := store.Conn().Query(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM events FINAL WHERE app_id = ?", appID)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	types := rs.ColumnTypes()
	var out []row
	for rs.Next() {
		dest := make([]any, len(types))
		for i, ct := range types {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rs.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		r := row{}
		for i, c := range sel {
			r[c] = reflect.ValueOf(dest[i]).Elem().Interface()
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// identity is how an event and its row are paired: the client sends no
// event ID, so by content. The runtime sets the selected handler per turn,
// which tells apart the "Lambda Finished" events of a session.
func identity(session, typ, name, handler, payload string) string {
	return strings.Join([]string{session, typ, name, handler, canonical(payload)}, "\x00")
}

func checkRows(t *testing.T, events []sent, rows []row, from, to time.Time) {
	byID := map[string][]row{}
	for _, r := range rows {
		k := identity(str(r["session_id"]), str(r["type"]), str(r["name"]), str(r["selected_handler"]), str(r["payload"]))
		byID[k] = append(byID[k], r)
	}
	seen := map[string]bool{}
	ids := map[string]bool{}
	for _, e := range events {
		f := e.fields
		label := fmt.Sprintf("turn %s, %s %s", e.turn, f["type"], f["name"])
		k := identity(str(f["sessionId"]), str(f["type"]), str(f["name"]), str(f["selectedHandler"]), payloadText(f))
		if seen[k] {
			t.Fatalf("%s: two events of the run have the same identity; the runtime must tell them apart", label)
		}
		seen[k] = true
		match := byID[k]
		if len(match) != 1 {
			t.Errorf("%s: %d rows, want 1", label, len(match))
			for _, r := range rows {
				if r["type"] == f["type"] && r["name"] == f["name"] && r["selected_handler"] == str(f["selectedHandler"]) {
					t.Logf("  a row of that type, name and handler: payload %.300s", str(r["payload"]))
				}
			}
			continue
		}
		r := match[0]
		delete(byID, k)
		id := str(r["event_id"])
		if id == "" || ids[id] {
			t.Errorf("%s: event_id %q is empty or another row's", label, id)
		}
		ids[id] = true
		for _, c := range columns {
			got, ok := r[c]
			if !ok || c == "event_id" {
				continue // missing columns were reported once
			}
			if msg := compare(c, got, expected(c, f), from, to); msg != "" {
				t.Errorf("%s: column %s: %s", label, c, msg)
			}
		}
	}
	for _, rs := range byID {
		for _, r := range rs {
			t.Errorf("a row no event of the run explains: %s %s session %s, payload %.300s", r["type"], r["name"], r["session_id"], str(r["payload"]))
		}
	}
}

// jsonText marks a column compared as JSON by meaning, not by bytes.
type jsonText string

// window marks received_at, which must fall within the run.
type window struct{}

// expected is the column's value for event f under the contract.
func expected(col string, f map[string]any) any {
	typ, name := str(f["type"]), str(f["name"])
	p := f["payload"]
	pm, _ := p.(map[string]any)
	isRR := name == "REQUEST_RESPONSE"
	isReq := typ == "REQUEST"
	req := request(f)
	switch col {
	case "app_id":
		return str(f["appId"])
	case "organization_id":
		return orgID
	case "event_time":
		t, err := time.Parse(time.RFC3339Nano, str(f["isoTime"]))
		if err != nil {
			return fmt.Sprintf("isoTime %v unreadable", f["isoTime"])
		}
		return t.UTC()
	case "received_at":
		return window{}
	case "type", "name":
		return str(f[col])
	case "session_id", "user_id", "channel", "platform", "selected_handler", "current_handler", "environment":
		return str(f[camel(col)])
	case "request_type":
		switch {
		case isRR:
			return str(req["type"])
		case isReq:
			return first(req["type"], name)
		}
		return ""
	case "intent_id":
		switch {
		case isRR:
			return str(req["intentId"])
		case isReq:
			return first(pm["intent"], req["intentId"])
		}
		return ""
	case "raw_query":
		switch {
		case isRR:
			return str(req["rawQuery"])
		case isReq:
			return first(pm["rawQuery"], req["rawQuery"])
		}
		return ""
	case "match_confidence":
		var v any
		switch {
		case isRR:
			v = req["matchConfidence"]
		case isReq:
			if v = pm["matchConfidence"]; v == nil {
				v = req["matchConfidence"]
			}
		}
		if n, ok := v.(float64); ok {
			f32 := float32(n)
			return &f32
		}
		return (*float32)(nil)
	case "tags", "tag":
		tags := tagList(f["tag"])
		if _, ok := f["tag"]; !ok {
			tags = tagList(pm["tag"])
		}
		if col == "tags" {
			return tags
		}
		if len(tags) == 0 {
			return ""
		}
		return tags[0]
	case "output_display_text", "output_ssml":
		if !isRR {
			return ""
		}
		resp, _ := pm["response"].(map[string]any)
		switch s := resp["outputSpeech"].(type) {
		case string:
			if col == "output_display_text" {
				return s
			}
		case map[string]any:
			if col == "output_display_text" {
				return str(s["displayText"])
			}
			return str(s["ssml"])
		}
		return ""
	case "display_count":
		resp, _ := pm["response"].(map[string]any)
		if !isRR {
			return uint16(0)
		}
		return uint16(len(list(resp["displays"])))
	case "error_message":
		if typ == "ERROR" {
			return str(pm["message"])
		}
		if s, ok := p.(string); ok && typ == "LambdaErrorEvent" {
			return s
		}
		return ""
	case "error_stack":
		if s, ok := pm["stack"]; ok && typ == "ERROR" {
			b, _ := json.Marshal(s)
			return jsonText(b)
		}
		return ""
	case "message":
		s, _ := p.(string)
		return s
	case "kb_used", "kb_documents", "kb_faqs":
		kb, ok := req["knowledgeBaseResult"].(map[string]any)
		if !isRR && !isReq {
			ok = false
		}
		switch {
		case col == "kb_used" && ok:
			return uint8(1)
		case col == "kb_used":
			return uint8(0)
		case col == "kb_documents":
			return uint16(len(list(kb["documents"])) + len(list(kb["suggested"])))
		}
		return uint16(len(list(kb["faqs"])))
	case "payload":
		return jsonText(payloadText(f))
	case "extra":
		extra := map[string]any{}
		for k, v := range f {
			switch k {
			case "type", "name", "sessionId", "userId", "channel", "platform", "selectedHandler", "currentHandler",
				"environment", "isoTime", "payload", "appId", "eventId":
			default:
				extra[k] = v
			}
		}
		b, _ := json.Marshal(extra)
		return jsonText(b)
	}
	return fmt.Sprintf("no expectation for %s", col)
}

// compare says how got differs from want, or "" when it does not.
func compare(col string, got, want any, from, to time.Time) string {
	switch w := want.(type) {
	case window:
		g, ok := got.(time.Time)
		if !ok || g.Before(from) || g.After(to) {
			return fmt.Sprintf("%v, want a time within the run, %v to %v", got, from, to)
		}
		return ""
	case time.Time:
		// Old servers keep whole seconds, current ones milliseconds.
		g, ok := got.(time.Time)
		if !ok || !(g.Equal(w) || g.Equal(w.Truncate(time.Second))) {
			return fmt.Sprintf("%v, want %v", got, w)
		}
		return ""
	case jsonText:
		g, ok := got.(string)
		if !ok || canonical(g) != canonical(string(w)) {
			return fmt.Sprintf("%.300v, want %.300s", got, w)
		}
		return ""
	case *float32:
		g, ok := got.(*float32)
		switch {
		case !ok:
			return fmt.Sprintf("%T, want *float32", got)
		case g == nil && w == nil:
			return ""
		case g == nil || w == nil || *g != *w:
			return fmt.Sprintf("%s, want %s", fmtF32(g), fmtF32(w))
		}
		return ""
	case []string:
		g, ok := got.([]string)
		if !ok || !slices.Equal(g, w) {
			return fmt.Sprintf("%#v, want %#v", got, w)
		}
		return ""
	}
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		return fmt.Sprintf("%T %v, want %T %v", got, got, want, want)
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%#v, want %#v", got, want)
	}
	return ""
}

// checkQuarantine holds the quarantine table to no row of the app. When
// ingest rejected events, it first waits for their records so that the
// failure shows why.
func checkQuarantine(ctx context.Context, t *testing.T, st *localstack.Stack, store *chstore.Store, rejected int) {
	qctx := store.Context(ctx)
	var n uint64
	count := func() error {
		return store.Conn().QueryRow(qctx, "SELECT count() FROM quarantine WHERE app_id = ?", appID).Scan(&n)
	}
	if err := count(); err != nil {
		t.Errorf("read the quarantine table: %v", err)
		return
	}
	if rejected > 0 {
		deadline := time.Now().Add(30 * time.Second)
		for n < uint64(rejected) && time.Now().Before(deadline) {
			select {
			case name := <-st.Exited():
				t.Fatalf("%s exited", name)
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
			if err := count(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		return
	}
	t.Errorf("%d rows of %s in the quarantine table, want none", n, appID)
	rs, err := store.Conn().Query(qctx, "SELECT toString(reason), toString(field), toString(message), toString(event_bytes) FROM quarantine WHERE app_id = ?", appID)
	if err != nil {
		t.Errorf("read the quarantined rows: %v", err)
		return
	}
	defer rs.Close()
	for rs.Next() {
		var reason, field, message, size string
		if err := rs.Scan(&reason, &field, &message, &size); err != nil {
			t.Fatal(err)
		}
		t.Errorf("  quarantined (%s bytes): %s: field %q: %s", size, reason, field, message)
	}
}

// waitFor polls cond until it holds, failing at the deadline or when a
// service of the stack exits.
func waitFor(t *testing.T, st *localstack.Stack, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %v: %s", d, what)
		}
		select {
		case name := <-st.Exited():
			t.Fatalf("%s exited while waiting for %s", name, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// request is the request object an event carries (payload.request), nil
// when it has none.
func request(f map[string]any) map[string]any {
	pm, _ := f["payload"].(map[string]any)
	r, _ := pm["request"].(map[string]any)
	return r
}

// payloadText is the event's payload as JSON text, "" when it has none.
func payloadText(f map[string]any) string {
	p, ok := f["payload"]
	if !ok || p == nil {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// canonical re-encodes JSON text with sorted keys, so that texts equal in
// meaning are equal; text that is not JSON stays as it is.
func canonical(s string) string {
	if s == "" {
		return ""
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// tagList is a tag as the contract reads it: a string is one tag, an array
// its strings.
func tagList(v any) []string {
	tags := []string{}
	switch v := v.(type) {
	case string:
		tags = append(tags, v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				tags = append(tags, s)
			}
		}
	}
	return tags
}

// first is the first of vs that is a string.
func first(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok {
			return s
		}
	}
	return ""
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// camel turns a column name into the event's field name (session_id is
// sessionId).
func camel(col string) string {
	parts := strings.Split(col, "_")
	for i := 1; i < len(parts); i++ {
		parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
	}
	return strings.Join(parts, "")
}

func fmtF32(f *float32) string {
	if f == nil {
		return "NULL"
	}
	return fmt.Sprint(*f)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// referenceClient is the path of node, failing t when node or the
// reference client's packages are not installed.
func referenceClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: run `go run ./dev/test` (it installs Debian's nodejs and npm): %v", err)
	}
	if _, err := os.Stat(filepath.Join("node_modules", "stentor-service-studio", "package.json")); err != nil {
		t.Fatalf("the reference client is not installed in deploy/runtime/node_modules: run `go run ./dev/test` or `npm ci` in deploy/runtime: %v", err)
	}
	return node
}
