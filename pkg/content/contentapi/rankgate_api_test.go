package contentapi

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
)

// TestRankingWaitsItsTurn: searches, FAQ queries and suggestions rank
// only with a place at the ranking gate: with every place taken, each
// waits in line and is answered once a place is given back; one whose
// client leaves while it waits gives up its turn.
func TestRankingWaitsItsTurn(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	if r := e.get("/cms/search?question=puncture", "app1"); r.status != 200 { // the app's base built
		t.Fatalf("%d %s", r.status, r.body)
	}
	g := e.svc.api.ranking
	ctx := context.Background()
	// The app's organization holds its share, another the rest.
	mine, other := rankTenant{"org-1", "app-1"}, rankTenant{"org-other", "app-other"}
	for range g.perOrg {
		if err := g.enter(ctx, mine); err != nil {
			t.Fatal(err)
		}
	}
	for range runtime.GOMAXPROCS(0) - g.perOrg {
		if err := g.enter(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	get := func(ctx context.Context, path string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+e.tokens["app1"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	for _, path := range []string{"/cms/search?question=puncture", "/cms/faq/query?question=returns", "/cms/suggestions?key=k1&queryText=where+is"} {
		// A client that leaves while it waits.
		leaving, leave := context.WithCancel(ctx)
		left := make(chan error, 1)
		go func() { _, err := get(leaving, path); left <- err }()
		waitQueued(t, g, 1)
		leave()
		<-left
		waitQueued(t, g, 0)

		answered := make(chan int, 1)
		go func() {
			status, err := get(ctx, path)
			if err != nil {
				t.Error(err)
			}
			answered <- status
		}()
		waitQueued(t, g, 1)
		select {
		case status := <-answered:
			t.Fatalf("%s answered %d while every place was taken", path, status)
		default:
		}
		g.leave(mine)
		if status := <-answered; status != 200 {
			t.Errorf("%s: %d once a place was free", path, status)
		}
		if err := g.enter(ctx, mine); err != nil { // the place back, for the next path
			t.Fatal(err)
		}
	}
}
