package contentapi

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
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

// TestBuildsTakeTurnsApartFromRankings: an app's index is built with a
// place at the build gate, which leaves a core to the rankings: with
// every build place taken, an app never served waits for one; with every
// ranking place taken, its index is built all the same.
func TestBuildsTakeTurnsApartFromRankings(t *testing.T) {
	e := newEnv(t, ServiceConfig{})
	api := e.svc.api
	if got, want := api.building.places, max(runtime.GOMAXPROCS(0)-1, 1); got != want {
		t.Errorf("%d build places, want %d", got, want)
	}
	ctx := context.Background()
	other := rankTenant{"org-other", "app-other"}
	for range api.building.places {
		if err := api.building.enter(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	answered := make(chan response, 1)
	go func() { answered <- e.get("/cms/search?question=puncture", "app1") }()
	waitQueued(t, api.building, 1)
	select {
	case r := <-answered:
		t.Fatalf("answered %d while every build place was taken", r.status)
	default:
	}
	api.building.leave(other)
	if r := <-answered; r.status != 200 {
		t.Errorf("%d once a build place was free: %s", r.status, r.body)
	}
	for range api.building.places - 1 {
		api.building.leave(other)
	}

	// Two other organizations hold every place, as one may hold all but
	// one while another asks.
	third := rankTenant{"org-third", "app-third"}
	holders := []rankTenant{third}
	for range api.ranking.places - 1 {
		holders = append(holders, other)
	}
	for _, h := range holders {
		if err := api.ranking.enter(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, h := range holders {
			api.ranking.leave(h)
		}
	}()
	built, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := api.base(built, "org-1", "app-2", false); err != nil {
		t.Errorf("index built with every ranking place taken: %v", err)
	}
}
