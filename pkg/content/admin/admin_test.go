package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/assistantcms/cms/pkg/auth"
	"github.com/assistantcms/cms/pkg/content"
	"github.com/assistantcms/cms/pkg/content/contentdb"
	"github.com/assistantcms/cms/pkg/sqldb"
	"github.com/assistantcms/cms/pkg/tenancy"
)

// env is a content database file shared by the commands of one test, each
// opening it afresh as separate invocations of the binary would.
type env struct {
	t    *testing.T
	path string
}

func newEnv(t *testing.T) *env {
	return &env{t: t, path: filepath.Join(t.TempDir(), "content.db")}
}

func (e *env) open(ctx context.Context) (content.Store, error) {
	return contentdb.OpenDB(ctx, e.path)
}

type result struct {
	code           int
	stdout, stderr string
}

func (e *env) run(args ...string) result {
	e.t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(e.t.Context(), args, &stdout, &stderr, e.open)
	return result{code, stdout.String(), stderr.String()}
}

// must runs a command that has to succeed and returns its output.
func (e *env) must(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != ExitOK {
		e.t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (e *env) store() content.Store {
	e.t.Helper()
	s, err := contentdb.OpenDB(e.t.Context(), e.path)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

// seed creates org-1 with app-1 and org-2 with app-2.
func (e *env) seed() {
	e.t.Helper()
	e.must("org", "create", "--name", "One", "--id", "org-1")
	e.must("org", "create", "--name", "Two", "--id", "org-2")
	e.must("app", "create", "--org", "org-1", "--name", "App One", "--id", "app-1")
	e.must("app", "create", "--org", "org-2", "--name", "App Two", "--id", "app-2")
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     []string // substrings stdout must contain
		stderr     []string // substrings stderr must contain
		noStdout   bool
		stdoutOnly string // exact stdout, when set
	}{
		{name: "no args", args: nil, code: ExitUsage, noStdout: true,
			stderr: []string{"Usage:", "org create", "org list", "app create", "app list", "token create", "token list", "token revoke", "demo", "migrate"}},
		{name: "help", args: []string{"help"}, code: ExitOK,
			stdout: []string{"Usage:", "org create --name NAME [--id ID]", "token create (--app APPID | --org ORGID)", "token revoke ID", "demo", "migrate"}},
		{name: "--help", args: []string{"--help"}, code: ExitOK, stdout: []string{"Commands:"}},
		{name: "help of a command", args: []string{"help", "token", "create"}, code: ExitOK,
			stdout: []string{"Usage: api token create", "-quiet"}},
		{name: "help of a group", args: []string{"help", "token"}, code: ExitOK,
			stdout: []string{"token create", "token list", "token revoke"}},
		{name: "help of unknown", args: []string{"help", "nope"}, code: ExitUsage, stderr: []string{`unknown command "nope"`}},
		{name: "-h of a command", args: []string{"org", "create", "-h"}, code: ExitOK, stderr: []string{"Usage: api org create", "-name"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: ExitUsage, stderr: []string{`unknown command "frobnicate"`, "Usage:"}},
		{name: "group without subcommand", args: []string{"org"}, code: ExitUsage, stderr: []string{"missing subcommand", "org create", "org list"}},
		{name: "unknown subcommand", args: []string{"app", "delete"}, code: ExitUsage, stderr: []string{`unknown subcommand "delete"`, "app list"}},
		{name: "unknown flag", args: []string{"org", "list", "--bogus"}, code: ExitUsage, stderr: []string{"flag provided but not defined: -bogus", "Usage: api org list"}},
		{name: "unexpected argument", args: []string{"org", "list", "extra"}, code: ExitUsage, stderr: []string{`unexpected argument "extra"`}},

		{name: "org create", args: []string{"org", "create", "--name", "Three", "--id", "org-3"}, code: ExitOK, stdoutOnly: "org-3\n"},
		{name: "org create single dash", args: []string{"org", "create", "-name", "Three", "-id", "org-3"}, code: ExitOK, stdoutOnly: "org-3\n"},
		{name: "org create without name", args: []string{"org", "create", "--id", "org-3"}, code: ExitUsage, stderr: []string{"--name is required"}},
		{name: "org create with bad id", args: []string{"org", "create", "--name", "x", "--id", "has space"}, code: ExitUsage, stderr: []string{`--id "has space"`}},
		{name: "org create with dash id", args: []string{"org", "create", "--name", "x", "--id", "-x"}, code: ExitUsage, stderr: []string{`--id "-x"`}},
		{name: "org create with long id", args: []string{"org", "create", "--name", "x", "--id", strings.Repeat("a", 65)}, code: ExitUsage, stderr: []string{"longer than 64"}},
		{name: "org create duplicate", args: []string{"org", "create", "--name", "x", "--id", "org-1"}, code: ExitFailure, stderr: []string{`organization "org-1" already exists`}},
		{name: "org list", args: []string{"org", "list"}, code: ExitOK, stdout: []string{"ID", "NAME", "CREATED", "org-1", "One", "org-2", "Two"}},

		{name: "app create", args: []string{"app", "create", "--org", "org-1", "--name", "Another", "--id", "app-3"}, code: ExitOK, stdoutOnly: "app-3\n"},
		{name: "app create unknown org", args: []string{"app", "create", "--org", "org-x", "--name", "n"}, code: ExitFailure, stderr: []string{`organization "org-x" not found`}},
		{name: "app create duplicate", args: []string{"app", "create", "--org", "org-2", "--name", "n", "--id", "app-1"}, code: ExitFailure, stderr: []string{`app "app-1" already exists`}},
		{name: "app create without org", args: []string{"app", "create", "--name", "n"}, code: ExitUsage, stderr: []string{"--org is required"}},
		{name: "app create without name", args: []string{"app", "create", "--org", "org-1"}, code: ExitUsage, stderr: []string{"--name is required"}},
		{name: "app list", args: []string{"app", "list"}, code: ExitOK, stdout: []string{"ID", "ORG", "NAME", "app-1", "org-1", "App One", "app-2", "App Two"}},
		{name: "app list unknown org", args: []string{"app", "list", "--org", "org-x"}, code: ExitFailure, stderr: []string{`organization "org-x" not found`}},

		{name: "token create without scope", args: []string{"token", "create"}, code: ExitUsage, stderr: []string{"exactly one of --app or --org"}},
		{name: "token create with both scopes", args: []string{"token", "create", "--app", "app-1", "--org", "org-1"}, code: ExitUsage, stderr: []string{"exactly one of --app or --org"}},
		{name: "token create unknown app", args: []string{"token", "create", "--app", "app-x"}, code: ExitFailure, stderr: []string{`app "app-x" not found`}},
		{name: "token create unknown org", args: []string{"token", "create", "--org", "org-x"}, code: ExitFailure, stderr: []string{`organization "org-x" not found`}},
		{name: "token create", args: []string{"token", "create", "--app", "app-1", "--name", "ci"}, code: ExitOK, stdout: []string{"cannot be shown again"}},
		{name: "token create runtime", args: []string{"token", "create", "--app", "app-1", "--runtime"}, code: ExitOK, stdout: []string{"with scopes content:read,events:write", "a web page may carry it"}},
		{name: "token create management", args: []string{"token", "create", "--app", "app-1", "--management"}, code: ExitOK, stdout: []string{"with scopes content:draft,content:read,content:write,events:read,events:write", "Keep it secret"}},
		{name: "token create preview", args: []string{"token", "create", "--app", "app-1", "--preview"}, code: ExitOK, stdout: []string{"with scopes content:draft,content:read,events:write", "A preview runtime token"}},
		{name: "token create scopes preset preview", args: []string{"token", "create", "--app", "app-1", "--scopes", "preview"}, code: ExitOK, stdout: []string{"with scopes content:draft,content:read,events:write:"}},
		{name: "token create scopes", args: []string{"token", "create", "--org", "org-1", "--scopes", "content:read,content:write"}, code: ExitOK, stdout: []string{"with scopes content:read,content:write:", "Keep it secret"}},
		{name: "token create scopes preset", args: []string{"token", "create", "--org", "org-1", "--scopes", "runtime"}, code: ExitOK, stdout: []string{"with scopes content:read,events:write:"}},
		{name: "token create unknown scope", args: []string{"token", "create", "--app", "app-1", "--scopes", "content:read,admin"}, code: ExitUsage, stderr: []string{`--scopes: unknown scope "admin"; scopes are content:draft, content:read, content:write, events:read, events:write`}},
		{name: "token create no scope", args: []string{"token", "create", "--app", "app-1", "--scopes", ","}, code: ExitUsage, stderr: []string{"--scopes: name at least one scope"}},
		{name: "token create two presets", args: []string{"token", "create", "--app", "app-1", "--runtime", "--management"}, code: ExitUsage, stderr: []string{"at most one of --runtime, --preview, --management and --scopes"}},
		{name: "token list empty", args: []string{"token", "list"}, code: ExitOK, stdoutOnly: "ID  LEVEL  ORG  APP  SCOPES  NAME  CREATED  STATUS\n"},
		{name: "token list json empty", args: []string{"token", "list", "--json"}, code: ExitOK, stdoutOnly: "[]\n"},
		{name: "token list unknown app", args: []string{"token", "list", "--app", "app-x"}, code: ExitFailure, stderr: []string{`app "app-x" not found`}},
		{name: "token list unknown org", args: []string{"token", "list", "--org", "org-x"}, code: ExitFailure, stderr: []string{`organization "org-x" not found`}},
		{name: "token revoke unknown", args: []string{"token", "revoke", "0123456789abcdef"}, code: ExitFailure, stderr: []string{`token "0123456789abcdef" not found`}},
		{name: "token revoke without id", args: []string{"token", "revoke"}, code: ExitUsage, stderr: []string{"missing argument"}},
		{name: "token revoke with two ids", args: []string{"token", "revoke", "a", "b"}, code: ExitUsage, stderr: []string{`unexpected argument "b"`}},

		{name: "migrate", args: []string{"migrate"}, code: ExitOK, stdoutOnly: fmt.Sprintf("Schema version %d.\n", len(sqldb.Migrations(sqldb.SQLite)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed()
			r := e.run(tt.args...)
			if r.code != tt.code {
				t.Errorf("exit code = %d, want %d", r.code, tt.code)
			}
			for _, want := range tt.stdout {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout does not contain %q", want)
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not contain %q", want)
				}
			}
			if tt.noStdout && r.stdout != "" {
				t.Errorf("stdout is not empty")
			}
			if tt.stdoutOnly != "" && r.stdout != tt.stdoutOnly {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.stdoutOnly)
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
		})
	}
}

func TestHelpDoesNotOpenDatabase(t *testing.T) {
	open := func(context.Context) (content.Store, error) {
		t.Error("database opened")
		return nil, errors.New("unexpected open")
	}
	for _, args := range [][]string{nil, {"help"}, {"help", "org", "create"}, {"org"}, {"nope"}, {"org", "create"}, {"token", "create", "-h"}, {"token", "create"}} {
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), args, &stdout, &stderr, open); code == ExitFailure {
			t.Errorf("%q: exit %d: %s", args, code, stderr.String())
		}
	}
}

func TestOpenFailure(t *testing.T) {
	open := func(context.Context) (content.Store, error) { return nil, errors.New("disk on fire") }
	var stdout, stderr bytes.Buffer
	if code := Run(t.Context(), []string{"org", "list"}, &stdout, &stderr, open); code != ExitFailure {
		t.Errorf("exit code = %d, want %d", code, ExitFailure)
	}
	if want := "open content database: disk on fire"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
	}
}

