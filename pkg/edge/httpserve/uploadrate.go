package httpserve

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// MinUploadRate is the pace a request body must keep, as Apache's
// mod_reqtimeout counts it: a body has Grace, plus one second for every
// Rate bytes received, to arrive. A connection that stalls after a
// burst, or trickles, is cut off then rather than at the server's read
// timeout, so that it holds what its request was given (a request slot,
// memory for its body) for seconds instead of the whole timeout.
type MinUploadRate struct {
	// Rate is in bytes a second; zero or less sets no minimum.
	Rate int64
	// Grace is what every body has before the rate counts.
	Grace time.Duration
}

// Enabled reports whether the rate cuts anything off.
func (m MinUploadRate) Enabled() bool { return m.Rate > 0 }

// due is how long a body has had to arrive once n bytes of it have.
func (m MinUploadRate) due(n int64) time.Duration {
	return m.Grace + time.Duration(float64(n)/float64(m.Rate)*float64(time.Second))
}

// SlowBodyError is the error a PacedBody's Read returns once the body fell
// behind the minimum rate. Its message is what the client is told.
type SlowBodyError struct {
	Received int64
	After    time.Duration
	Rate     MinUploadRate
}

func (e *SlowBodyError) Error() string {
	return fmt.Sprintf("the body arrived too slowly: %d bytes in %s; after the first %s a body must arrive at %d bytes a second or faster",
		e.Received, e.After.Round(time.Millisecond), e.Rate.Grace, e.Rate.Rate)
}

// Timeout reports true: the client took too long, as with a read timeout.
func (e *SlowBodyError) Timeout() bool { return true }

// Temporary is part of net.Error.
func (e *SlowBodyError) Temporary() bool { return false }

// Watch returns body paced by m, counting what arrives. When the body falls
// behind, the connection's read deadline (reached through w with
// http.ResponseController) is moved to the past, so that the read waiting
// for it fails at once, and every Read from then on returns a
// *SlowBodyError. The deadline is only ever moved earlier, never later
// than the server's own. Stop must be called once the body is no longer
// read. The watch uses one timer, reset only when it fires, so that a read
// costs an atomic addition.
func (m MinUploadRate) Watch(w http.ResponseWriter, body io.ReadCloser) *PacedBody {
	b := &PacedBody{r: body, m: m, w: w, start: time.Now()}
	b.timer = time.AfterFunc(m.due(0), b.check)
	return b
}

// PacedBody is a request body watched by a MinUploadRate.
type PacedBody struct {
	r     io.ReadCloser
	m     MinUploadRate
	w     http.ResponseWriter
	start time.Time
	n     atomic.Int64
	timer *time.Timer

	mu      sync.Mutex
	stopped bool
	slow    *SlowBodyError // set once the body is cut off
}

// Read reads from the body; once it was cut off, a read reports why.
func (b *PacedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	// Counted under the lock the cut is made under, so that bytes are
	// either counted before it (and read) or came after it (and are
	// dropped): the error's Received is what the reader got.
	b.mu.Lock()
	if slow := b.slow; slow != nil {
		b.mu.Unlock()
		return 0, slow
	}
	b.n.Add(int64(n))
	b.mu.Unlock()
	if err == io.EOF {
		// The whole body came: what the request does next (waiting for
		// the broker, or for an upstream's answer) is not the client's
		// upload, and cutting the connection then would cancel the
		// request.
		b.Stop()
		return n, err
	}
	return n, err
}

// Close closes the body.
func (b *PacedBody) Close() error { return b.r.Close() }

// Slow returns why the body was cut off, or nil while it was not.
func (b *PacedBody) Slow() *SlowBodyError {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.slow
}

// Stop ends the watch; the body is not cut off after it returns.
func (b *PacedBody) Stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.timer.Stop()
}

// check runs when the timer fires: it cuts the body off if it is behind,
// else sets the timer for when it will be, at the pace of what has come.
func (b *PacedBody) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.slow != nil {
		return
	}
	n := b.n.Load()
	elapsed := time.Since(b.start)
	if due := b.m.due(n); elapsed < due {
		b.timer.Reset(due - elapsed)
		return
	}
	b.slow = &SlowBodyError{Received: n, After: elapsed, Rate: b.m}
	// Where the connection cannot be reached (a test's recorder), the
	// server's read timeout still ends the read.
	// A deadline long past ends the read waiting on the connection at
	// once.
	_ = http.NewResponseController(b.w).SetReadDeadline(time.Unix(1, 0))
}
