// Package contenttest is the behavioural contract of content.Store, and
// of tenancy.Store within it (RunTenancy). Every implementation runs it
// from its own tests:
//
//	func TestStore(t *testing.T) {
//		contenttest.Run(t, func(t *testing.T) content.Store { return openTempStore(t) })
//	}
package contenttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// TenancyStore is a store of organizations, apps and tokens that can be
// closed.
type TenancyStore interface {
	tenancy.Store
	Close() error
}

// tenancyTests are the contract of tenancy.Store.
func tenancyTests() []contract[TenancyStore] {
	return []contract[TenancyStore]{
		{"Organizations", testOrganizations},
		{"Apps", testApps},
		{"ListApps", testListApps},
		{"Tokens", testTokens},
		{"CreateErrors", testCreateErrors},
		{"NotFound", testNotFound},
		{"ListTokens", testListTokens},
		{"RevokeToken", testRevokeToken},
		{"Concurrent", testConcurrent},
		{"ConcurrentConflict", testConcurrentConflict},
	}
}

type contract[S any] struct {
	name string
	fn   func(t *testing.T, s S)
}

// RunTenancy runs the contract of tenancy.Store against stores returned
// by open, as Run does.
func RunTenancy(t *testing.T, open func(t *testing.T) TenancyStore) {
	t.Helper()
	run(t, open, tenancyTests())
}

// Run runs the contract against stores returned by open. open must return a
// new, empty store each time it is called; Run closes it when the subtest
// ends, so Close must tolerate a second call if open also registers one.
// A content.Store is a tenancy.Store too: its contract comes first.
func Run(t *testing.T, open func(t *testing.T) content.Store) {
	t.Helper()
	run(t, func(t *testing.T) TenancyStore { return open(t) }, tenancyTests())
	run(t, open, []contract[content.Store]{
		{"ImportAndRead", testImportAndRead},
		{"ImportIsIdempotent", testImportIsIdempotent},
		{"ImportIsAtomic", testImportIsAtomic},
		{"ImportErrors", testImportErrors},
		{"Export", testExport},
		{"RecordWrites", testRecordWrites},
		{"UpdateIsAtomic", testUpdateIsAtomic},
		{"TimesAreUTC", testTimesAreUTC},
		{"ErrorsNameTheRecord", testErrorsNameTheRecord},
		{"History", testHistory},
		{"ImportHistory", testImportHistory},
		{"Restore", testRestore},
		{"PruneHistory", testPruneHistory},
		{"RevisionPagesBounded", testRevisionPagesBounded},
	})
}

func run[S interface{ Close() error }](t *testing.T, open func(t *testing.T) S, tests []contract[S]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tt.fn(t, s)
		})
	}
}

// at returns d after a fixed instant with no fractional second: stores that
// keep time as text must still order that instant before it plus a fraction.
func at(d time.Duration) time.Time { return time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC).Add(d) }

// fixture is the data most subtests start from: two organizations, two apps
// in the first and one in the second.
func fixture(t *testing.T, s TenancyStore) {
	t.Helper()
	ctx := t.Context()
	for _, o := range []tenancy.Organization{
		{ID: "org-a", Name: "Org A", CreatedAt: at(0)},
		{ID: "org-b", Name: "Org B", CreatedAt: at(time.Second)},
	} {
		must(t, s.CreateOrganization(Acting(ctx), o), "CreateOrganization %s", o.ID)
	}
	for _, a := range []tenancy.App{
		{ID: "app-a1", OrganizationID: "org-a", Name: "A1", CreatedAt: at(0), UpdatedAt: at(0)},
		{ID: "app-a2", OrganizationID: "org-a", Name: "A2", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second)},
		{ID: "app-b1", OrganizationID: "org-b", Name: "B1", CreatedAt: at(0), UpdatedAt: at(0)},
	} {
		must(t, s.CreateApp(Acting(ctx), a), "CreateApp %s", a.ID)
	}
}

