package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Limits the bad-input test runs the binary with: smaller than the
// defaults, so that every limit is reached by bodies quick to send. The
// timeouts and the minimum upload rate's grace are short so that slow
// clients are cut off quickly; a batch of ten thousand events is exactly
// the maximum.
const (
	badMaxEvents         = 10_000
	badMaxBody           = 1 << 20
	badMaxDecompressed   = 5 << 20
	badMaxEventBytes     = 64 << 10
	badReadHeaderTimeout = time.Second
	// Long enough that what must be answered before the read timeout
	// (within half of it) keeps seconds of margin on a loaded machine.
	badReadTimeout = 6 * time.Second
	// A body must arrive at a KiB a second after half a second.
	badMinUploadRate  = 1024
	badMinUploadGrace = 500 * time.Millisecond
	// Few request slots, so that one app's slow bodies could take them
	// all but for its share (a quarter, by default).
	badInFlight = 16
	badAppShare = badInFlight / 4
	// A small memory budget for bodies: three bombs' worth, each counted
	// with the records it could make.
	badBodyMemory = 3 * 3 * badMaxDecompressed
	// peakRSSBound is what the process may reach over the whole test,
	// concurrent bombs included (measured: about 60 MiB for the cases one
	// at a time, 100 to 140 MiB with the bombs; 310 MiB with the bombs
	// when neither request slots nor body memory are limited). A gzip bomb
	// decompressed in full would need 1 GiB.
	peakRSSBound = 192 << 20
)

// answer is what the server sent back.
type answer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any // nil unless the body is a JSON object
}