func TestGeneratedIDs(t *testing.T) {
	e := newEnv(t)
	org := strings.TrimSpace(e.must("org", "create", "--name", "Generated"))
	app := strings.TrimSpace(e.must("app", "create", "--org", org, "--name", "Generated"))
	for _, tt := range []struct{ id, pattern string }{
		{org, `^org-[0-9a-f]{8}$`},
		{app, `^app-[0-9a-f]{8}$`},
	} {
		if !regexp.MustCompile(tt.pattern).MatchString(tt.id) {
			t.Errorf("id %q does not match %s", tt.id, tt.pattern)
		}
	}
	got, err := e.store().App(t.Context(), app)
	if err != nil || got.OrganizationID != org || got.Name != "Generated" {
		t.Errorf("App(%s) = %+v, %v", app, got, err)
	}
}

var tokenLine = regexp.MustCompile(`(?m)^cms_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$`)

func TestTokenCreate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantOrg string
		wantApp string
		wantNm  string
		quiet   bool
	}{
		{"app token", []string{"--app", "app-2", "--name", "deploy"}, "org-2", "app-2", "deploy", false},
		{"org token", []string{"--org", "org-1"}, "org-1", "", "", false},
		{"quiet app token", []string{"--app", "app-1", "--quiet"}, "org-1", "app-1", "", true},
		{"quiet org token", []string{"--quiet", "--org", "org-2", "--name", "x"}, "org-2", "", "x", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.seed()
			out := e.must(append([]string{"token", "create"}, tt.args...)...)
			secret := tokenLine.FindString(out)
			if secret == "" {
				t.Fatalf("no token line in output:\n%s", out)
			}
			if tt.quiet && out != secret+"\n" {
				t.Errorf("quiet output = %q, want only the token", out)
			}
			if !tt.quiet && !strings.Contains(out, "cannot be shown again") {
				t.Errorf("output lacks the warning:\n%s", out)
			}
			id, err := auth.ParseToken(secret)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := e.store().Token(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !auth.HashMatches(tok.Hash, secret) {
				t.Error("stored hash does not match the printed token")
			}
			if tok.OrganizationID != tt.wantOrg || tok.AppID != tt.wantApp || tok.Name != tt.wantNm || tok.Revoked() {
				t.Errorf("stored token = %+v, want org %q app %q name %q, active", tok, tt.wantOrg, tt.wantApp, tt.wantNm)
			}
		})
	}
}