func must(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

func testOrganizations(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	got, err := s.ListOrganizations(ctx)
	must(t, err, "ListOrganizations on empty store")
	if len(got) != 0 {
		t.Fatalf("ListOrganizations on empty store = %v, want none", got)
	}

	// Created out of order, with a non-UTC zone and fractional seconds, to
	// check round trips and ordering by creation time then ID.
	zone := time.FixedZone("UTC+2", 2*60*60)
	orgs := []tenancy.Organization{
		{ID: "org-c", Name: "Third", CreatedAt: at(1500 * time.Millisecond).In(zone)},
		{ID: "org-b", Name: "Second, same time as first", CreatedAt: at(0)},
		{ID: "org-a", Name: "First", CreatedAt: at(0)},
		{ID: "org-d", Name: "Fourth", CreatedAt: at(1500*time.Millisecond + time.Nanosecond)},
		{ID: "org-0", Name: "Before all", CreatedAt: at(-time.Microsecond)},
	}
	for _, o := range orgs {
		must(t, s.CreateOrganization(Acting(ctx), o), "CreateOrganization %s", o.ID)
	}
	for _, want := range orgs {
		got, err := s.Organization(ctx, want.ID)
		must(t, err, "Organization %s", want.ID)
		assertOrg(t, got, want)
	}
	list, err := s.ListOrganizations(ctx)
	must(t, err, "ListOrganizations")
	assertIDs(t, "ListOrganizations", orgIDs(list), []string{"org-0", "org-a", "org-b", "org-c", "org-d"})
}

func testApps(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	fixture(t, s)
	want := tenancy.App{
		ID: "app-x", OrganizationID: "org-b", Name: "X",
		CreatedAt: at(123456789 * time.Nanosecond).In(time.FixedZone("x", -3600)),
		UpdatedAt: at(time.Hour),
	}
	must(t, s.CreateApp(Acting(ctx), want), "CreateApp")
	got, err := s.App(ctx, want.ID)
	must(t, err, "App")
	assertApp(t, got, want)
}

func testListApps(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	fixture(t, s)
	must(t, s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org-empty", Name: "Empty", CreatedAt: at(0)}), "CreateOrganization")
	tests := []struct {
		org  string
		want []string
	}{
		{"org-a", []string{"app-a1", "app-a2"}},
		{"org-b", []string{"app-b1"}},
		{"org-empty", nil},
		{"org-unknown", nil},
		// An empty organization lists every app, by creation time then ID.
		{"", []string{"app-a1", "app-b1", "app-a2"}},
	}
	for _, tt := range tests {
		t.Run("org="+tt.org, func(t *testing.T) {
			got, err := s.ListApps(ctx, tt.org)
			must(t, err, "ListApps(%q)", tt.org)
			assertIDs(t, "ListApps", appIDs(got), tt.want)
		})
	}
	got, err := s.ListApps(ctx, "org-a")
	must(t, err, "ListApps")
	if len(got) == 2 {
		assertApp(t, got[1], tenancy.App{ID: "app-a2", OrganizationID: "org-a", Name: "A2", CreatedAt: at(time.Second), UpdatedAt: at(2 * time.Second)})
	}
}

func testTokens(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	fixture(t, s)
	tests := []tenancy.Token{
		{ID: "tok-org", Hash: hash("org"), OrganizationID: "org-a", Scopes: tenancy.AllScopes, Name: "org token", CreatedAt: at(time.Millisecond)},
		{ID: "tok-app", Hash: hash("app"), OrganizationID: "org-a", AppID: "app-a2", Scopes: tenancy.RuntimeScopes, Name: "app token", CreatedAt: at(0).In(time.FixedZone("y", 5400))},
		{ID: "tok-noname", Hash: hash("noname"), OrganizationID: "org-b", AppID: "app-b1", Scopes: tenancy.ContentWrite | tenancy.EventsRead, CreatedAt: at(0)},
		{ID: "tok-revoked", Hash: hash("revoked"), OrganizationID: "org-b", Scopes: tenancy.EventsWrite, CreatedAt: at(0), RevokedAt: at(time.Minute)},
	}
	for _, want := range tests {
		t.Run(want.ID, func(t *testing.T) {
			must(t, s.CreateToken(Acting(ctx), want), "CreateToken")
			got, err := s.Token(ctx, want.ID)
			must(t, err, "Token")
			assertToken(t, got, want)
		})
	}
}

func testCreateErrors(t *testing.T, s TenancyStore) {
	fixture(t, s)
	must(t, s.CreateToken(Acting(t.Context()), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-1", Hash: hash("1"), OrganizationID: "org-a", CreatedAt: at(0)}), "CreateToken")
	tests := []struct {
		name string
		op   func(ctx context.Context) error
		want error
	}{
		{"duplicate organization", func(ctx context.Context) error {
			return s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org-a", Name: "again", CreatedAt: at(0)})
		}, content.ErrConflict},
		{"duplicate app", func(ctx context.Context) error {
			return s.CreateApp(Acting(ctx), tenancy.App{ID: "app-a1", OrganizationID: "org-a", Name: "again", CreatedAt: at(0), UpdatedAt: at(0)})
		}, content.ErrConflict},
		{"duplicate app id in another organization", func(ctx context.Context) error {
			return s.CreateApp(Acting(ctx), tenancy.App{ID: "app-a1", OrganizationID: "org-b", Name: "again", CreatedAt: at(0), UpdatedAt: at(0)})
		}, content.ErrConflict},
		{"app in unknown organization", func(ctx context.Context) error {
			return s.CreateApp(Acting(ctx), tenancy.App{ID: "app-new", OrganizationID: "org-unknown", Name: "n", CreatedAt: at(0), UpdatedAt: at(0)})
		}, content.ErrNotFound},
		{"duplicate token", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-1", Hash: hash("other"), OrganizationID: "org-b", CreatedAt: at(0)})
		}, content.ErrConflict},
		{"token of unknown organization", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-2", Hash: hash("2"), OrganizationID: "org-unknown", CreatedAt: at(0)})
		}, content.ErrNotFound},
		{"token of unknown app", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-3", Hash: hash("3"), OrganizationID: "org-a", AppID: "app-unknown", CreatedAt: at(0)})
		}, content.ErrNotFound},
		{"token of another organization's app", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-4", Hash: hash("4"), OrganizationID: "org-a", AppID: "app-b1", CreatedAt: at(0)})
		}, content.ErrNotFound},
		{"token of unknown organization and app", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-5", Hash: hash("5"), OrganizationID: "org-unknown", AppID: "app-a1", CreatedAt: at(0)})
		}, content.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(t.Context()); !errors.Is(err, tt.want) {
				t.Fatalf("got error %v, want %v", err, tt.want)
			}
		})
	}

	// Failed creates leave nothing behind and the originals untouched.
	ctx := t.Context()
	orgs, err := s.ListOrganizations(ctx)
	must(t, err, "ListOrganizations")
	assertIDs(t, "ListOrganizations", orgIDs(orgs), []string{"org-a", "org-b"})
	apps, err := s.ListApps(ctx, "")
	must(t, err, "ListApps")
	assertIDs(t, "ListApps", appIDs(apps), []string{"app-a1", "app-b1", "app-a2"})
	toks, err := s.ListTokens(ctx, tenancy.TokenFilter{})
	must(t, err, "ListTokens")
	assertIDs(t, "ListTokens", tokenIDs(toks), []string{"tok-1"})
	if got, err := s.Organization(ctx, "org-a"); err != nil || got.Name != "Org A" {
		t.Errorf("Organization(org-a) = %+v, %v; want the original", got, err)
	}
	if got, err := s.App(ctx, "app-a1"); err != nil || got.Name != "A1" || got.OrganizationID != "org-a" {
		t.Errorf("App(app-a1) = %+v, %v; want the original", got, err)
	}
	if got, err := s.Token(ctx, "tok-1"); err != nil || !bytes.Equal(got.Hash, hash("1")) {
		t.Errorf("Token(tok-1) = %+v, %v; want the original", got, err)
	}
}