// exchange sends one request on a new connection and reads the answer.
// The request is written while the answer is read, because the server
// may answer (413, 431) before it has read everything. halfClose closes
// the sending side once the request is written, as some clients do.
func exchange(addr string, req []byte, halfClose bool) (answer, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return answer{}, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return answer{}, err
	}
	go func() {
		// A write error means the server stopped reading; its answer
		// tells why.
		if _, err := conn.Write(req); err == nil && halfClose {
			_ = conn.(*net.TCPConn).CloseWrite()
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return answer{}, fmt.Errorf("read answer: %w", err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if a.raw, err = io.ReadAll(resp.Body); err != nil {
		return a, fmt.Errorf("read answer body: %w", err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(a.raw, &a.body); err != nil {
			return a, fmt.Errorf("answer is not a JSON object: %w", err)
		}
	}
	return a, nil
}

// request renders a request. hdr holds name/value pairs; a pair whose
// name is already in base replaces it, and an empty value drops it.
func request(path string, base, hdr []string, body []byte, chunked bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "PUT %s HTTP/1.1\r\nHost: ingest\r\nConnection: close\r\n", path)
	set := map[string]string{}
	var order []string
	for _, pairs := range [][]string{base, hdr} {
		for i := 0; i+1 < len(pairs); i += 2 {
			k := http.CanonicalHeaderKey(pairs[i])
			if _, ok := set[k]; !ok {
				order = append(order, k)
			}
			set[k] = pairs[i+1]
		}
	}
	for _, k := range order {
		if set[k] != "" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, set[k])
		}
	}
	if !chunked {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
		b.Write(body)
		return b.Bytes()
	}
	b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	cw := httputil.NewChunkedWriter(&b)
	for len(body) > 0 { // chunks of 64 KiB, as a streaming client sends
		n := min(len(body), 64<<10)
		_, _ = cw.Write(body[:n])
		body = body[n:]
	}
	_ = cw.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

func batchOf(events ...string) []byte {
	return []byte(`{"events":[` + strings.Join(events, ",") + `]}`)
}

const launchEvent = `{"type":"REQUEST","name":"LAUNCH_REQUEST","channel":"web","platform":"web","sessionId":"s","userId":"u"}`

func rrEvent(payload string) string {
	return `{"type":"AnalyticsEvent","name":"REQUEST_RESPONSE","sessionId":"s","payload":` + payload + `}`
}

func gzipOf(t *testing.T, level int, parts ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if _, err := zw.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// gzipBomb returns n MiB of zeros gzipped as n/16 concatenated gzip
// members of 16 MiB each (RFC 1952 allows several members, and Go's reader
// reads them all), which is as small as one member and far quicker to make.
func gzipBomb(t *testing.T, mib int) []byte {
	t.Helper()
	member := gzipOf(t, gzip.BestCompression, make([]byte, 16<<20))
	return bytes.Repeat(member, mib/16)
}

// offsetOf is the offset of the first occurrence of s in b.
func offsetOf(t *testing.T, b []byte, s string) int {
	t.Helper()
	i := bytes.Index(b, []byte(s))
	if i < 0 {
		t.Fatalf("%q not in the body", s)
	}
	return i
}

// vmHWM reads the peak resident set size of process pid.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// partitionOffset is where one partition of a topic begins and ends.
type partitionOffset struct {
	id          int
	first, last int64
}

// partitionOffsets reads the offsets of every partition of topic.
func partitionOffsets(ctx context.Context, t *testing.T, broker, topic string) []partitionOffset {
	t.Helper()
	conn, err := kafka.DialContext(ctx, "tcp", broker)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(topic)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]partitionOffset, len(parts))
	for i, p := range parts {
		pc, err := kafka.DialLeader(ctx, "tcp", broker, topic, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		first, last, err := pc.ReadOffsets()
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = partitionOffset{p.ID, first, last}
	}
	return out
}

// topicRecords counts the records of every partition of topic.
func topicRecords(t *testing.T, broker, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var n int64
	for _, p := range partitionOffsets(ctx, t, broker, topic) {
		n += p.last - p.first
	}
	return n
}

// eventErr is the first per-event error an answer must list.
type eventErr struct {
	index        int
	field, inMsg string
}

// badCase is one request and the answer it must get. Cases that name
// per-event problems use ?strict=true, so that the answer is a 422 listing
// them; without it the answer is a 200 with the events quarantined.
type badCase struct {
	name    string
	query   string   // appended to /cms/app/events
	hdr     []string // header pairs over the defaults; "" drops one
	body    []byte
	chunked bool
	raw     []byte // the whole request as sent, instead of the above
	// halfClose closes the client's sending side after the request.
	halfClose bool

	status   int
	field    string   // of an error body
	inMsg    []string // in an error body's message (or a plain body)
	plain    bool     // the answer comes from net/http, as text
	event    *eventErr
	errors   int // errors listed in a 200 or 422, when not 0
	accepted int // in a 200
	rejected int // in a 200 or 422
}

// TestBadInput runs the ingest binary and sends it hand-written bad input,
// one request at a time: each gets a precise 4xx naming the offset, event
// index or field at fault (or an acceptance where the input is valid after
// all), never a 5xx. Then gzip bombs arrive all at once (refused, or shed
// with 503 or 429 and Retry-After) and slow clients are cut off by the
// timeouts and the minimum upload rate.
// The process never dies, stores exactly what it answered for, answers a
// valid batch at the end, and its peak memory stays under a bound. The
// read timeout is set by its former variable, READ_TIMEOUT, which must
// still hold.
func TestBadInput(t *testing.T) {
	p := startIngest(t, "MAX_EVENTS="+strconv.Itoa(badMaxEvents), "MAX_BODY_BYTES="+strconv.Itoa(badMaxBody),
		"MAX_DECOMPRESSED_BYTES="+strconv.Itoa(badMaxDecompressed), "MAX_EVENT_BYTES="+strconv.Itoa(badMaxEventBytes),
		"HTTP_READ_HEADER_TIMEOUT="+badReadHeaderTimeout.String(), "READ_TIMEOUT="+badReadTimeout.String(),
		"MAX_IN_FLIGHT="+strconv.Itoa(badInFlight), "MAX_BODY_MEMORY="+strconv.Itoa(badBodyMemory),
		"MIN_UPLOAD_RATE="+strconv.Itoa(badMinUploadRate), "MIN_UPLOAD_GRACE="+badMinUploadGrace.String())
	pid := p.cmd.Process.Pid
	startRSS := vmHWM(t, pid)
	token := p.tokens["a"]
	base := []string{"Authorization", "Bearer " + token, "Content-Type", "application/json"}
	gz := []string{"Content-Encoding", "gzip"}

	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	deepObj := strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000)
	deepPrefix := `{"events":[` + launchEvent + `,{"type":"REQUEST","name":"X","payload":`
	deepAt := len(deepPrefix) + 125 // the root, events and the event use three of 128 levels
	big := strings.Repeat("x", 10<<20)
	bigEvent := func(size int) string {
		head, tail := `{"appId":"a","type":"REQUEST","name":"BIG","payload":"`, `"}`
		return head + strings.Repeat("y", size-len(head)-len(tail)) + tail
	}
	many := func(n int, ev string) []byte {
		evs := make([]string, n)
		for i := range evs {
			evs[i] = ev
		}
		return batchOf(evs...)
	}
	badItems := make([]string, 60_000)
	for i := range badItems {
		badItems[i] = `{"title":1}`
	}
	itemsBomb := batchOf(rrEvent(`{"request":{},"response":{"displays":[{"type":"LIST","items":[` + strings.Join(badItems, ",") + `]}]}}`))
	// Events that compress well with gzip but not with the producer's lz4
	// (random hex), all of one session and so of one partition: 1.9 MB of
	// records in one produce request unless the producer splits it.
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	hexEvents := make([]string, 30)
	for i := range hexEvents {
		noise := make([]byte, 32_000)
		for j := range noise {
			noise[j] = byte(rng.Uint32())
		}
		hexEvents[i] = `{"type":"REQUEST","name":"HEX","sessionId":"one","payload":"` + hex.EncodeToString(noise) + `"}`
	}
	bomb := gzipBomb(t, 1024)
	utf8Key := []byte(`{"events":[` + launchEvent + `,{"type":"REQUEST","name":"X","k` + "\xff" + `ey":1}]}`)
	utf8Value := batchOf(`{"type":"REQUEST","name":"caf` + "\xc3\x28" + `"}`)
	overlong := batchOf(`{"type":"REQUEST","name":"` + "\xc0\xaf" + `"}`)
	surrogate := batchOf(`{"type":"REQUEST","name":"` + "\xed\xa0\x80" + `"}`)
	utf8PayloadString := batchOf(rrEvent(`"{\"request\":{\"rawQuery\":\"caf` + "\xe9" + `\"},\"response\":{}}"`))
	utf8PayloadObject := batchOf(rrEvent(`{"request":{"rawQuery":"caf` + "\xe9" + `"},"response":{}}`))
	utf8Outside := []byte(`{"events":[` + launchEvent + `],"x` + "\xfe" + `":1}`)
	nan := batchOf(launchEvent, rrEvent(`{"request":{"matchConfidence":NaN},"response":{}}`))
	inf := batchOf(`{"type":"REQUEST","name":"X","confidence":Infinity}`)
	negInf := batchOf(`{"type":"REQUEST","name":"X","confidence":-Infinity}`)
	truncated := []byte(`{"events":[{"type":"REQUEST","name":"LAUNCH_REQ`)
	conf := func(v string) []byte {
		return batchOf(rrEvent(`{"request":{"intentId":"i","matchConfidence":` + v + `},"response":{}}`))
	}

	cases := []badCase{
		// Framing.
		{name: "empty body", body: nil, status: 400, inMsg: []string{"body is empty"}},
		{name: "truncated JSON", body: truncated, status: 400,
			inMsg: []string{"not valid JSON: unterminated string at offset " + strconv.Itoa(len(truncated)) + " (in events[0])"}},
		{name: "body not an object", body: []byte(`[` + launchEvent + `]`), status: 400, inMsg: []string{"must be a JSON object", "got array"}},
		{name: "wrong content type", hdr: []string{"Content-Type", "text/plain"}, body: batchOf(launchEvent), status: 415, field: "Content-Type", inMsg: []string{`"text/plain" is not supported`}},
		{name: "form content type", hdr: []string{"Content-Type", "application/x-www-form-urlencoded"}, body: []byte("events=1"), status: 415, field: "Content-Type"},
		{name: "body over the byte limit", body: batchOf(`{"type":"REQUEST","name":"X","pad":"` + strings.Repeat("p", 1<<20) + `"}`), status: 413, inMsg: []string{"body exceeds 1048576 bytes"}},
		{name: "body over the byte limit, chunked", chunked: true, body: batchOf(`{"type":"REQUEST","name":"X","pad":"` + strings.Repeat("p", 1<<20) + `"}`), status: 413, inMsg: []string{"body exceeds 1048576 bytes"}},
		{name: "client half-closes after its request", halfClose: true, body: batchOf(launchEvent), status: 200, accepted: 1},
		{name: "body cut short by the client", halfClose: true, raw: []byte("PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer " + token + "\r\nContent-Length: 1000\r\n\r\n" + `{"events":[`),
			status: 400, inMsg: []string{"body could not be read", "unexpected EOF"}},
		{name: "chunk size overflow", raw: []byte("PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer " + token + "\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n"),
			status: 400, inMsg: []string{"body could not be read", "chunk"}},

		// Nesting: the scanner keeps its own stack of 128 levels.
		{name: "100,000 levels as the body", body: []byte(deep), status: 400, inMsg: []string{"nest deeper than 128 levels at offset 128"}},
		{name: "100,000 levels in an event field", body: []byte(deepPrefix + deep + `}]}`), status: 400,
			inMsg: []string{fmt.Sprintf("nest deeper than 128 levels at offset %d (in events[1])", deepAt)}},
		{name: "100,000 nested objects in an event field", body: []byte(deepPrefix + deepObj + `}]}`), status: 400,
			inMsg: []string{fmt.Sprintf("nest deeper than 128 levels at offset %d (in events[1])", len(deepPrefix)+125*len(`{"a":`))}},
		{name: "100,000 levels in a payload string", query: "?strict=true", body: batchOf(rrEvent(strconv.Quote(deep))), status: 422, rejected: 1,
			event: &eventErr{0, "payload", "the string is not valid JSON: arrays and objects nest deeper than 128 levels at offset 128"}},

		// Huge strings.
		{name: "10 MiB string", body: batchOf(`{"type":"REQUEST","name":"X","note":"` + big + `"}`), status: 413, inMsg: []string{"body exceeds 1048576 bytes"}},
		{name: "10 MiB string, gzip", hdr: gz, body: gzipOf(t, gzip.BestSpeed, batchOf(`{"type":"REQUEST","name":"X","note":"`+big+`"}`)), status: 413,
			inMsg: []string{"decompressed body exceeds 5242880 bytes"}},
		{name: "4 MiB name, gzip", hdr: gz, body: gzipOf(t, gzip.BestSpeed, batchOf(`{"type":"REQUEST","name":"`+big[:4<<20]+`"}`)), status: 200, rejected: 1,
			event: &eventErr{0, "name", "must be at most 256 characters, got 4194304"}},
		{name: "event one byte over the limit", query: "?strict=true", body: batchOf(launchEvent, launchEvent, bigEvent(64<<10+1)), status: 422, rejected: 1,
			event: &eventErr{2, "", "event is 65537 bytes; at most 65536 are allowed"}},
		{name: "event at the limit", body: batchOf(bigEvent(64 << 10)), status: 200, accepted: 1},
		{name: "name one character over", query: "?strict=true", body: batchOf(`{"type":"REQUEST","name":"` + strings.Repeat("é", 257) + `"}`), status: 422, rejected: 1,
			event: &eventErr{0, "name", "must be at most 256 characters, got 257"}},

		// Invalid UTF-8.
		{name: "invalid UTF-8 in a key", body: utf8Key, status: 400,
			inMsg: []string{fmt.Sprintf("not valid UTF-8: byte 0xff at offset %d (in events[1])", offsetOf(t, utf8Key, "\xff"))}},
		{name: "invalid UTF-8 in a value", body: utf8Value, status: 400,
			inMsg: []string{fmt.Sprintf("byte 0xc3 at offset %d (in events[0])", offsetOf(t, utf8Value, "\xc3"))}},
		{name: "overlong UTF-8", body: overlong, status: 400, inMsg: []string{fmt.Sprintf("byte 0xc0 at offset %d", offsetOf(t, overlong, "\xc0"))}},
		{name: "UTF-8 encoded surrogate", body: surrogate, status: 400, inMsg: []string{fmt.Sprintf("byte 0xed at offset %d", offsetOf(t, surrogate, "\xed"))}},
		{name: "invalid UTF-8 in a payload string", body: utf8PayloadString, status: 400,
			inMsg: []string{fmt.Sprintf("byte 0xe9 at offset %d (in events[0])", offsetOf(t, utf8PayloadString, "\xe9"))}},
		{name: "invalid UTF-8 in a payload object", body: utf8PayloadObject, status: 400,
			inMsg: []string{fmt.Sprintf("byte 0xe9 at offset %d (in events[0])", offsetOf(t, utf8PayloadObject, "\xe9"))}},
		{name: "invalid UTF-8 outside the events", body: utf8Outside, status: 400,
			inMsg: []string{fmt.Sprintf("byte 0xfe at offset %d", offsetOf(t, utf8Outside, "\xfe"))}},
		{name: "lone surrogate escape is valid JSON", body: batchOf(`{"type":"REQUEST","name":"\ud800"}`), status: 200, accepted: 1},

		// Literals JSON does not have.
		{name: "NaN", body: nan, status: 400, inMsg: []string{fmt.Sprintf("NaN is not a JSON number at offset %d (in events[1])", offsetOf(t, nan, "NaN"))}},
		{name: "Infinity", body: inf, status: 400, inMsg: []string{fmt.Sprintf("Infinity is not a JSON number at offset %d (in events[0])", offsetOf(t, inf, "Infinity"))}},
		{name: "-Infinity", body: negInf, status: 400, inMsg: []string{fmt.Sprintf("-Infinity is not a JSON number at offset %d", offsetOf(t, negInf, "-Infinity"))}},
		{name: "NaN in a payload string", query: "?strict=true", body: batchOf(rrEvent(`"{\"request\":{\"matchConfidence\":NaN},\"response\":{}}"`)), status: 422, rejected: 1,
			event: &eventErr{0, "payload", "NaN is not a JSON number at offset 30"}},

		// Duplicate keys where the validator reads them.
		{name: "type twice", query: "?strict=true", body: batchOf(`{"type":"REQUEST","name":"X","type":"ERROR"}`), status: 422, rejected: 1,
			event: &eventErr{0, "type", "appears more than once"}},
		{name: "type twice, one escaped", query: "?strict=true", body: batchOf(`{"type":"ERROR","name":"X","\u0074ype":"REQUEST"}`), status: 422, rejected: 1,
			event: &eventErr{0, "type", "appears more than once"}},
		{name: "appId twice", query: "?strict=true", body: batchOf(`{"appId":"a","type":"REQUEST","name":"X","appId":"b"}`), status: 422, rejected: 1,
			event: &eventErr{0, "appId", "appears more than once"}},
		{name: "matchConfidence twice", query: "?strict=true", body: batchOf(rrEvent(`{"request":{"matchConfidence":0.1,"matchConfidence":"x"},"response":{}}`)), status: 422, rejected: 1,
			event: &eventErr{0, "payload.request.matchConfidence", "appears more than once"}},
		{name: "display title twice in a payload string", query: "?strict=true", body: batchOf(rrEvent(`"{\"request\":{},\"response\":{\"displays\":[{\"title\":\"a\",\"title\":\"b\"}]}}"`)), status: 422, rejected: 1,
			event: &eventErr{0, "payload.response.displays[0].title", "appears more than once"}},
		{name: "events twice", body: []byte(`{"events":[` + launchEvent + `],"events":[]}`), status: 400, field: "events", inMsg: []string{"appears more than once"}},

		// Numbers out of range.
		{name: "matchConfidence 1e400", query: "?strict=true", body: conf("1e400"), status: 422, rejected: 1,
			event: &eventErr{0, "payload.request.matchConfidence", `32-bit float can hold (magnitude at most 3.4028235e38), got "1e400"`}},
		{name: "matchConfidence -1e400", query: "?strict=true", body: conf("-1e400"), status: 422, rejected: 1,
			event: &eventErr{0, "payload.request.matchConfidence", `got "-1e400"`}},
		{name: "matchConfidence 3.5e38", query: "?strict=true", body: conf("3.5e38"), status: 422, rejected: 1,
			event: &eventErr{0, "payload.request.matchConfidence", `got "3.5e38"`}},
		{name: "matchConfidence 99999999999999999999999 fits a float", body: conf("99999999999999999999999"), status: 200, accepted: 1},
		{name: "number in a string field", query: "?strict=true", body: batchOf(`{"type":"REQUEST","name":"X","sessionId":99999999999999999999999}`), status: 422, rejected: 1,
			event: &eventErr{0, "sessionId", "must be a string or null, got number"}},
		{name: "1e400 in an unchecked field is kept", body: batchOf(`{"type":"REQUEST","name":"X","confidence":1e400}`), status: 200, accepted: 1},

		// Compression.
		{name: "1 GiB of zeros gzipped", hdr: gz, body: bomb, status: 413, inMsg: []string{"decompressed body exceeds 5242880 bytes"}},
		{name: "1 GiB of zeros gzipped, chunked", hdr: gz, chunked: true, body: bomb, status: 413, inMsg: []string{"decompressed body exceeds 5242880 bytes"}},
		{name: "gzip inside gzip", hdr: gz, body: gzipOf(t, gzip.BestSpeed, gzipOf(t, gzip.BestSpeed, batchOf(launchEvent))), status: 400,
			inMsg: []string{`not valid JSON: invalid character '\x1f' where a value was expected at offset 0`}},
		{name: "1 GiB bomb inside gzip", hdr: gz, body: gzipOf(t, gzip.BestCompression, bomb), status: 400, inMsg: []string{"not valid JSON"}},
		{name: "gzip named twice", hdr: []string{"Content-Encoding", "gzip, gzip"}, body: gzipOf(t, gzip.BestSpeed, gzipOf(t, gzip.BestSpeed, batchOf(launchEvent))),
			status: 415, field: "Content-Encoding"},
		{name: "truncated gzip", hdr: gz, body: gzipOf(t, gzip.BestSpeed, batchOf(launchEvent))[:30], status: 400, inMsg: []string{"not valid gzip", "unexpected EOF"}},
		{name: "gzip with trailing garbage", hdr: gz, body: append(gzipOf(t, gzip.BestSpeed, batchOf(launchEvent)), "garbage"...), status: 400, inMsg: []string{"not valid gzip"}},
		{name: "plain body sent as gzip", hdr: gz, body: batchOf(launchEvent), status: 400, inMsg: []string{"not valid gzip", "invalid header"}},

		// Batch size.
		{name: "exactly the maximum of events", body: many(badMaxEvents, `{"type":"REQUEST","name":"E"}`), status: 200, accepted: badMaxEvents},
		{name: "one event over the maximum", body: many(badMaxEvents+1, `{"type":"REQUEST","name":"E"}`), status: 413, field: "events",
			inMsg: []string{"holds more than 10000 events; at most 10000 are allowed (MAX_EVENTS)"}},
		{name: "the maximum of invalid events", body: many(badMaxEvents, `{"type":"REQUEST","name":["E"]}`), status: 200, rejected: badMaxEvents, errors: badMaxEvents,
			event: &eventErr{0, "name", "must be a string, got array"}},
		{name: "60,000 faulty display items, strict", query: "?strict=true", body: itemsBomb, status: 422, rejected: 1, errors: 21,
			event: &eventErr{0, "payload.response.displays[0].items[0].title", "must be a string or null, got number"}},
		{name: "60,000 faulty display items", body: itemsBomb, status: 200, rejected: 1, errors: 21,
			event: &eventErr{0, "payload.response.displays[0].items[0].title", "must be a string or null, got number"}},
		{name: "1.9 MB of incompressible events on one partition", hdr: gz, body: gzipOf(t, gzip.BestCompression, batchOf(hexEvents...)), status: 200, accepted: len(hexEvents)},

		// Headers.
		{name: "100 KiB header", hdr: []string{"X-Pad", strings.Repeat("h", 100<<10)}, body: batchOf(launchEvent), status: 431, plain: true},
		{name: "3,000 headers", hdr: func() []string {
			var h []string
			for i := range 3000 {
				h = append(h, fmt.Sprintf("X-Pad-%d", i), strings.Repeat("h", 20))
			}
			return h
		}(), body: batchOf(launchEvent), status: 431, plain: true},
		{name: "Idempotency-Key too long", hdr: []string{"Idempotency-Key", strings.Repeat("k", 257)}, body: batchOf(launchEvent), status: 400, field: "Idempotency-Key",
			inMsg: []string{"must be at most 256 bytes, got 257"}},
		{name: "NUL in a header", raw: []byte("PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer " + token + "\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\n{}"),
			status: 400, plain: true},
		{name: "negative Content-Length", raw: []byte("PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\nAuthorization: Bearer " + token + "\r\nContent-Length: -5\r\n\r\n{}"),
			status: 400, plain: true},
	}

	var accepted, quarantined int64
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.raw
			if req == nil {
				req = request("/cms/app/events"+tc.query, base, tc.hdr, tc.body, tc.chunked)
			}
			a, err := exchange(p.addr, req, tc.halfClose)
			if err != nil {
				t.Fatalf("%v\n%s", err, a.raw)
			}
			if !p.running() {
				t.Fatalf("ingest exited: %v\n%s", p.err, p.logs.String())
			}
			checkAnswer(t, tc, a)
			if tc.status == 200 {
				accepted += int64(tc.accepted)
				quarantined += int64(tc.rejected)
			}
		})
	}

	t.Run("concurrent gzip bombs", func(t *testing.T) { concurrentBombs(t, p, bomb) })
	t.Run("slow clients", func(t *testing.T) { slowClients(t, p) })
	accepted++ // token b's batch sent beside the slow clients

	// The process is still whole: a valid batch is stored.
	a, err := exchange(p.addr, request("/cms/app/events", base, nil, batchOf(launchEvent), false), false)
	if err != nil || a.status != 200 || a.body["accepted"] != 1.0 {
		t.Fatalf("valid batch after the bad input: %v %d %s\n%s", err, a.status, a.raw, p.logs.String())
	}
	accepted++
	// Every 200 stored exactly what it claimed; nothing else was stored.
	if got := topicRecords(t, p.broker.Addr(), "bin-events"); got != accepted {
		t.Errorf("events topic holds %d records, want %d", got, accepted)
	}
	if got := topicRecords(t, p.broker.Addr(), "bin-quarantine"); got != quarantined {
		t.Errorf("quarantine topic holds %d records, want %d", got, quarantined)
	}
	peak := vmHWM(t, pid)
	t.Logf("peak RSS (VmHWM): %.1f MiB after start-up, %.1f MiB after every case (bound %d MiB)",
		float64(startRSS)/(1<<20), float64(peak)/(1<<20), peakRSSBound>>20)
	if peak > peakRSSBound {
		t.Errorf("peak RSS %.1f MiB, over the bound of %d MiB", float64(peak)/(1<<20), peakRSSBound>>20)
	}
	// READ_TIMEOUT, the variable's former name, was read with a warning.
	if !strings.Contains(p.logs.String(), `"old":"READ_TIMEOUT","new":"HTTP_READ_TIMEOUT"`) {
		t.Errorf("no deprecation warning for READ_TIMEOUT:\n%s", p.logs.String())
	}
	if strings.Contains(p.logs.String(), "panic") {
		t.Errorf("the log mentions a panic:\n%s", p.logs.String())
	}
}

