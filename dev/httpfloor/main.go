// Command httpfloor serves PUT /cms/app/events doing as little as net/http
// allows, so that a benchmark can put ingest's and the gateway's CPU per
// request beside the least that the same HTTP stack costs for the same
// requests in the same run.
//
// Without -proxy it reads each request's body to the end and answers 200
// with a fixed body of ingest's shape and its length: no validation, no
// Kafka. With -proxy URL it is net/http's stock httputil.ReverseProxy to
// URL and nothing else: no admission, body limits or metrics, as the
// gateway has. Either way the server has ingest's timeouts and header
// limit. Every path is served the same way, /readyz included.
//
//	go run ./dev/httpfloor -addr 127.0.0.1:18181
//	go run ./dev/httpfloor -addr 127.0.0.1:18183 -proxy http://127.0.0.1:8081
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/assistantcms/cms/pkg/edge/httpserve"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18181", "address to listen on")
	proxy := flag.String("proxy", "", "instead of answering, proxy every request to this URL with httputil.ReverseProxy")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, log, *addr, *proxy); err != nil {
		log.Error("httpfloor failed", "err", err)
		os.Exit(1)
	}
}

// run serves as ingest and the gateway do, with the same server limits, so
// that the floor differs from them only in what the handler does.
func run(ctx context.Context, log *slog.Logger, addr, proxy string) error {
	h, err := handler(proxy)
	if err != nil {
		return err
	}
	ln, err := httpserve.Listen(log, addr, "", "")
	if err != nil {
		return err
	}
	srv := httpserve.NewServer(h, httpserve.DefaultLimits(), log)
	return httpserve.Serve(ctx, log, "httpfloor", srv, ln, httpserve.NewChecker(), 5*time.Second)
}

func handler(proxy string) (http.Handler, error) {
	if proxy == "" {
		// What ingest answers a batch it accepted whole, about as long.
		answer := []byte(`{"accepted":5,"rejected":0}`)
		length := strconv.Itoa(len(answer))
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", length)
			_, _ = w.Write(answer)
		}), nil
	}
	u, err := url.Parse(proxy)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("-proxy %q is not an absolute URL", proxy)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	// The gateway's idle connections, so that neither is measured opening
	// connections.
	p.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 128, IdleConnTimeout: time.Minute}
	return p, nil
}