func testNotFound(t *testing.T, s TenancyStore) {
	fixture(t, s)
	tests := []struct {
		name string
		op   func(ctx context.Context) error
	}{
		{"Organization", func(ctx context.Context) error { _, err := s.Organization(ctx, "org-unknown"); return err }},
		{"App", func(ctx context.Context) error { _, err := s.App(ctx, "app-unknown"); return err }},
		{"Token", func(ctx context.Context) error { _, err := s.Token(ctx, "tok-unknown"); return err }},
		{"RevokeToken", func(ctx context.Context) error { return s.RevokeToken(Acting(ctx), "tok-unknown", at(0)) }},
		// IDs are not confused across kinds.
		{"Organization with app id", func(ctx context.Context) error { _, err := s.Organization(ctx, "app-a1"); return err }},
		{"App with organization id", func(ctx context.Context) error { _, err := s.App(ctx, "org-a"); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(t.Context()); !errors.Is(err, content.ErrNotFound) {
				t.Fatalf("got error %v, want %v", err, content.ErrNotFound)
			}
		})
	}
}

func testListTokens(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	fixture(t, s)
	// Inserted out of order; t3 and t4 share a creation time.
	for _, tok := range []tenancy.Token{
		{ID: "t4", OrganizationID: "org-a", AppID: "app-a1", CreatedAt: at(2 * time.Second)},
		{ID: "t2", OrganizationID: "org-a", CreatedAt: at(100 * time.Millisecond)},
		{ID: "t1", OrganizationID: "org-a", AppID: "app-a1", CreatedAt: at(0)},
		{ID: "t3", OrganizationID: "org-a", AppID: "app-a2", CreatedAt: at(2 * time.Second)},
		{ID: "t5", OrganizationID: "org-b", AppID: "app-b1", CreatedAt: at(time.Second)},
		{ID: "t6", OrganizationID: "org-b", CreatedAt: at(3 * time.Second), RevokedAt: at(4 * time.Second)},
	} {
		tok.Hash, tok.Scopes = hash(tok.ID), tenancy.RuntimeScopes
		must(t, s.CreateToken(Acting(ctx), tok), "CreateToken %s", tok.ID)
	}
	tests := []struct {
		name   string
		filter tenancy.TokenFilter
		want   []string
	}{
		{"all", tenancy.TokenFilter{}, []string{"t1", "t2", "t5", "t3", "t4", "t6"}},
		{"organization", tenancy.TokenFilter{OrganizationID: "org-a"}, []string{"t1", "t2", "t3", "t4"}},
		{"other organization", tenancy.TokenFilter{OrganizationID: "org-b"}, []string{"t5", "t6"}},
		{"app", tenancy.TokenFilter{AppID: "app-a1"}, []string{"t1", "t4"}},
		{"app and its organization", tenancy.TokenFilter{OrganizationID: "org-a", AppID: "app-a2"}, []string{"t3"}},
		{"app and another organization", tenancy.TokenFilter{OrganizationID: "org-b", AppID: "app-a1"}, nil},
		{"unknown organization", tenancy.TokenFilter{OrganizationID: "org-unknown"}, nil},
		{"unknown app", tenancy.TokenFilter{AppID: "app-unknown"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListTokens(ctx, tt.filter)
			must(t, err, "ListTokens(%+v)", tt.filter)
			assertIDs(t, "ListTokens", tokenIDs(got), tt.want)
		})
	}
	all, err := s.ListTokens(ctx, tenancy.TokenFilter{OrganizationID: "org-b"})
	must(t, err, "ListTokens")
	if len(all) == 2 {
		assertToken(t, all[0], tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: "t5", Hash: hash("t5"), OrganizationID: "org-b", AppID: "app-b1", CreatedAt: at(time.Second)})
		assertToken(t, all[1], tenancy.Token{Scopes: tenancy.RuntimeScopes, ID: "t6", Hash: hash("t6"), OrganizationID: "org-b", CreatedAt: at(3 * time.Second), RevokedAt: at(4 * time.Second)})
	}
}