func checkAnswer(t *testing.T, tc badCase, a answer) {
	t.Helper()
	if a.status != tc.status {
		t.Fatalf("status %d, want %d: %.400s", a.status, tc.status, a.raw)
	}
	if tc.plain {
		for _, s := range tc.inMsg {
			if !bytes.Contains(a.raw, []byte(s)) {
				t.Errorf("answer %q does not contain %q", a.raw, s)
			}
		}
		return
	}
	if a.body == nil {
		t.Fatalf("answer is not JSON: %.400s", a.raw)
	}
	if tc.status != 200 && tc.status != 422 {
		msg, _ := a.body["message"].(string)
		field, _ := a.body["field"].(string)
		if a.body["errorType"] != "HandledError" || a.body["httpStatus"] != float64(tc.status) || field != tc.field {
			t.Errorf("error body %s, want HandledError %d with field %q", a.raw, tc.status, tc.field)
		}
		for _, s := range tc.inMsg {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q does not contain %q", msg, s)
			}
		}
		return
	}
	if a.body["accepted"] != float64(tc.accepted) || a.body["rejected"] != float64(tc.rejected) {
		t.Errorf("accepted %v rejected %v, want %d and %d", a.body["accepted"], a.body["rejected"], tc.accepted, tc.rejected)
	}
	errs, _ := a.body["errors"].([]any)
	if tc.errors != 0 && len(errs) != tc.errors {
		t.Errorf("%d errors listed, want %d", len(errs), tc.errors)
	}
	// A huge input must not make a huge answer: messages quote at most a
	// short prefix of a value.
	if limit := 300*len(errs) + 200; len(a.raw) > limit {
		t.Errorf("answer of %d bytes for %d errors", len(a.raw), len(errs))
	}
	if tc.event == nil {
		if len(errs) != 0 {
			t.Errorf("errors %v, want none", errs)
		}
		return
	}
	if len(errs) == 0 {
		t.Fatalf("no errors listed, want %+v", *tc.event)
	}
	e, _ := errs[0].(map[string]any)
	msg, _ := e["message"].(string)
	if e["index"] != float64(tc.event.index) || e["field"] != tc.event.field || !strings.Contains(msg, tc.event.inMsg) {
		t.Errorf("first error %v, want index %d field %q message containing %q", e, tc.event.index, tc.event.field, tc.event.inMsg)
	}
}

