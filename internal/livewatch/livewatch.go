// Package livewatch is a client of the live view of events (GET
// /cms/app/events/live, Server-Sent Events) for tests and benchmarks: it
// opens a stream with a token in the Authorization header and hands over
// its messages as they arrive. It is never used in production.
package livewatch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Message is one Server-Sent Event: its kind (the event field) and data.
// A comment line is a Message of kind ":".
type Message struct {
	Kind, Data string
}

// Stream is an open stream.
type Stream struct {
	Header http.Header
	c      chan Message
	body   io.ReadCloser
	done   chan struct{}
	err    error
	// Bytes counts what was read.
	Bytes atomic.Int64
	// Events counts the event messages read.
	Events atomic.Int64
	// last is the latest summary message read.
	last atomic.Pointer[Summary]
}

// LastSummary is the latest summary the stream sent, nil before the
// first: read on its own, since a caller waiting for events passes over
// summaries.
func (s *Stream) LastSummary() *Summary { return s.last.Load() }

// Refused is a stream the server did not open: its status and body.
type Refused struct {
	Status int
	Header http.Header
	Body   string
}

func (r *Refused) Error() string { return fmt.Sprintf("%d: %s", r.Status, strings.TrimSpace(r.Body)) }

// Open requests the stream at url (the path and query included) with
// token, which may be empty. A refusal is a *Refused. Messages queue up
// to buffer; a caller that reads none for longer holds the stream back,
// as a slow client does.
func Open(ctx context.Context, url, token string, buffer int) (*Stream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		return nil, &Refused{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
	}
	s := &Stream{Header: resp.Header, c: make(chan Message, buffer), body: resp.Body, done: make(chan struct{})}
	go s.read()
	return s, nil
}

func (s *Stream) read() {
	defer close(s.done)
	defer close(s.c)
	r := bufio.NewReaderSize(s.body, 64<<10)
	var m Message
	for {
		line, err := r.ReadString('\n')
		s.Bytes.Add(int64(len(line)))
		if err != nil {
			s.err = err
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if m.Kind != "" {
				switch m.Kind {
				case "event":
					s.Events.Add(1)
				case "summary":
					var sum Summary
					if m.Decode(&sum) == nil {
						s.last.Store(&sum)
					}
				}
				s.c <- m
			}
			m = Message{}
		case strings.HasPrefix(line, ":"):
			s.c <- Message{Kind: ":", Data: strings.TrimPrefix(line[1:], " ")}
		case strings.HasPrefix(line, "event: "):
			m.Kind = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			m.Data = line[len("data: "):]
		}
	}
}

// C delivers the messages; it is closed when the stream ends.
func (s *Stream) C() <-chan Message { return s.c }

// Close ends the stream from the client's side.
func (s *Stream) Close() {
	s.body.Close()
	go func() {
		for range s.c {
		}
	}()
	<-s.done
}

// Err is why the stream ended, once C is closed: io.EOF for an answer
// that ended whole, another error for one cut off.
func (s *Stream) Err() error {
	<-s.done
	return s.err
}

// ErrEnded is returned by Next once the stream has ended.
var ErrEnded = errors.New("the stream ended")

// Next returns the next message of kind, skipping comments (unless kind
// is ":") and failing on a message of another kind, within limit.
func (s *Stream) Next(kind string, limit time.Duration) (Message, error) {
	deadline := time.After(limit)
	for {
		select {
		case m, ok := <-s.c:
			if !ok {
				return Message{}, fmt.Errorf("%w (%w) before a %q message", ErrEnded, s.err, kind)
			}
			if m.Kind == ":" && kind != ":" {
				continue
			}
			if m.Kind != kind {
				return m, fmt.Errorf("a %q message (%s), want %q", m.Kind, m.Data, kind)
			}
			return m, nil
		case <-deadline:
			return Message{}, fmt.Errorf("no %q message within %s", kind, limit)
		}
	}
}

// Skip returns the next message of kind, passing over messages of the
// kinds in skip (and comments), within limit.
func (s *Stream) Skip(kind string, limit time.Duration, skip ...string) (Message, error) {
	deadline := time.Now().Add(limit)
	for {
		m, err := s.Next(kind, time.Until(deadline))
		if err == nil || m.Kind == "" {
			return m, err
		}
		passed := false
		for _, k := range skip {
			passed = passed || m.Kind == k
		}
		if !passed {
			return m, err
		}
	}
}

// Event is the part of an event message the tests read.
type Event struct {
	EventID   string `json:"eventId"`
	Status    string `json:"status"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	SessionID string `json:"sessionId"`
	UserID    string `json:"userId"`
	Reasons   []struct {
		Field, Reason, Message string
	} `json:"reasons"`
	Payload json.RawMessage `json:"payload"`
}

// State is a state message.
type State struct {
	State   string `json:"state"`
	Message string `json:"message"`
	Lost    bool   `json:"lost"`
}

// Summary is a summary message.
type Summary struct {
	Seen, Shown, Skipped uint64
	Total                struct{ Seen, Shown, Skipped uint64 }
}

// WaitSummary waits until the latest summary's total satisfies ok.
func (s *Stream) WaitSummary(limit time.Duration, ok func(Summary) bool) (Summary, error) {
	deadline := time.Now().Add(limit)
	for {
		if sum := s.LastSummary(); sum != nil && ok(*sum) {
			return *sum, nil
		}
		if time.Now().After(deadline) {
			last := s.LastSummary()
			if last == nil {
				return Summary{}, fmt.Errorf("no summary within %s", limit)
			}
			return *last, fmt.Errorf("the latest summary %+v is not the one awaited within %s", *last, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Decode reads a message's data into v.
func (m Message) Decode(v any) error {
	if err := json.Unmarshal([]byte(m.Data), v); err != nil {
		return fmt.Errorf("%s message %q: %w", m.Kind, m.Data, err)
	}
	return nil
}

// WaitReading reads the stream's start and the state messages until the
// tail reads every partition: from then on, every event published shows.
func (s *Stream) WaitReading(limit time.Duration) error {
	if _, err := s.Next("start", limit); err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		m, err := s.Next("state", time.Until(deadline))
		if err != nil {
			return err
		}
		var st State
		if err := m.Decode(&st); err != nil {
			return err
		}
		if st.State == "reading" {
			return nil
		}
	}
}