func testRevokeToken(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	fixture(t, s)
	for _, id := range []string{"tok-1", "tok-2"} {
		must(t, s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: id, Hash: hash(id), OrganizationID: "org-a", AppID: "app-a1", CreatedAt: at(0)}), "CreateToken %s", id)
	}
	first := at(time.Hour + 250*time.Millisecond).In(time.FixedZone("z", 3600))
	steps := []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"first revocation", first, first},
		{"later revocation keeps the first", at(2 * time.Hour), first},
		{"earlier revocation keeps the first", at(time.Minute), first},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			must(t, s.RevokeToken(Acting(ctx), "tok-1", st.at), "RevokeToken")
			got, err := s.Token(ctx, "tok-1")
			must(t, err, "Token")
			if !got.Revoked() || !got.RevokedAt.Equal(st.want) {
				t.Fatalf("RevokedAt = %v, want %v", got.RevokedAt, st.want)
			}
		})
	}
	other, err := s.Token(ctx, "tok-2")
	must(t, err, "Token")
	if other.Revoked() {
		t.Errorf("revoking tok-1 revoked tok-2 at %v", other.RevokedAt)
	}
	list, err := s.ListTokens(ctx, tenancy.TokenFilter{AppID: "app-a1"})
	must(t, err, "ListTokens")
	for _, tok := range list {
		if revoked := tok.ID == "tok-1"; tok.Revoked() != revoked {
			t.Errorf("ListTokens: %s revoked = %v, want %v", tok.ID, tok.Revoked(), revoked)
		}
	}
}

