package main

import (
	"fmt"
	"time"

	"github.com/assistantcms/cms/pkg/envflag"
)

// httpFlags are the HTTP server limits api serve and api gateway share:
// they bound what a slow or oversized client can hold.
type httpFlags struct {
	readHeader, read, write, idle *time.Duration
	maxHeader                     *int
}

// httpDefaults are one command's defaults for httpFlags.
type httpDefaults struct {
	readHeader, read, write, idle time.Duration
	maxHeader                     int
}

func defineHTTPFlags(fs *envflag.Set, d httpDefaults) httpFlags {
	return httpFlags{
		readHeader: fs.Duration("read-header-timeout", "HTTP_READ_HEADER_TIMEOUT", d.readHeader, "longest time to read a request's headers; slower clients are cut off"),
		read:       fs.Duration("read-timeout", "HTTP_READ_TIMEOUT", d.read, "longest time to read a whole request, body included"),
		write:      fs.Duration("write-timeout", "HTTP_WRITE_TIMEOUT", d.write, "longest time from the end of a request's headers to the end of its answer"),
		idle:       fs.Duration("idle-timeout", "HTTP_IDLE_TIMEOUT", d.idle, "how long a kept-alive connection may wait for its next request"),
		maxHeader:  fs.Int("max-header-bytes", "HTTP_MAX_HEADER_BYTES", d.maxHeader, "largest request line and headers; larger ones get 431"),
	}
}

// check refuses values that would switch a limit off: net/http reads zero
// as no limit at all.
func (h httpFlags) check() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"read-header-timeout", *h.readHeader}, {"read-timeout", *h.read}, {"write-timeout", *h.write}, {"idle-timeout", *h.idle}} {
		if d.v <= 0 {
			return fmt.Errorf("-%s %s: must be positive", d.name, d.v)
		}
	}
	if *h.maxHeader < 1024 {
		return fmt.Errorf("-max-header-bytes %d: must be at least 1024", *h.maxHeader)
	}
	return nil
}