func TestTokenListNeverShowsSecrets(t *testing.T) {
	e := newEnv(t)
	e.seed()
	var secrets []string
	for _, args := range [][]string{
		{"--app", "app-1", "--name", "first"},
		{"--org", "org-1", "--name", "org wide"},
		{"--app", "app-2"},
	} {
		secrets = append(secrets, strings.TrimSpace(e.must(append([]string{"token", "create", "--quiet"}, args...)...)))
	}
	for _, args := range [][]string{
		{"token", "list"}, {"token", "list", "--json"},
		{"token", "list", "--org", "org-1"}, {"token", "list", "--app", "app-1", "--json"},
	} {
		out := e.must(args...)
		for _, s := range secrets {
			_, secretPart, _ := strings.Cut(strings.TrimPrefix(s, "cms_"), "_")
			sum := auth.HashToken(s)
			for _, leak := range []string{
				s, secretPart,
				hex.EncodeToString(sum), base64.StdEncoding.EncodeToString(sum), base64.RawURLEncoding.EncodeToString(sum),
			} {
				if strings.Contains(out, leak) {
					t.Errorf("%q output contains a secret or hash %q:\n%s", args, leak, out)
				}
			}
		}
		if strings.Contains(strings.ToLower(out), "hash") {
			t.Errorf("%q output mentions a hash:\n%s", args, out)
		}
	}
}