// testConcurrent has several goroutines each build and read back their own
// organization, while others list everything.
func testConcurrent(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	const workers, perWorker = 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if err := concurrentWorker(ctx, s, w, perWorker); err != nil {
				t.Errorf("worker %d: %v", w, err)
			}
		})
		wg.Go(func() {
			for range perWorker {
				if _, err := s.ListOrganizations(ctx); err != nil {
					t.Errorf("ListOrganizations: %v", err)
					return
				}
				if _, err := s.ListTokens(ctx, tenancy.TokenFilter{}); err != nil {
					t.Errorf("ListTokens: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	orgs, err := s.ListOrganizations(ctx)
	must(t, err, "ListOrganizations")
	apps, err := s.ListApps(ctx, "")
	must(t, err, "ListApps")
	toks, err := s.ListTokens(ctx, tenancy.TokenFilter{})
	must(t, err, "ListTokens")
	if len(orgs) != workers || len(apps) != workers*perWorker || len(toks) != workers*perWorker {
		t.Fatalf("got %d organizations, %d apps, %d tokens; want %d, %d, %d",
			len(orgs), len(apps), len(toks), workers, workers*perWorker, workers*perWorker)
	}
	revoked := 0
	for _, tok := range toks {
		if tok.Revoked() {
			revoked++
		}
	}
	if want := workers * ((perWorker + 1) / 2); revoked != want {
		t.Errorf("%d tokens revoked, want %d", revoked, want)
	}
}

func concurrentWorker(ctx context.Context, s TenancyStore, w, n int) error {
	org := fmt.Sprintf("org-%d", w)
	if err := s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: org, Name: org, CreatedAt: at(0)}); err != nil {
		return err
	}
	for i := range n {
		app := fmt.Sprintf("app-%d-%d", w, i)
		tok := fmt.Sprintf("tok-%d-%d", w, i)
		if err := s.CreateApp(Acting(ctx), tenancy.App{ID: app, OrganizationID: org, Name: app, CreatedAt: at(0), UpdatedAt: at(0)}); err != nil {
			return err
		}
		if err := s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: tok, Hash: hash(tok), OrganizationID: org, AppID: app, CreatedAt: at(time.Duration(i))}); err != nil {
			return err
		}
		if _, err := s.App(ctx, app); err != nil {
			return err
		}
		got, err := s.Token(ctx, tok)
		if err != nil {
			return err
		}
		if got.AppID != app || !bytes.Equal(got.Hash, hash(tok)) {
			return fmt.Errorf("Token(%s) = %+v", tok, got)
		}
		if i%2 == 0 {
			if err := s.RevokeToken(Acting(ctx), tok, at(time.Hour)); err != nil {
				return err
			}
		}
	}
	toks, err := s.ListTokens(ctx, tenancy.TokenFilter{OrganizationID: org})
	if err != nil {
		return err
	}
	if len(toks) != n {
		return fmt.Errorf("ListTokens(%s) returned %d tokens, want %d", org, len(toks), n)
	}
	return nil
}