// slowClients opens connections that trickle their headers, their body or
// nothing at all, and checks that the server cuts every one of them off:
// silent ones and trickled headers at the header timeout, a body trickled
// slower than the minimum upload rate soon after its grace, and a body
// that keeps the rate but would take longer than the read timeout at the
// read timeout. App "a" sends twice its share of the latter: half hold its
// share of the request slots until the read timeout, half are refused at
// once; meanwhile app "b" is answered as usual, and app "a" gets 429, sent
// with its own token or its organization's.
func slowClients(t *testing.T, p *ingestProc) {
	type outcome struct {
		kind   string
		took   time.Duration
		answer string // the status line, when one came
		rest   string // what followed it
		err    error
	}
	head := "PUT /cms/app/events HTTP/1.1\r\nHost: ingest\r\n"
	// A body announced as large: net/http answers a request whose unread
	// body is small only after reading the rest of it, which a trickle
	// would hold up; a large one it answers at once.
	bodyHead := func(token string) string {
		return head + "Authorization: Bearer " + p.tokens[token] + "\r\nContent-Length: 1000000\r\n\r\n" + `{"events":[`
	}
	kinds := []struct {
		kind    string
		n       int
		prefix  string // sent at once
		trickle string // then piece by piece, every 50 ms
		piece   int
	}{
		{"silent", 4, "", "", 1},
		{"headers", 4, head, "X-Slow: " + strings.Repeat("s", 1000), 1},
		// 20 bytes a second, below the minimum rate.
		{"trickle", 2, bodyHead("b"), strings.Repeat(" ", 1000), 1},
		// 5 KiB a second: the rate kept, even with pieces four times
		// late, but the body would take minutes.
		{"steady", 2 * badAppShare, bodyHead("a"), strings.Repeat(" ", 100_000), 256},
	}
	var connected, finished sync.WaitGroup
	results := make(chan outcome, 32)
	refused := make(chan struct{}, 32) // one per slow body refused at once
	for _, k := range kinds {
		for range k.n {
			connected.Add(1)
			finished.Go(func() {
				o := outcome{kind: k.kind}
				defer func() { results <- o }()
				start := time.Now()
				conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					connected.Done()
					o.err = err
					return
				}
				defer conn.Close()
				_, o.err = io.WriteString(conn, k.prefix)
				connected.Done()
				if o.err != nil {
					return
				}
				go func() {
					for i := 0; i < len(k.trickle); i += k.piece {
						if _, err := io.WriteString(conn, k.trickle[i:min(i+k.piece, len(k.trickle))]); err != nil {
							return
						}
						time.Sleep(50 * time.Millisecond) // the trickle itself
					}
				}()
				// The server must end the exchange long before the trickle
				// would: read until it does.
				_ = conn.SetReadDeadline(time.Now().Add(badReadTimeout + 15*time.Second))
				r := bufio.NewReader(conn)
				line, _ := r.ReadString('\n')
				if o.answer = strings.TrimSpace(line); strings.Contains(o.answer, " 429 ") {
					refused <- struct{}{}
				}
				rest, err := io.ReadAll(r)
				o.rest, o.took = string(rest), time.Since(start)
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					o.err = fmt.Errorf("connection still open after %s", o.took)
				}
			})
		}
	}
	connected.Wait()
	// A refusal means app "a" has its whole share in flight, held by its
	// other slow bodies.
	select {
	case <-refused:
	case <-time.After(10 * time.Second):
		t.Fatal("no slow body of app a was refused within 10s")
	}
	start := time.Now()
	a, err := exchange(p.addr, request("/cms/app/events", []string{"Authorization", "Bearer " + p.tokens["b"]}, nil, batchOf(launchEvent), false), false)
	if err != nil || a.status != 200 {
		t.Errorf("app b beside app a's slow bodies: %v %d %s", err, a.status, a.raw)
	}
	// App a's slow bodies hold their slots until the read timeout: an
	// answer within half of it did not wait for them.
	if took := time.Since(start); took > badReadTimeout/2 {
		t.Errorf("app b beside app a's slow bodies took %s", took)
	}
	for _, who := range []struct{ token, path string }{{"a", "/cms/app/events"}, {"org", "/cms/app/events?appId=a"}} {
		a, err = exchange(p.addr, request(who.path, []string{"Authorization", "Bearer " + p.tokens[who.token]}, nil, batchOf(launchEvent), false), false)
		msg, _ := a.body["message"].(string)
		if err != nil || a.status != 429 || a.header.Get("Retry-After") != "1" ||
			msg != fmt.Sprintf(`app "a" already has %d requests in flight, its share of the request slots; retry later`, badAppShare) {
			t.Errorf("token %s for app a, its share held by slow bodies: %v %d %s", who.token, err, a.status, a.raw)
		}
	}
	finished.Wait()
	close(results)
	limits := map[string]time.Duration{"silent": badReadHeaderTimeout, "headers": badReadHeaderTimeout,
		"trickle": badMinUploadGrace, "steady": badReadTimeout}
	timedOut, refusedBodies, tooSlow := 0, 0, 0
	for o := range results {
		limit := limits[o.kind]
		switch {
		case o.err != nil:
			t.Errorf("%s: %v", o.kind, o.err)
		case o.kind == "steady" && strings.HasPrefix(o.answer, "HTTP/1.1 429 "):
			refusedBodies++
			// At once, not at the read timeout like the bodies it waits behind.
			if o.took > badReadTimeout/2 {
				t.Errorf("body beyond the share refused after %s", o.took)
			}
		case o.took < limit-100*time.Millisecond || o.took > limit+5*time.Second:
			t.Errorf("%s: cut off after %s, want about %s", o.kind, o.took, limit)
		case o.kind == "trickle" && (o.answer != "HTTP/1.1 408 Request Timeout" || !strings.Contains(o.rest, "the body arrived too slowly")):
			t.Errorf("%s: answer %q %q, want a 408 for the upload rate", o.kind, o.answer, o.rest)
		case o.kind == "trickle":
			tooSlow++
		case o.kind == "steady" && (o.answer != "HTTP/1.1 408 Request Timeout" || !strings.Contains(o.rest, "did not arrive within the server's read timeout")):
			t.Errorf("%s: answer %q %q, want a 408 for the read timeout", o.kind, o.answer, o.rest)
		case o.kind == "steady":
			timedOut++
		case o.answer != "":
			t.Errorf("%s: answer %q, want the connection closed", o.kind, o.answer)
		}
	}
	if timedOut != badAppShare || refusedBodies != badAppShare || tooSlow != 2 {
		t.Errorf("slow bodies: %d timed out with 408 and %d refused with 429, want %d each; %d of 2 trickles cut off for the rate",
			timedOut, refusedBodies, badAppShare, tooSlow)
	}
}