func TestTokenListFilters(t *testing.T) {
	e := newEnv(t)
	e.seed()
	id := func(secret string) string {
		id, err := auth.ParseToken(strings.TrimSpace(secret))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	app1 := id(e.must("token", "create", "--quiet", "--app", "app-1", "--name", "one"))
	org1 := id(e.must("token", "create", "--quiet", "--org", "org-1", "--name", "org one", "--management"))
	app2 := id(e.must("token", "create", "--quiet", "--app", "app-2"))
	e.must("token", "revoke", org1)

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"all", nil, []string{app1, org1, app2}},
		{"org", []string{"--org", "org-1"}, []string{app1, org1}},
		{"app", []string{"--app", "app-2"}, []string{app2}},
		{"org and app", []string{"--org", "org-1", "--app", "app-1"}, []string{app1}},
		{"org and other app", []string{"--org", "org-2", "--app", "app-1"}, nil},
	}
	type tokenJSON struct {
		ID             string   `json:"id"`
		Scope          string   `json:"scope"`
		Scopes         []string `json:"scopes"`
		OrganizationID string   `json:"organization_id"`
		AppID          string   `json:"app_id"`
		Name           string   `json:"name"`
		CreatedAt      string   `json:"created_at"`
		RevokedAt      string   `json:"revoked_at"`
		Status         string   `json:"status"`
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []tokenJSON
			out := e.must(append([]string{"token", "list", "--json"}, tt.args...)...)
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			var ids []string
			for _, tok := range got {
				ids = append(ids, tok.ID)
				wantScope, wantStatus := "app", "active"
				if tok.AppID == "" {
					wantScope = "org"
				}
				if tok.ID == org1 {
					wantStatus = "revoked"
					if tok.RevokedAt == "" {
						t.Errorf("%s: no revoked_at", tok.ID)
					}
				}
				wantScopes := "content:read events:write"
				if tok.ID == org1 {
					wantScopes = "content:draft content:read content:write events:read events:write"
				}
				if got := strings.Join(tok.Scopes, " "); got != wantScopes {
					t.Errorf("%s: scopes %q, want %q", tok.ID, got, wantScopes)
				}
				if tok.Scope != wantScope || tok.Status != wantStatus || tok.CreatedAt == "" {
					t.Errorf("token %+v: want scope %s, status %s", tok, wantScope, wantStatus)
				}
			}
			if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ids = %v, want %v", ids, tt.want)
			}

			table := e.must(append([]string{"token", "list"}, tt.args...)...)
			lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
			if len(lines) != len(tt.want)+1 {
				t.Fatalf("table has %d lines, want %d:\n%s", len(lines), len(tt.want)+1, table)
			}
			if fields := strings.Fields(lines[0]); strings.Join(fields, " ") != "ID LEVEL ORG APP SCOPES NAME CREATED STATUS" {
				t.Errorf("header = %q", lines[0])
			}
			for i, want := range tt.want {
				if !strings.HasPrefix(lines[i+1], want+" ") {
					t.Errorf("line %d = %q, want token %s", i+1, lines[i+1], want)
				}
			}
		})
	}

	table := e.must("token", "list", "--org", "org-1")
	for _, want := range []string{"app-1", "org one", "revoked", "active"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestTokenRevoke(t *testing.T) {
	e := newEnv(t)
	e.seed()
	secret := strings.TrimSpace(e.must("token", "create", "--quiet", "--app", "app-1"))
	id, _ := auth.ParseToken(secret)

	steps := []struct {
		name string
		arg  string
		want string
	}{
		{"by id", id, "revoked."},
		{"again", id, "already revoked at"},
		{"by token string", secret, "already revoked at"},
	}
	for _, st := range steps {
		out := e.must("token", "revoke", st.arg)
		if !strings.Contains(out, st.want) {
			t.Errorf("%s: output %q lacks %q", st.name, out, st.want)
		}
		if strings.Contains(out, secret) {
			t.Errorf("%s: output shows the token", st.name)
		}
	}
	tok, err := e.store().Token(t.Context(), id)
	if err != nil || !tok.Revoked() {
		t.Errorf("token after revoke = %+v, %v", tok, err)
	}
}

func TestDemo(t *testing.T) {
	e := newEnv(t)
	var secrets []string
	for i, args := range [][]string{{"demo"}, {"demo", "--quiet"}, {"demo", "-quiet"}} {
		out := e.must(args...)
		secret := tokenLine.FindString(out)
		if secret == "" {
			t.Fatalf("run %d: no token in output:\n%s", i, out)
		}
		if args[len(args)-1] != "demo" && out != secret+"\n" {
			t.Errorf("run %d: quiet output = %q", i, out)
		}
		secrets = append(secrets, secret)
	}
	if secrets[0] == secrets[1] || secrets[1] == secrets[2] {
		t.Error("demo returned the same token twice")
	}
	s := e.store()
	ctx := t.Context()
	orgs, err := s.ListOrganizations(ctx)
	if err != nil || len(orgs) != 1 || orgs[0].ID != "demo-org" {
		t.Errorf("organizations = %+v, %v; want demo-org only", orgs, err)
	}
	apps, err := s.ListApps(ctx, "")
	if err != nil || len(apps) != 1 || apps[0].ID != "demo-app" || apps[0].OrganizationID != "demo-org" {
		t.Errorf("apps = %+v, %v; want demo-app only", apps, err)
	}
	toks, err := s.ListTokens(ctx, tenancy.TokenFilter{AppID: "demo-app"})
	if err != nil || len(toks) != len(secrets) {
		t.Fatalf("tokens = %+v, %v; want %d", toks, err, len(secrets))
	}
	for i, tok := range toks {
		if tok.Name != "demo-runtime" || tok.Scopes != tenancy.RuntimeScopes || tok.OrganizationID != "demo-org" || !auth.HashMatches(tok.Hash, secrets[i]) {
			t.Errorf("token %d = %+v does not match printed token", i, tok)
		}
	}
	out := e.must("demo", "--management", "--quiet")
	toks, err = s.ListTokens(ctx, tenancy.TokenFilter{AppID: "demo-app"})
	if err != nil || len(toks) != len(secrets)+1 {
		t.Fatalf("tokens = %+v, %v; want %d", toks, err, len(secrets)+1)
	}
	if tok := toks[len(toks)-1]; tok.Name != "demo-management" || tok.Scopes != tenancy.AllScopes || !auth.HashMatches(tok.Hash, strings.TrimSpace(out)) {
		t.Errorf("management token = %+v does not match printed token", tok)
	}
}

// TestDemoRotate runs demo as a seed that runs at every start would: with
// --rotate, exactly the last printed demo token works, and tokens that are
// not the demo's are left alone.
func TestDemoRotate(t *testing.T) {
	e := newEnv(t)
	e.must("demo", "--quiet")
	e.must("demo", "--quiet")
	own := tokenLine.FindString(e.must("token", "create", "--app", "demo-app", "--name", "web"))
	orgTok := tokenLine.FindString(e.must("token", "create", "--org", "demo-org", "--name", "demo"))
	// As the demo named its tokens before they had scopes.
	e.must("token", "create", "--app", "demo-app", "--name", "demo", "--management")
	steps := []struct {
		args        []string
		wantRevoked string // stdout line, or "" for none
		// Active tokens in creation order: the user's app token, the
		// organization token, then the demo's.
		wantActive []string
	}{
		{[]string{"demo", "--quiet", "--rotate"}, "", []string{"web=printed", "demo=printed", "demo-runtime=printed"}},
		{[]string{"demo", "--rotate"}, "Revoked 1 earlier demo token(s).\n", []string{"web=printed", "demo=printed", "demo-runtime=printed"}},
		{[]string{"demo", "--rotate", "--management"}, "", []string{"web=printed", "demo=printed", "demo-runtime", "demo-management=printed"}},
		{[]string{"demo", "--rotate", "--management"}, "Revoked 1 earlier demo token(s).\n", []string{"web=printed", "demo=printed", "demo-runtime", "demo-management=printed"}},
	}
	for i, step := range steps {
		out := e.must(step.args...)
		latest := tokenLine.FindString(out)
		if latest == "" {
			t.Fatalf("step %d: no token in output:\n%s", i, out)
		}
		if step.args[1] == "--quiet" && out != latest+"\n" {
			t.Errorf("step %d: quiet output = %q, want the token alone", i, out)
		}
		if got := strings.Contains(out, "Revoked"); got != (step.wantRevoked != "") || !strings.Contains(out, step.wantRevoked) {
			t.Errorf("step %d: output %q, want revocation line %q", i, out, step.wantRevoked)
		}
		toks, err := e.store().ListTokens(t.Context(), tenancy.TokenFilter{OrganizationID: "demo-org"})
		if err != nil {
			t.Fatal(err)
		}
		var active []string
		for _, tok := range toks {
			if !tok.Revoked() {
				active = append(active, tok.Name)
				for _, secret := range []string{latest, own, orgTok} {
					if auth.HashMatches(tok.Hash, secret) {
						active[len(active)-1] += "=printed"
					}
				}
			}
		}
		if strings.Join(active, ",") != strings.Join(step.wantActive, ",") {
			t.Errorf("step %d: active tokens %v, want %v", i, active, step.wantActive)
		}
	}
}

func TestDemoKeepsExistingRecords(t *testing.T) {
	e := newEnv(t)
	e.must("org", "create", "--id", "demo-org", "--name", "Mine")
	e.must("app", "create", "--org", "demo-org", "--id", "demo-app", "--name", "My app")
	e.must("demo", "--quiet")
	app, err := e.store().App(t.Context(), "demo-app")
	if err != nil || app.Name != "My app" {
		t.Errorf("App(demo-app) = %+v, %v; want the existing app", app, err)
	}
}

func TestListJSON(t *testing.T) {
	e := newEnv(t)
	e.seed()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"org", "list", "--json"}, []string{"org-1", "org-2"}},
		{[]string{"app", "list", "--json"}, []string{"app-1", "app-2"}},
		{[]string{"app", "list", "--org", "org-2", "--json"}, []string{"app-2"}},
	}
	for _, tt := range tests {
		var got []struct {
			ID string `json:"id"`
		}
		out := e.must(tt.args...)
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: decode %s: %v", tt.args, out, err)
		}
		var ids []string
		for _, g := range got {
			ids = append(ids, g.ID)
		}
		if strings.Join(ids, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%q: ids = %v, want %v", tt.args, ids, tt.want)
		}
	}
}

func TestTableSanitizesNames(t *testing.T) {
	e := newEnv(t)
	e.must("org", "create", "--id", "org-x", "--name", "evil\tname\nsecond line\x1b[31m")
	out := e.must("org", "list")
	if lines := strings.Split(strings.TrimRight(out, "\n"), "\n"); len(lines) != 2 {
		t.Errorf("table has %d lines, want 2:\n%s", len(lines), out)
	}
	if strings.Contains(out, "\x1b") {
		t.Error("table contains an escape character")
	}
}