// testConcurrentConflict races creates of the same IDs: exactly one of each
// succeeds and the others see ErrConflict.
func testConcurrentConflict(t *testing.T, s TenancyStore) {
	ctx := t.Context()
	must(t, s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org", Name: "org", CreatedAt: at(0)}), "CreateOrganization")
	must(t, s.CreateApp(Acting(ctx), tenancy.App{ID: "app", OrganizationID: "org", Name: "app", CreatedAt: at(0), UpdatedAt: at(0)}), "CreateApp")
	ops := []struct {
		name   string
		create func(ctx context.Context, i int) error
	}{
		{"organization", func(ctx context.Context, i int) error {
			return s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org-race", Name: fmt.Sprint(i), CreatedAt: at(0)})
		}},
		{"app", func(ctx context.Context, i int) error {
			return s.CreateApp(Acting(ctx), tenancy.App{ID: "app-race", OrganizationID: "org", Name: fmt.Sprint(i), CreatedAt: at(0), UpdatedAt: at(0)})
		}},
		{"token", func(ctx context.Context, i int) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok-race", Hash: hash(fmt.Sprint(i)), OrganizationID: "org", AppID: "app", CreatedAt: at(0)})
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			const n = 8
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { errs[i] = op.create(ctx, i) })
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case !errors.Is(err, content.ErrConflict):
					t.Errorf("got error %v, want nil or %v", err, content.ErrConflict)
				}
			}
			if ok != 1 {
				t.Errorf("%d creates succeeded, want 1", ok)
			}
		})
	}
}

func hash(s string) []byte {
	// Any fixed 32 bytes per input will do; the store treats the hash as opaque.
	h := make([]byte, 32)
	copy(h, s)
	h[31] = byte(len(s))
	return h
}

func assertOrg(t *testing.T, got, want tenancy.Organization) {
	t.Helper()
	if got.ID != want.ID || got.Name != want.Name || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("organization = %+v, want %+v", got, want)
	}
}

func assertApp(t *testing.T, got, want tenancy.App) {
	t.Helper()
	if got.ID != want.ID || got.OrganizationID != want.OrganizationID || got.Name != want.Name ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Errorf("app = %+v, want %+v", got, want)
	}
}

func assertToken(t *testing.T, got, want tenancy.Token) {
	t.Helper()
	if got.ID != want.ID || !bytes.Equal(got.Hash, want.Hash) || got.OrganizationID != want.OrganizationID ||
		got.AppID != want.AppID || got.Scopes != want.Scopes || got.Name != want.Name ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.RevokedAt.Equal(want.RevokedAt) ||
		got.Revoked() != want.Revoked() {
		t.Errorf("token = %+v, want %+v", got, want)
	}
}

func assertIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func orgIDs(orgs []tenancy.Organization) []string {
	var ids []string
	for _, o := range orgs {
		ids = append(ids, o.ID)
	}
	return ids
}

func appIDs(apps []tenancy.App) []string {
	var ids []string
	for _, a := range apps {
		ids = append(ids, a.ID)
	}
	return ids
}