// concurrentBombs sends gzip bombs from every token at once. Each is
// refused: 413 once decompressed to the limit, or, past the request slots
// or the memory for bodies, 503 for the server's and 429 for an app's or
// a token's share, with Retry-After. Which of them a bomb gets depends on
// how the bombs of one app interleave: decompressing together, they may
// all run out of the app's share before any reaches the limit. Afterwards
// the burst holds nothing: a bomb sent alone from each token is
// decompressed to the limit and refused with 413. Memory stays bounded
// (checked by the caller).
func concurrentBombs(t *testing.T, p *ingestProc, bomb []byte) {
	bombFrom := func(who string) []byte {
		path := "/cms/app/events"
		if who == "org" {
			path += "?appId=b"
		}
		return request(path, []string{"Authorization", "Bearer " + p.tokens[who], "Content-Encoding", "gzip"}, nil, bomb, false)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for _, who := range []string{"a", "b", "org"} {
		req := bombFrom(who)
		for range 16 {
			wg.Go(func() {
				a, err := exchange(p.addr, req, false)
				msg, _ := a.body["message"].(string)
				var kind string
				switch {
				case err != nil:
					t.Errorf("%s: %v", who, err)
					return
				case a.status == 413 && strings.Contains(msg, "decompressed body exceeds"):
					kind = "413"
				case a.status == 503 && a.header.Get("Retry-After") == "1" && strings.Contains(msg, "memory for request bodies"):
					kind = "503 memory"
				case a.status == 503 && a.header.Get("Retry-After") == "1" && strings.Contains(msg, "at capacity"):
					kind = "503 slots"
				case a.status == 429 && a.header.Get("Retry-After") == "1" && strings.Contains(msg, "its share of the memory for request bodies"):
					kind = "429 app memory"
				case a.status == 429 && a.header.Get("Retry-After") == "1" && strings.Contains(msg, "its share of the request slots"):
					kind = "429 slots share"
				default:
					t.Errorf("%s: %d %s", who, a.status, a.raw)
					return
				}
				mu.Lock()
				seen[kind]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	t.Logf("48 concurrent gzip bombs answered %v", seen)
	for _, who := range []string{"a", "b", "org"} {
		a, err := exchange(p.addr, bombFrom(who), false)
		if msg, _ := a.body["message"].(string); err != nil || a.status != 413 || !strings.Contains(msg, "decompressed body exceeds") {
			t.Errorf("%s: a bomb alone after the burst: %v %d %s; want 413 once decompressed to the limit", who, err, a.status, a.raw)
		}
	}
}
