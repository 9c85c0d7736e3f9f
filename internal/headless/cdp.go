package headless

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// Page is a tab of a headless Chromium driven over the DevTools protocol
// through a pipe (--remote-debugging-pipe), for tests that act on a page
// as a person would: type into it, press its buttons, read what it shows.
type Page struct {
	t        testing.TB
	toChrome *os.File
	session  string

	mu      sync.Mutex
	nextID  int
	pending map[int]chan reply
	closed  error
}

type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Open starts Chromium with a window of width by height pixels and opens
// a tab on u. Chromium ends with the test.
func Open(ctx context.Context, t testing.TB, u string, width, height int) *Page {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := Command(ctx, t, "--remote-debugging-pipe", "--hide-scrollbars", fmt.Sprintf("--window-size=%d,%d", width, height))
	// Chromium reads commands on descriptor 3 and writes on 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{cmdR, outW}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	cmdR.Close()
	outW.Close()
	p := &Page{t: t, toChrome: cmdW, pending: map[int]chan reply{}}
	done := make(chan struct{})
	go p.read(outR, done)
	t.Cleanup(func() {
		cmdW.Close()
		cancel()
		_ = cmd.Wait()
		<-done
		if t.Failed() {
			t.Logf("chromium:\n%s", stderr.String())
		}
	})

	var target struct{ TargetID string }
	if err := p.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	var attached struct{ SessionID string }
	if err := p.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		t.Fatal(err)
	}
	p.session = attached.SessionID
	if err := p.call(p.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.call(p.session, "Page.navigate", map[string]any{"url": u}, nil); err != nil {
		t.Fatal(err)
	}
	p.WaitFor(`document.readyState === "complete"`, 30*time.Second)
	return p
}

// read hands each message Chromium writes (NUL-terminated JSON) to the
// call waiting for it; events are dropped.
func (p *Page) read(r io.Reader, done chan struct{}) {
	defer close(done)
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes(0)
		if err != nil {
			p.mu.Lock()
			p.closed = fmt.Errorf("chromium's pipe: %w", err)
			for _, c := range p.pending {
				close(c)
			}
			p.pending = map[int]chan reply{}
			p.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			reply
		}
		if json.Unmarshal(b[:len(b)-1], &m) != nil || m.ID == 0 {
			continue
		}
		p.mu.Lock()
		c := p.pending[m.ID]
		delete(p.pending, m.ID)
		p.mu.Unlock()
		if c != nil {
			c <- m.reply
		}
	}
}

// call sends a command (to the tab's session, or the browser when session
// is empty) and decodes its result into out.
func (p *Page) call(session, method string, params any, out any) error {
	p.mu.Lock()
	if p.closed != nil {
		p.mu.Unlock()
		return p.closed
	}
	p.nextID++
	id := p.nextID
	c := make(chan reply, 1)
	p.pending[id] = c
	p.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	b, _ := json.Marshal(msg)
	if _, err := p.toChrome.Write(append(b, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-c:
		if !ok {
			return fmt.Errorf("%s: chromium went away", method)
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer within 60 s", method)
	}
}

// Eval runs a JavaScript expression in the page, waiting for a promise it
// returns, and decodes its value into out (which may be nil).
func (p *Page) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("%s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// MustEval is Eval that fails the test on an error.
func (p *Page) MustEval(expr string, out any) {
	p.t.Helper()
	if err := p.Eval(expr, out); err != nil {
		p.t.Fatal(err)
	}
}

// WaitFor waits until the expression is true in the page.
func (p *Page) WaitFor(expr string, limit time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var ok bool
		err := p.Eval(expr, &ok)
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("in the page, %s is not true within %s (%v)", expr, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Screenshot returns the visible part of the page as PNG.
func (p *Page) Screenshot() []byte {
	p.t.Helper()
	var shot struct{ Data string }
	if err := p.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		p.t.Fatal(err)
	}
	b, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.t.Fatal(errors.Join(errors.New("decode the screenshot"), err))
	}
	return b
}

// lockedBuffer is Chromium's stderr, written by its own goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