func tokenIDs(toks []tenancy.Token) []string {
	var ids []string
	for _, tok := range toks {
		ids = append(ids, tok.ID)
	}
	return ids
}

// testTimesAreUTC: times given in any zone come back in UTC, to the
// nanosecond; times the store sets come back as it returned them.
func testTimesAreUTC(t *testing.T, s content.Store) {
	ctx := context.Background()
	zone := time.FixedZone("UTC-7", -7*60*60)
	created := time.Date(2025, 6, 1, 20, 0, 0, 123456789, zone)
	revoked := created.Add(time.Nanosecond)
	if err := s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org", Name: "Org", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApp(Acting(ctx), tenancy.App{ID: "app", OrganizationID: "org", Name: "App", CreatedAt: created, UpdatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "tok", Hash: []byte{1}, OrganizationID: "org", AppID: "app", CreatedAt: created}); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(Acting(ctx), "tok", revoked); err != nil {
		t.Fatal(err)
	}
	org, err := s.Organization(ctx, "org")
	if err != nil {
		t.Fatal(err)
	}
	app, err := s.App(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Token(ctx, "tok")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.CreateRecord(Acting(ctx), rec(t, content.KindFAQ, `{"appId":"app","id":"f","questions":["q"],"answer":"a"}`))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := s.Record(ctx, "app", content.KindFAQ, "f")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		got, want time.Time
	}{
		{"organization created", org.CreatedAt, created},
		{"app created", app.CreatedAt, created},
		{"app updated", app.UpdatedAt, created},
		{"token created", tok.CreatedAt, created},
		{"token revoked", tok.RevokedAt, revoked},
		{"record created", stored.CreatedAt, r.CreatedAt},
		{"record updated", stored.UpdatedAt, r.UpdatedAt},
	} {
		if tt.got.Location() != time.UTC || !tt.got.Equal(tt.want) {
			t.Errorf("%s = %v, want %v in UTC", tt.name, tt.got, tt.want.UTC())
		}
	}
}

// testErrorsNameTheRecord: every failure says what it was about.
func testErrorsNameTheRecord(t *testing.T, s content.Store) {
	ctx := context.Background()
	if err := s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func(context.Context) error
		want string
	}{
		{"missing app", func(ctx context.Context) error { _, err := s.App(ctx, "nope"); return err }, `app "nope": not found`},
		{"duplicate organization", func(ctx context.Context) error {
			return s.CreateOrganization(Acting(ctx), tenancy.Organization{ID: "org", CreatedAt: time.Now()})
		}, `organization "org": already exists`},
		{"token for missing app", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "t", Hash: []byte{1}, OrganizationID: "org", AppID: "nope", CreatedAt: time.Now()})
		}, `app "nope": not found`},
		{"token for missing organization", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "t", Hash: []byte{1}, OrganizationID: "nope", CreatedAt: time.Now()})
		}, `organization "nope": not found`},
		{"record of missing app", func(ctx context.Context) error {
			_, err := s.CreateRecord(Acting(ctx), content.Record{Kind: content.KindIntent, AppID: "nope", ID: "x", Doc: []byte(`{}`)})
			return err
		}, `app "nope": not found`},
		{"empty hash", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{Scopes: tenancy.AllScopes, ID: "t", OrganizationID: "org", CreatedAt: time.Now()})
		}, `empty hash`},
		{"no scopes", func(ctx context.Context) error {
			return s.CreateToken(Acting(ctx), tenancy.Token{ID: "t", Hash: []byte{1}, OrganizationID: "org-a", CreatedAt: time.Now()})
		}, `a token needs at least one scope`},
		{"empty id", func(ctx context.Context) error {
			return s.CreateOrganization(Acting(ctx), tenancy.Organization{CreatedAt: time.Now()})
		}, `empty id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op(ctx)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// Acting returns ctx carrying the actor of a test's writes (the stores
// refuse a change nobody makes): the local user "test".
func Acting(ctx context.Context) context.Context {
	return tenancy.WithActor(ctx, tenancy.Actor{LocalUser: "test"})
}
